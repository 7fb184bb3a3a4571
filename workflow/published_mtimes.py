"""Give the published results of a fresh clone the modification times of their build, so Snakemake finds them current.

git does not keep modification times: a clone writes every file at checkout time, in path order. Snakemake redoes a
job whose input is newer than its oldest output unless a checksum it recorded shows the input unchanged, and it
records none for a folder or a file over ``--max-checksum-file-size`` (1 MB): a base model folder checked out
after the results built from it (``results/models/`` sorts after ``results/finer_is_better/``) would stale every
one of them. :func:`restore` sets the time of each published output that git holds unmodified (a folder output:
the folder and its files) to the end time of the job that made it, from Snakemake's record
(``.snakemake/metadata/``, published beside it): inputs then predate outputs as they did in the build. A file
that differs from the commit keeps its own time, so a change made after the clone is seen as such.

The Snakefile calls :func:`restore` when it is parsed, so ``snakemake <target>``, ``make reports``, ``make status``
and ``make verify`` all see the published results as built. It costs one ``git ls-files`` and a read of each
record.

Usage: ``python -m workflow.published_mtimes [FOLDER]`` (default: the current folder)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

METADATA = Path(".snakemake") / "metadata"


def metadata_file(path: str) -> Path:
    """Snakemake's record of output ``path``: ``.snakemake/metadata/<urlsafe base64 of the path>``."""
    return METADATA / base64.urlsafe_b64encode(path.encode()).decode()


def unmodified_tracked(folder: Path) -> set[str] | None:
    """The files git tracks in ``folder`` whose content is the commit's (None outside a git checkout)."""
    def listed(*args: str) -> set[str] | None:
        done = subprocess.run(["git", "ls-files", "-z", *args], cwd=folder, capture_output=True, check=False)
        return set(filter(None, done.stdout.decode().split("\0"))) if done.returncode == 0 else None

    tracked, modified = listed(), listed("-m", "-d")
    return None if tracked is None or modified is None else tracked - modified


def restore(folder: str | os.PathLike[str] = ".") -> int:
    """Set each published output's modification time to its record's end time (module docstring); the number of
    outputs set. Records that are not tracked (a local build's own) and outputs with any modified file are left."""
    folder = Path(folder)
    records = folder / METADATA
    unmodified = unmodified_tracked(folder) if records.is_dir() else None
    if not unmodified:
        return 0
    done = 0
    for record in sorted(name for name in unmodified if name.startswith(f"{METADATA.as_posix()}/")):
        output = base64.urlsafe_b64decode(record.rsplit("/", 1)[1]).decode()
        path = folder / output
        files = [output] if path.is_file() else sorted(
            str(p.relative_to(folder)) for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
        if not files or not all(name in unmodified for name in files):
            continue
        end = json.loads((folder / record).read_text(encoding="utf-8")).get("endtime")
        if end is None:
            continue
        for name in [*files, *([output] if path.is_dir() else [])]:
            os.utime(folder / name, (end, end))
        done += 1
    return done


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    if not target.is_dir():
        sys.exit(f"no such folder: {target}")
    print(f"{restore(target)} published outputs given their build's time")
