"""Provenance of a report: git commit and dirty flag, config hash, package versions, platform, seeds, stage times.

The config hash is the sha256 of the config serialized as canonical JSON (keys sorted, no whitespace), so two
runs with the same effective configuration share it whatever the YAML layout.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "numpy", "scipy", "pandas", "ml_dtypes", "transformers", "tokenizers", "snakemake",
            "seaborn", "matplotlib", "jinja2", "lm_eval")


def config_hash(config: Any) -> str:
    """sha256 of ``config`` as canonical JSON."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


BUILD_OUTPUTS = ("results", "reports", "logs", "data", ".snakemake")  # what a build writes (some of it published)


def git_output(root: str | os.PathLike[str], *args: str) -> str | None:
    """The stripped output of ``git <args>`` in ``root``; None without git or when git fails (no checkout, an
    unknown commit). The timeout allows a ``git log -- <path>`` over a long history."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(root: str | os.PathLike[str] = ".") -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the repository at ``root`` (``commit`` None outside a git checkout). ``dirty``: a
    tracked file differs from the commit, outside :data:`BUILD_OUTPUTS`: the published results (and Snakemake's
    records of them) are tracked, and a build that rewrites them has not changed the code or config it ran."""
    commit = git_output(root, "rev-parse", "HEAD")
    status = git_output(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                        *(f":(exclude){folder}" for folder in BUILD_OUTPUTS))
    return {"commit": commit, "dirty": bool(status) if commit is not None else None}


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def platform_info() -> dict[str, Any]:
    return {"python": sys.version.split()[0], "system": platform.system(), "release": platform.release(),
            "machine": platform.machine(), "cpus": os.cpu_count()}


def provenance(config: Any, *, seeds: dict[str, Any], stage_seconds: dict[str, float],
               root: str | os.PathLike[str] = ".") -> dict[str, Any]:
    """Everything a reviewer needs to know how a report was made (see the module docstring)."""
    return {"git": git_state(root), "config_sha256": config_hash(config), "packages": package_versions(),
            "platform": platform_info(), "seeds": dict(seeds), "stage_seconds": dict(stage_seconds),
            "root": Path(root).resolve().name}


def training_seconds(metadata_files: list[str | os.PathLike[str]]) -> dict[str, float]:
    """``{"pretraining <model>": seconds}`` from base models' ``lowbit_metadata.json`` (``training.seconds``, the
    wall time of the pretraining run); files without it are skipped."""
    stages = {}
    for path in metadata_files:
        seconds = json.loads(Path(path).read_text(encoding="utf-8")).get("training", {}).get("seconds")
        if seconds is not None:
            stages[f"pretraining {Path(path).parent.name}"] = float(seconds)
    return stages
