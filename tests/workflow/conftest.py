"""Temporary copies of the repository, each built once per test run and shared by the end-to-end tests.

A copy holds the tracked files plus untracked files git does not ignore (so a working tree under review is what
gets built). The smoke copy: one run of ``snakemake --profile workflow/profiles/smoke all shared_stages`` builds
every report and the shared stages with a single smoke base model. The stand-in copy: ``make standin``'s two runs
(the smoke base model, then the ``standin`` profile's four reports), in a copy of its own so that the smoke tests
never see its results. The tests then inspect the copies.

Under pytest-xdist (``make test`` runs ``-n $(CORES)``) the workers share them: they live in the run's common
temporary folder, the first worker that needs one builds it while the others go on with the rest of the suite, and
every test holds the copy's lock while it runs (exclusive for a test that runs Snakemake in the copy, shared for one
that only reads it), so no two tests ever change a copy at once."""

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
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--profile"]


def copy_worktree(destination: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)


def snakemake(copy: Path, *args: str, timeout: int = 300, profile: str = "smoke") -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, f"workflow/profiles/{profile}", *args], cwd=copy, capture_output=True, text=True,
                          timeout=timeout)


@contextmanager
def build_lock(tmp_path_factory: pytest.TempPathFactory, mode: int, name: str = "smoke_build") -> Iterator[Path]:
    """Holds the lock of build ``name`` (``fcntl.LOCK_EX`` or ``LOCK_SH``) in the temporary folder every xdist worker
    of this run shares (the run's own one without xdist); yields that folder."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, mode)
        yield root


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, *builds: tuple[str, ...]) -> Path:
    """A fresh copy of the work tree named ``name`` in the shared temporary folder, after the Snakemake runs
    ``builds`` (each ``(profile, *targets)``, in order), made once per test run by whichever worker asks first under
    the exclusive lock; a failed build is reported to every worker that asks later, never rebuilt."""
    with build_lock(tmp_path_factory, fcntl.LOCK_EX, name) as root:
        copy, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
        if failed.exists():
            pytest.fail(f"the {name} failed (in another worker):\n{failed.read_text()}")
        if not done.exists():
            copy.mkdir()
            copy_worktree(copy)
            for profile, *targets in builds:
                command = f"snakemake --profile workflow/profiles/{profile} {' '.join(targets)}"
                try:
                    run = snakemake(copy, *targets, timeout=1800, profile=profile)
                except subprocess.TimeoutExpired as timeout:  # reported to later workers as a failure too
                    failed.write_text(f"{command}: {timeout}")
                    raise
                if run.returncode != 0:
                    failed.write_text(f"{command}:\n{run.stderr[-4000:]}")
                    pytest.fail(f"the {name} failed:\n{failed.read_text()}")
            done.touch()
    return copy


@pytest.fixture(scope="session")
def smoke_copy(tmp_path_factory) -> Path:
    """The copy after the smoke build (``all shared_stages``)."""
    return built_once(tmp_path_factory, "smoke_build", ("smoke", "all", "shared_stages"))


@pytest.fixture(scope="session")
def standin_copy(tmp_path_factory) -> Path:
    """A copy after ``make standin``: the smoke base model, then every report of the stand-in profile
    (docs/scale.md). Its own copy, so that the smoke tests never see its results or its index entries."""
    return built_once(tmp_path_factory, "standin_build", ("smoke", "results/smoke/models/base/smoke"),
                      ("standin", "all"))


@pytest.fixture
def standin_build(standin_copy, tmp_path_factory):
    """The stand-in copy, locked (shared) for the test."""
    with build_lock(tmp_path_factory, fcntl.LOCK_SH, "standin_build"):
        yield standin_copy


@pytest.fixture
def smoke_build(smoke_copy, request, tmp_path_factory):
    """The smoke-built copy, locked for the test: exclusively when the test runs Snakemake in it, shared otherwise."""
    with build_lock(tmp_path_factory, fcntl.LOCK_EX if "run_snakemake" in request.fixturenames else fcntl.LOCK_SH):
        yield smoke_copy


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(copy, *args)``: Snakemake with the smoke profile in a copy."""
    return snakemake
