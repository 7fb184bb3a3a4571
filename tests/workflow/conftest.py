"""One temporary copy of the repository and one smoke build shared by every end-to-end test.

The copy holds the tracked files plus untracked files git does not ignore (so a working tree under review is
what gets built). One run of ``snakemake --profile workflow/profiles/smoke all shared_stages`` builds every
report that exists and the shared stages with a single smoke base model; the tests then inspect the copy.

Under pytest-xdist (``make test`` runs ``-n $(CORES)``) the workers share it: it lives in the run's common temporary
folder, the first worker that needs it builds it while the others go on with the rest of the suite, and every test
holds a lock on it while it runs (exclusive for a test that runs Snakemake in the copy, shared for one that only
reads it), so no two tests ever change the copy at once.
"""

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def build_lock(tmp_path_factory: pytest.TempPathFactory, mode: int) -> Iterator[Path]:
    """Holds the smoke build's lock (``fcntl.LOCK_EX`` or ``LOCK_SH``) in the temporary folder every xdist worker of
    this run shares (the run's own one without xdist); yields that folder."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(root / "smoke_build.lock", "w") as lock:
        fcntl.flock(lock, mode)
        yield root


@pytest.fixture(scope="session")
def smoke_copy(tmp_path_factory) -> Path:
    """The copy after the smoke build, built once per run by whichever worker asks first; a failed build is reported
    to every worker that asks later, never rebuilt."""
    with build_lock(tmp_path_factory, fcntl.LOCK_EX) as root:
        copy, done, failed = root / "smoke_build", root / "smoke_build.done", root / "smoke_build.failed"
        if failed.exists():
            pytest.fail(f"the smoke build failed (in another worker):\n{failed.read_text()}")
        if not done.exists():
            copy.mkdir()
            copy_worktree(copy)
            run = snakemake(copy, "all", "shared_stages", timeout=1800)
            if run.returncode != 0:
                failed.write_text(run.stderr[-4000:])
                pytest.fail(f"the smoke build failed:\n{failed.read_text()}")
            done.touch()
    return copy


@pytest.fixture
def smoke_build(smoke_copy, request, tmp_path_factory):
    """The smoke-built copy, locked for the test: exclusively when the test runs Snakemake in it, shared otherwise."""
    with build_lock(tmp_path_factory, fcntl.LOCK_EX if "run_snakemake" in request.fixturenames else fcntl.LOCK_SH):
        yield smoke_copy


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(copy, *args)``: Snakemake with the smoke profile in a copy."""
    return snakemake
