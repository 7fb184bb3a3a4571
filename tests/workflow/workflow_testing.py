"""The shared builds of the end-to-end tests (``conftest.py``): temporary copies of the work tree, each build stage
run once per test run by whichever pytest-xdist worker asks first (:func:`shared_testing.made_once`).

The stages (:func:`build_smoke_base`, :func:`build_smoke`, :func:`build_standin`): the smoke copy's base model and
corpora first, then the rest of the smoke build in that copy, and the stand-in build in a copy of its own seeded with
them. No stage holds a lock while it waits for another: :func:`start_shared_builds` runs them in a thread of the worker,
and :func:`start_standin_build` starts the stand-in build in another once the base model exists, so that it runs beside
the rest of the smoke build."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml
from forkserver import ForkServer
from shared_testing import made_once, shared_lock

from common.config import merged, profile_overrides

ROOT = Path(__file__).resolve().parents[2]
SMOKE_MODEL = "results/smoke/models/base/smoke"  # the smoke profile's base model, the stand-in profile's every model
BUILD_TIMEOUT = 3600  # seconds of one Snakemake run of a build (two builds may share the 2 cores of CI)
SERVER_START = threading.Lock()  # the stand-in build's thread and the worker's tests may start Snakemake together


def copy_worktree(destination: Path) -> None:
    """The tracked files of the work tree and the untracked ones git does not ignore, into ``destination``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)


def seeded_copy(source: Path, shared: Sequence[str],
                copy: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """What makes a copy of the work tree (``copy``, by default :func:`copy_worktree`) that starts with the built
    files and folders ``shared`` of the copy ``source``: copied with their modification times, so that Snakemake
    takes them as built (its only trigger without a job record is an input newer than its outputs). A folder the
    work tree already has (``data/``: the published default build's corpora) is replaced, not merged."""
    def make(destination: Path) -> None:
        (copy or copy_worktree)(destination)
        for name in shared:
            if (source / name).is_dir():
                shutil.rmtree(destination / name, ignore_errors=True)
                shutil.copytree(source / name, destination / name, symlinks=True)
            else:
                (destination / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source / name, destination / name)
    return make


def corpus_targets(profile: str) -> list[str]:
    """The prepared corpora (their manifests) that profile ``profile`` pretrains on and shifts to."""
    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text(encoding="utf-8"))
    data = merged(config, profile_overrides(config["profiles"], profile, "config"))["data"]
    return [f"data/corpora/{data[role]}/manifest.json" for role in ("pretrain", "shift")]


@functools.cache
def fork_server() -> ForkServer:
    """This worker's fork server (``forkserver.py``, test infrastructure), started at its first Snakemake run and
    stopped at its exit: the builds' steps start warm, without their seconds of imports each."""
    server = ForkServer().start()
    atexit.register(server.stop)
    return server


def snakemake(copy: Path, *args: str, timeout: int = 300, profile: str = "smoke") -> subprocess.CompletedProcess:
    """``snakemake --profile workflow/profiles/<profile> <args>`` in ``copy``, its steps warm: started by
    :func:`fork_server` (:meth:`ForkServer.command`, its shim first on the rules' ``PATH``)."""
    with SERVER_START:
        server = fork_server()
    return subprocess.run(server.command("snakemake", "--profile", f"workflow/profiles/{profile}", *args), cwd=copy,
                          capture_output=True, text=True, timeout=timeout, env=server.environ(dict(os.environ)))


def built_once(tmp_path_factory: pytest.TempPathFactory, stage: str, copy_name: str,
               builds: Sequence[tuple[str, ...]], make_copy: Callable[[Path], None] | None = None) -> Path:
    """The copy ``copy_name`` in the shared temporary folder after the build stage ``stage``: the Snakemake runs
    ``builds`` (each ``(profile, *targets)``, in order) in it, once per test run; ``make_copy`` makes the copy when it
    does not exist yet (by default :func:`copy_worktree`). A failed stage is reported to every later ask.

    A factory may carry its own ``snakemake`` and ``copy_worktree`` (tests/workflow/test_shared_builds.py: fakes),
    read from it rather than patched into this module, where the run's real builds, in a thread, would meet them."""
    run_snakemake = getattr(tmp_path_factory, "snakemake", snakemake)

    def build(root: Path) -> None:
        copy = root / copy_name
        if not copy.exists():
            copy.mkdir()
            (make_copy or getattr(tmp_path_factory, "copy_worktree", copy_worktree))(copy)
        for profile, *targets in builds:
            run = run_snakemake(copy, *targets, timeout=BUILD_TIMEOUT, profile=profile)
            if run.returncode != 0:
                pytest.fail(f"the {stage} failed: snakemake --profile workflow/profiles/{profile} "
                            f"{' '.join(targets)}:\n{run.stderr[-4000:]}")

    return made_once(tmp_path_factory, stage, build) / copy_name


