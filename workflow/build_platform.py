"""The platform a result was computed on: what determines its bits, so that ``make verify`` knows where to expect
bit-identity and can say what differs elsewhere.

The bits of a CPU step are fixed by the code paths its floating-point sums take: PyTorch's own kernels (ATen picks
its vector width at run time: ``AVX512``, ``AVX2``, ...), oneMKL's BLAS and vector-math kernels (chosen per CPU:
another vendor, another model, another kernel and another order of summation) and oneDNN's (the same). The workflow
pins all three (:data:`PINS_FILE`, applied by the Makefile and the Snakefile), and under the pins the bits depend
only on the library versions and on the pinned paths, not on the CPU's vendor or model: ``MKL_CBWR=COMPATIBLE``
runs one code path on every x86-64 CPU, ``ATEN_CPU_CAPABILITY=avx2`` one vector width. ``workflow/fingerprints.py``
checks that on the CPUs named in its record.

:func:`this_platform` records the CPU (vendor, model, family and model numbers, its vector instruction sets), the
pins in force and what they give (:data:`IDENTITY`: architecture, torch, oneMKL and oneDNN versions, the vector unit
ATen dispatches to, oneMKL's code path and oneDNN's ISA cap). A path left to the CPU's own dispatch names the CPU it
dispatched on, so that two vendors never look alike there. ``make publish`` records the build's platform in
``<results>/platform.json`` (``results/platform.json`` for the default profile), beside those of the earlier
publications of the same tree (a build resumed on another machine has both); ``make verify`` expects bit-identity
where every recorded platform has this machine's :data:`IDENTITY` (:func:`differences`)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from common.config import profile_dirs
from common.io import write_json

ROOT = Path(__file__).resolve().parents[1]
PINS_FILE = "envs/numerics.env"
IDENTITY = ("machine", "torch", "mkl", "onednn", "vector_unit", "mkl_path", "onednn_isa")
"""What fixes the bits of a step: two platforms that agree on these compute the same bits."""
PORTABLE_MKL_BRANCH = "COMPATIBLE"
"""The one oneMKL CNR branch that runs the same code on every x86-64 vendor (Intel's CNR guide: SSE2 without
rcpps/rsqrtps); any other branch falls back to the CPU's own dispatch on a CPU it was not written for."""
VECTOR_FLAGS = ("sse2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile")
"""The ``/proc/cpuinfo`` flags recorded as the CPU's vector instruction sets."""


def numerical_pins(root: Path = ROOT) -> dict[str, str]:
    """The ``KEY=VALUE`` lines of :data:`PINS_FILE` (``#`` comments and blank lines skipped); ValueError naming a
    line that is neither."""
    pins = {}
    for number, line in enumerate((root / PINS_FILE).read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"{PINS_FILE}:{number}: {line!r} is not KEY=VALUE")
        pins[key.strip()] = value.strip()
    return pins


def pinned_environment(environ: Mapping[str, str] | None = None, root: Path = ROOT) -> dict[str, str]:
    """``environ`` (default: this process's) with the pins of :data:`PINS_FILE` set."""
    return {**(os.environ if environ is None else environ), **numerical_pins(root)}


def unpinned_environment(environ: Mapping[str, str] | None = None, root: Path = ROOT) -> dict[str, str]:
    """``environ`` (default: this process's) without any variable :data:`PINS_FILE` pins: the CPU's own dispatch."""
    pins = numerical_pins(root)
    return {key: value for key, value in (os.environ if environ is None else environ).items() if key not in pins}


def platform_file(profile: str) -> str:
    """Where the publication of ``profile`` records its build's platforms: ``<results>/platform.json``."""
    return f"{profile_dirs(profile)[0]}/platform.json"


