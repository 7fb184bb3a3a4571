"""One temporary copy of the repository and one smoke build shared by every end-to-end test.

The copy holds the tracked files plus untracked files git does not ignore (so a working tree under review is
what gets built). One run of ``snakemake --profile workflow/profiles/smoke all shared_stages`` builds every
report that exists and the shared stages with a single smoke base model; the tests then inspect the copy.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/smoke"]


def copy_worktree(destination: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)


def snakemake(copy: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, *args], cwd=copy, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """The copy after the smoke build of every report and the shared stages."""
    copy = tmp_path_factory.mktemp("repo")
    copy_worktree(copy)
    run = snakemake(copy, "all", "shared_stages", timeout=1800)
    assert run.returncode == 0, run.stderr[-4000:]
    return copy


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(copy, *args)``: Snakemake with the smoke profile in a copy."""
    return snakemake