def build_smoke_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke copy after its first stage: the smoke base model and the corpora the stand-in build reads too."""
    return built_once(tmp_path_factory, "smoke_base", "smoke", [("smoke", SMOKE_MODEL, *corpus_targets("standin"))])


def build_smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smoke copy after the smoke build, ``all shared_stages``, on its base model."""
    build_smoke_base(tmp_path_factory)
    return built_once(tmp_path_factory, "smoke_build", "smoke", [("smoke", "all", "shared_stages")])


# the stand-in build's reports: the two papers whose paper-profile plumbing covers the other two's (CI's time):
# WinQ continues the linked 1B stand-in on token shards made with its tokenizer (as Max-Window does), Microscaling
# evaluates linked external models and rescales one into its sweep (Finer is Better evaluates them as they are); the
# PDFs and the index are the smoke build's rules
STANDIN_TARGETS = ("reports/standin/microscaling_limits.html", "reports/standin/winq.html")


def build_standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in copy after ``make standin``'s second run (its reports and index, :data:`STANDIN_TARGETS`, with
    ``--profile workflow/profiles/standin``), seeded with the smoke copy's base model and ``data/`` (``make
    standin``'s first run)."""
    base = build_smoke_base(tmp_path_factory)
    make_copy = seeded_copy(base, ("data", SMOKE_MODEL), getattr(tmp_path_factory, "copy_worktree", None))
    return built_once(tmp_path_factory, "standin_build", "standin", [("standin", *STANDIN_TARGETS)],
                      make_copy=make_copy)


def start_standin_build(tmp_path_factory: pytest.TempPathFactory) -> threading.Thread | None:
    """:func:`build_standin` in a thread of this worker, so that the stand-in build runs beside the rest of the smoke
    build (the worker's tests go on meanwhile); None when a worker started it before. The build holds the stand-in
    stage's lock, so whoever asks for the stand-in copy waits for it there and finds its failure recorded."""
    with shared_lock(tmp_path_factory, fcntl.LOCK_EX, "standin_start") as root:
        started = root / "standin_build.started"
        if started.exists():
            return None
        started.touch()

    def build() -> None:
        with contextlib.suppress(Exception, pytest.fail.Exception):  # recorded for the asks (made_once)
            build_standin(tmp_path_factory)

    thread = threading.Thread(target=build, name="stand-in build")
    thread.start()
    return thread


def start_shared_builds(tmp_path_factory: pytest.TempPathFactory, standin: bool) -> threading.Thread:
    """The shared builds in a thread of this worker: the smoke base model, then the smoke build, with the stand-in
    build beside it (:func:`start_standin_build`) when ``standin``. A failure is recorded for the asks
    (``made_once``).

    The worker's temporary folder is made here, before the thread starts: pytest's ``TempPathFactory`` makes it at
    its first ask (``getbasetemp``: remove it if it exists, then make it), which is not safe across threads. Were the
    thread's ask the first, it would race the worker's next test that asks for a temporary folder, and one of them would
    fail with ``FileExistsError`` (CI, 2026-12-06: nine tests of ``tests/analysis/test_advice.py``)."""
    tmp_path_factory.getbasetemp()

    def build() -> None:
        with contextlib.suppress(Exception, pytest.fail.Exception):
            build_smoke_base(tmp_path_factory)
            background = start_standin_build(tmp_path_factory) if standin else None
            build_smoke(tmp_path_factory)
            if background is not None:
                background.join()

    thread = threading.Thread(target=build, name="shared builds")
    thread.start()
    return thread