def cpu_fields(cpuinfo: str) -> dict[str, str]:
    """``vendor``, ``cpu`` (model name), ``cpu_id`` (family, model, stepping) and ``isa`` (the
    :data:`VECTOR_FLAGS` present) of the first processor in ``cpuinfo`` (the text of ``/proc/cpuinfo``)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block ends at a blank line
            continue
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    return {"vendor": fields.get("vendor_id", "unknown"), "cpu": fields.get("model name", "unknown"),
            "cpu_id": f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')} "
                      f"stepping {fields.get('stepping', '?')}",
            "isa": " ".join(flag for flag in VECTOR_FLAGS if flag in flags)}


def torch_paths() -> dict[str, str]:
    """What this process's torch computes with: its version, oneMKL's and oneDNN's (from
    ``torch.__config__.show()``) and the vector unit ATen dispatches to (``ATEN_CPU_CAPABILITY`` caps it)."""
    import re

    import torch  # here, not at the top: seconds of import, run in the probe process only

    shown = torch.__config__.show()

    def version(pattern: str) -> str:
        found = re.search(pattern, shown)
        return found.group(1) if found else "none"

    return {"torch": torch.__version__, "vector_unit": torch.backends.cpu.get_cpu_capability(),
            "mkl": version(r"Math Kernel Library Version (.+?) for "), "onednn": version(r"MKL-DNN v(\S+)")}


def code_paths(pins: Mapping[str, str], cpu: Mapping[str, str]) -> dict[str, str]:
    """oneMKL's code path and oneDNN's ISA cap under ``pins`` on ``cpu`` (:func:`cpu_fields`): the pinned value
    where it holds on any CPU, else the CPU's own dispatch, named by the CPU. A oneDNN cap counts as CPU-free: no CPU
    step runs a oneDNN primitive (``ONEDNN_VERBOSE=1`` prints none for the fingerprints' cells), so it bounds the ISA
    of one that may come, and the fingerprints would show a vendor's difference."""
    on_cpu = f"dispatch on {cpu['vendor']} {cpu['cpu_id']}"
    branch = pins.get("MKL_CBWR")
    isa = pins.get("ONEDNN_MAX_CPU_ISA")
    return {"mkl_path": branch if branch == PORTABLE_MKL_BRANCH else f"{branch or 'default'} {on_cpu}",
            "onednn_isa": f"max {isa}" if isa else f"default {on_cpu}"}


def this_cpu() -> dict[str, str]:
    """This machine's :func:`cpu_fields` (``platform.processor()`` names the CPU where ``/proc/cpuinfo`` does
    not)."""
    cpuinfo = Path("/proc/cpuinfo")
    cpu = cpu_fields(cpuinfo.read_text(encoding="utf-8", errors="replace") if cpuinfo.is_file() else "")
    if cpu["cpu"] == "unknown":
        cpu["cpu"] = platform.processor() or "unknown"
    return cpu


def this_platform(root: Path = ROOT) -> dict[str, str]:
    """This machine as the workflow's steps see it: :func:`cpu_fields`, ``pins`` (:data:`PINS_FILE`),
    :func:`torch_paths` read in a fresh process under the pins (a process's first torch call fixes them) and
    :func:`code_paths`."""
    cpu = this_cpu()
    pins = numerical_pins(root)
    probe = subprocess.run([sys.executable, "-m", "workflow.build_platform"], cwd=root, env=pinned_environment(),
                           capture_output=True, text=True, check=True)
    return {"machine": platform.machine(), **cpu, "pins": " ".join(f"{k}={v}" for k, v in sorted(pins.items())),
            **json.loads(probe.stdout), **code_paths(pins, cpu)}


def recorded_platforms(folder: Path, profile: str) -> list[dict[str, str]]:
    """The platforms recorded for ``profile``'s published build in checkout ``folder`` (none without a record)."""
    path = folder / platform_file(profile)
    return json.loads(path.read_text(encoding="utf-8"))["platforms"] if path.is_file() else []


def record_platform(folder: Path, profile: str, here: Mapping[str, str]) -> str:
    """Add ``here`` to the recorded platforms (unless one with the same :data:`IDENTITY` is there); the file's
    path from the checkout's root."""
    platforms = recorded_platforms(folder, profile)
    if not any(not differences(known, here) for known in platforms):
        platforms.append(dict(here))
    write_json(folder / platform_file(profile), {"platforms": platforms})
    return platform_file(profile)


def differences(recorded: Mapping[str, str], here: Mapping[str, str]) -> list[str]:
    """Each :data:`IDENTITY` field where ``recorded`` and ``here`` differ: ``field: recorded -> here`` (a field a
    record from before it existed lacks reads ``not recorded``)."""
    return [f"{key}: {recorded.get(key, 'not recorded')} -> {here.get(key)}" for key in IDENTITY
            if recorded.get(key) != here.get(key)]


def describe(platform_: Mapping[str, str]) -> str:
    """A platform in one line: its CPU, then its :data:`IDENTITY`."""
    return ", ".join([f"{platform_.get('vendor', '')} {platform_.get('cpu')}".strip(),
                      *(f"{key} {platform_.get(key, 'not recorded')}" for key in IDENTITY)])


def foreign_notice(recorded: Sequence[Mapping[str, str]], here: Mapping[str, str]) -> str | None:
    """None where bit-identity is expected (nothing recorded: a local build, made here; or every record has this
    machine's :data:`IDENTITY`), else a note naming, for each record that differs, what differs."""
    foreign = [(known, differences(known, here)) for known in recorded if differences(known, here)]
    if not foreign:
        return None
    lines = [f"  built on {describe(known)}\n    differs in " + "; ".join(diff) for known, diff in foreign]
    return ("the published records were not computed on this platform, so bit-identity is not expected:\n"
            + "\n".join(lines) + f"\n  this machine: {describe(here)}")


if __name__ == "__main__":  # the probe this_platform runs under the pins
    print(json.dumps(torch_paths()))
