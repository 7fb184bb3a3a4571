"""workflow/build_platform.py: the published build's platforms, and the tolerance make verify takes from them."""

import torch

from workflow.build_platform import (
    platform_file,
    record_platform,
    recorded_platforms,
    this_platform,
    tolerance,
)

HERE = {"machine": "x86_64", "cpu": "Intel(R) Xeon(R) Processor", "vector_unit": "AVX512", "torch": "2.13.0+cpu"}


def test_this_platform_names_what_torch_dispatches_to():
    here = this_platform()
    assert here["vector_unit"] == torch.backends.cpu.get_cpu_capability()
    assert here["torch"] == torch.__version__
    assert set(here) == {"machine", "cpu", "vector_unit", "torch"}
    assert all(here.values())


def test_the_record_sits_in_the_profile_results():
    assert platform_file("default") == "results/platform.json"
    assert platform_file("smoke") == "results/smoke/platform.json"


def test_a_platform_is_recorded_once_and_another_is_added(tmp_path):
    assert recorded_platforms(tmp_path, "default") == []
    assert record_platform(tmp_path, "default", HERE) == "results/platform.json"
    record_platform(tmp_path, "default", {**HERE, "cpu": "renamed"})  # the same for bit-identity: not added
    assert recorded_platforms(tmp_path, "default") == [HERE]
    other = {**HERE, "vector_unit": "AVX2"}
    record_platform(tmp_path, "default", other)
    assert recorded_platforms(tmp_path, "default") == [HERE, other]


def test_bit_identity_is_expected_only_on_the_recorded_platform():
    assert tolerance([], HERE, 1e-5) == (0.0, None)  # nothing recorded: a local build, made here
    assert tolerance([HERE], {**HERE, "cpu": "another model"}, 1e-5) == (0.0, None)
    rtol, notice = tolerance([HERE], {**HERE, "vector_unit": "AVX2"}, 1e-5)
    assert rtol == 1e-5
    assert "vector_unit AVX512" in notice
    assert "vector_unit AVX2" in notice
    assert "1e-05" in notice
    assert tolerance([HERE, {**HERE, "torch": "2.14.1"}], HERE, 2e-5)[0] == 2e-5  # a build resumed elsewhere
