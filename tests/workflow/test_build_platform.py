"""workflow/build_platform.py: the pins, what determines a result's bits, and where make verify expects them."""

import os
import subprocess

import pytest

from workflow.build_platform import (
    IDENTITY,
    ROOT,
    code_paths,
    cpu_fields,
    differences,
    foreign_notice,
    numerical_pins,
    pinned_environment,
    platform_file,
    record_platform,
    recorded_platforms,
    this_platform,
    unpinned_environment,
)

INTEL = {"machine": "x86_64", "vendor": "GenuineIntel", "cpu": "Intel(R) Xeon(R) Processor",
         "cpu_id": "family 6 model 143 stepping 8", "isa": "sse2 avx avx2 fma f16c avx512f",
         "pins": "ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=AVX2", "torch": "2.13.0+cpu",
         "vector_unit": "AVX2", "mkl": "2024.2-Product Build 20240605", "onednn": "3.12.0",
         "mkl_path": "COMPATIBLE", "onednn_isa": "max AVX2"}
CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
stepping\t: 1
flags\t\t: fpu sse sse2 avx fma avx2 sha_ni

processor\t: 1
vendor_id\t: SomethingElse
"""


def test_the_pins_are_read_from_their_file():
    assert numerical_pins() == {"MKL_CBWR": "COMPATIBLE", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                                "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
                                "OPENBLAS_CORETYPE": "Haswell"}
    assert pinned_environment({"MKL_CBWR": "AUTO", "HOME": "/h"}) == {**numerical_pins(), "HOME": "/h"}
    assert unpinned_environment({"MKL_CBWR": "AUTO", "HOME": "/h"}) == {"HOME": "/h"}


def test_a_malformed_pins_line_is_named(tmp_path):
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs/numerics.env").write_text("# a comment\n\nMKL_CBWR=COMPATIBLE\nnot a pin\n")
    with pytest.raises(ValueError, match=r"envs/numerics.env:4: 'not a pin' is not KEY=VALUE"):
        numerical_pins(tmp_path)


def test_make_exports_the_pins_to_every_command():
    shown = subprocess.run(["make", "-s", "--eval", "pins: ; @env", "pins"], cwd=ROOT, capture_output=True,
                           text=True, check=True, env={**os.environ, "MKL_CBWR": "AUTO"}).stdout.splitlines()
    assert {f"{key}={value}" for key, value in numerical_pins().items()} <= set(shown)


def test_the_cpu_is_read_from_its_first_processor():
    assert cpu_fields(CPUINFO) == {"vendor": "AuthenticAMD", "cpu": "AMD EPYC",
                                   "cpu_id": "family 25 model 1 stepping 1", "isa": "sse2 avx avx2 fma"}
    assert cpu_fields("")["vendor"] == "unknown"


def test_a_path_left_to_the_cpu_names_the_cpu():
    amd = cpu_fields(CPUINFO)
    assert code_paths(numerical_pins(), amd) == {"mkl_path": "COMPATIBLE", "onednn_isa": "max AVX2"}
    assert code_paths({}, amd) == {"mkl_path": "default dispatch on AuthenticAMD family 25 model 1 stepping 1",
                                   "onednn_isa": "default dispatch on AuthenticAMD family 25 model 1 stepping 1"}
    assert code_paths({"MKL_CBWR": "AVX2"}, amd)["mkl_path"].startswith("AVX2 dispatch on AuthenticAMD")


def test_this_platform_is_read_under_the_pins():
    here = this_platform()
    assert set(IDENTITY) | {"vendor", "cpu", "cpu_id", "isa", "pins"} == set(here)
    assert here["vector_unit"] == "AVX2"  # ATEN_CPU_CAPABILITY=avx2, whatever this CPU has
    assert here["mkl_path"] == "COMPATIBLE"
    assert here["mkl"].startswith("20")
    assert here["onednn"][0].isdigit()


def test_the_record_sits_in_the_profile_results():
    assert platform_file("default") == "results/platform.json"
    assert platform_file("smoke") == "results/smoke/platform.json"


def test_a_platform_is_recorded_once_and_another_is_added(tmp_path):
    assert recorded_platforms(tmp_path, "default") == []
    assert record_platform(tmp_path, "default", INTEL) == "results/platform.json"
    record_platform(tmp_path, "default", {**INTEL, "vendor": "AuthenticAMD", "cpu": "AMD EPYC"})  # same bits
    assert recorded_platforms(tmp_path, "default") == [INTEL]
    other = {**INTEL, "torch": "2.14.1"}
    record_platform(tmp_path, "default", other)
    assert recorded_platforms(tmp_path, "default") == [INTEL, other]


def test_under_the_pins_another_vendor_computes_the_same_bits():
    amd = {**INTEL, "vendor": "AuthenticAMD", "cpu": "AMD EPYC", "cpu_id": "family 25 model 1 stepping 1"}
    assert foreign_notice([], amd) is None  # nothing recorded: a local build, made here
    assert foreign_notice([INTEL], amd) is None


def test_without_the_pins_a_vendor_alone_makes_a_platform_foreign():
    """A record whose oneMKL path was the CPU's own dispatch differs from the same machine of another vendor."""
    dispatch = {**INTEL, **code_paths({}, INTEL)}
    amd = {**dispatch, "vendor": "AuthenticAMD", "cpu_id": "family 25 model 1 stepping 1"}
    amd.update(code_paths({}, amd))
    assert differences(dispatch, amd) == [
        f"mkl_path: {dispatch['mkl_path']} -> {amd['mkl_path']}",
        f"onednn_isa: {dispatch['onednn_isa']} -> {amd['onednn_isa']}"]
    notice = foreign_notice([dispatch], amd)
    assert "bit-identity is not expected" in notice
    assert "GenuineIntel family 6 model 143" in notice
    assert "AuthenticAMD family 25 model 1" in notice


def test_a_record_from_before_the_pins_is_foreign():
    old = {"machine": "x86_64", "cpu": "Intel(R) Xeon(R) Processor", "vector_unit": "AVX512", "torch": "2.13.0+cpu"}
    assert differences(old, INTEL) == ["mkl: not recorded -> 2024.2-Product Build 20240605",
                                       "onednn: not recorded -> 3.12.0", "vector_unit: AVX512 -> AVX2",
                                       "mkl_path: not recorded -> COMPATIBLE", "onednn_isa: not recorded -> max AVX2"]
