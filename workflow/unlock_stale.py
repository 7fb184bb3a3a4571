"""Clear the lock that a Snakemake run killed hard left behind, so that the same command resumes the build.

Snakemake locks its working folder (``.snakemake/locks/``) while it runs and removes the lock when it ends. A run
killed with SIGKILL (``kill -9``, a laptop put to sleep and its processes ended) cannot remove it, and every later
run in that folder stops with a ``LockException`` until ``snakemake --unlock``. ``make reports`` runs this script
first: when the folder holds a lock and no Snakemake process on this machine has the folder as its working
directory, the lock is stale and ``snakemake --unlock`` clears it; a lock of a run still going is kept (the build
that follows then stops, as two builds of one folder must). The jobs the kill cut off rerun by the profiles'
``rerun-incomplete``: every step writes its outputs atomically, so an incomplete output is always safe to redo.

Usage: ``python workflow/unlock_stale.py [FOLDER]`` (default: the current folder).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path

import psutil

LOCKS = Path(".snakemake") / "locks"


def is_snakemake(cmdline: Sequence[str]) -> bool:
    """Whether a process's command line runs Snakemake: its program or the script its interpreter runs is named
    ``snakemake`` (``.venv/bin/snakemake``, ``python .venv/bin/snakemake``), or it runs ``python -m snakemake``."""
    if any(Path(arg).name == "snakemake" for arg in cmdline[:2]):
        return True
    return any(flag == "-m" and module == "snakemake" for flag, module in pairwise(cmdline))


def snakemake_processes(folder: str | Path) -> list[int]:
    """The ids of the Snakemake processes (:func:`is_snakemake`) whose working directory is ``folder``; processes
    that may not be inspected (another user's) are passed over."""
    folder = Path(folder).resolve()
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        cwd, cmdline = process.info["cwd"], process.info["cmdline"]
        if cwd and cmdline and Path(cwd) == folder and is_snakemake(cmdline):
            found.append(process.info["pid"])
    return found


def unlock_command(folder: Path) -> int:
    """``snakemake --unlock`` in ``folder`` with this interpreter's Snakemake; its exit status."""
    return subprocess.run([sys.executable, "-m", "snakemake", "--unlock"], cwd=folder, check=False).returncode


def clear_stale_lock(folder: str | Path = ".", unlock: Callable[[Path], int] = unlock_command) -> bool:
    """Clear the lock of ``folder`` with ``unlock`` when it is stale (module docstring); whether it did. A
    ``RuntimeError`` when ``unlock`` fails."""
    folder = Path(folder).resolve()
    locks = folder / LOCKS
    if not (locks.is_dir() and any(locks.iterdir())):
        return False
    running = snakemake_processes(folder)
    if running:
        print(f"{locks} belongs to the Snakemake run in progress (process {', '.join(map(str, running))}): kept",
              file=sys.stderr)
        return False
    print(f"{locks}: no Snakemake process runs in {folder}, so the lock is stale (a run killed hard): "
          "snakemake --unlock", file=sys.stderr)
    status = unlock(folder)
    if status != 0:
        raise RuntimeError(f"snakemake --unlock in {folder} failed with exit status {status}")
    return True


if __name__ == "__main__":
    clear_stale_lock(sys.argv[1] if len(sys.argv) > 1 else ".")
