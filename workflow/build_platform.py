"""The platforms a published build was made on, so that ``make verify`` knows whether to expect bit-identity.

A recomputed cell is bit-identical to its record on the platform that built it: the same CPU architecture, the same
vector unit PyTorch's CPU kernels dispatch to (``torch.backends.cpu.get_cpu_capability()``: ``AVX512``, ``AVX2``,
...) and the same torch. On another one, floating-point reductions may sum in another order (a matrix product, a
mean over tokens), so numbers may differ in their last bits.

``make publish`` records the platform of the machine it runs on, which is the build's (it publishes the build's own
folder), in ``<results>/platform.json`` (``results/platform.json`` for the default profile), beside the
platforms recorded by the earlier publications of the same tree (a build resumed on another machine has both).
``make verify`` compares this machine with them (:func:`tolerance`)."""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common.config import profile_dirs
from common.io import write_json

IDENTITY = ("machine", "vector_unit", "torch")
"""What makes two platforms the same for bit-identity; ``cpu`` (the model name) is recorded for the reader."""


def platform_file(profile: str) -> str:
    """Where the publication of ``profile`` records its build's platforms: ``<results>/platform.json``."""
    return f"{profile_dirs(profile)[0]}/platform.json"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` where there is none)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def this_platform() -> dict[str, str]:
    """This machine: ``machine`` (architecture), ``cpu`` (model name), ``vector_unit`` (PyTorch's CPU
    capability) and ``torch`` (its version)."""
    import torch  # here, not at the top: seconds of import that only publish and verify need

    return {"machine": platform.machine(), "cpu": cpu_model(),
            "vector_unit": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}


def recorded_platforms(folder: Path, profile: str) -> list[dict[str, str]]:
    """The platforms recorded for ``profile``'s published build in checkout ``folder`` (none without a record)."""
    path = folder / platform_file(profile)
    return json.loads(path.read_text(encoding="utf-8"))["platforms"] if path.is_file() else []


def record_platform(folder: Path, profile: str, here: Mapping[str, str]) -> str:
    """Add ``here`` to the recorded platforms (unless one with the same :data:`IDENTITY` is there); the file's
    path from the checkout's root."""
    platforms = recorded_platforms(folder, profile)
    if not any(same_platform(known, here) for known in platforms):
        platforms.append(dict(here))
    write_json(folder / platform_file(profile), {"platforms": platforms})
    return platform_file(profile)


def same_platform(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return all(a.get(key) == b.get(key) for key in IDENTITY)


def describe(platforms: Sequence[Mapping[str, str]]) -> str:
    return "; ".join(", ".join(f"{key} {p.get(key)}" for key in ("machine", "cpu", "vector_unit", "torch"))
                     for p in platforms)


def tolerance(recorded: Sequence[Mapping[str, Any]], here: Mapping[str, str],
              other_platform_rtol: float) -> tuple[float, str | None]:
    """The relative tolerance ``make verify`` compares numbers with, and the notice that says why: 0 (bit-identical)
    when nothing is recorded or every record is this platform; ``other_platform_rtol`` (config
    ``verify.other_platform_rtol``) when a record was built on another one."""
    if all(same_platform(known, here) for known in recorded):
        return 0.0, None
    return other_platform_rtol, (
        f"the published records were built on {describe(recorded)}; this machine is {describe([here])}: "
        f"floating-point reductions may sum in another order there, so numbers are compared within relative "
        f"tolerance {other_platform_rtol:g} (config verify.other_platform_rtol; --rtol sets another)")
