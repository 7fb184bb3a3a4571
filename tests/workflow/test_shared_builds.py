"""The shared builds of the end-to-end tests (workflow_testing, shared_testing), with a fake Snakemake that makes the
targets it is asked for: each stage runs once, a failure is reported to later asks, the stand-in copy starts from the
smoke copy's base model and corpora with their modification times, and the stand-in build runs in the background
while the smoke build goes on."""

import os
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from workflow_testing import (
    SMOKE_MODEL,
    STANDIN_TARGETS,
    build_smoke,
    build_smoke_base,
    build_standin,
    built_once,
    corpus_targets,
    start_shared_builds,
    start_standin_build,
)

RULES = ("all", "shared_stages")  # targets that name a rule, not a file
SMOKE_BASE = ("smoke", "smoke", (SMOKE_MODEL, *corpus_targets("standin")))  # (copy, profile, targets) of a run


class FakeSnakemake:
    """Records each run as ``(copy, profile, targets)`` and makes every file target (a folder with a file for a
    path without a suffix); a run of ``block`` waits for ``release``."""

    def __init__(self, returncode: int = 0, block: tuple[str, ...] = ()) -> None:
        self.runs: list[tuple[str, str, tuple[str, ...]]] = []
        self.returncode, self.block = returncode, block
        self.blocked, self.release = threading.Event(), threading.Event()

    def __call__(self, copy: Path, *targets: str, timeout: int, profile: str) -> subprocess.CompletedProcess:
        self.runs.append((copy.name, profile, targets))
        if targets == self.block:
            self.blocked.set()
            assert self.release.wait(30)
        for target in targets:
            if target in RULES:
                continue
            path = copy / target
            if path.suffix:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(target)
            else:
                path.mkdir(parents=True, exist_ok=True)
                (path / "model.safetensors").write_text(target)
        return subprocess.CompletedProcess([profile, *targets], self.returncode, "", "the build broke")


@pytest.fixture
def factory(tmp_path):
    """A temporary-path factory of one worker (its folder in ``tmp_path``, the shared one under xdist), with a fake
    Snakemake and a work tree of one file, which the builds read from it: nothing is patched into workflow_testing,
    where the run's real builds, in a thread (conftest.shared_builds), would meet them."""
    (tmp_path / "worker").mkdir()
    return SimpleNamespace(getbasetemp=lambda: tmp_path / "worker", snakemake=FakeSnakemake(),
                           copy_worktree=lambda copy: (copy / "Snakefile").write_text("rules"))


def test_a_stage_runs_once_for_every_ask(factory, monkeypatch):
    fake = FakeSnakemake()
    factory.snakemake = fake
    first, again = build_smoke(factory), build_smoke(factory)
    assert first == again
    assert (first / "Snakefile").read_text() == "rules"
    assert fake.runs == [SMOKE_BASE, ("smoke", "smoke", ("all", "shared_stages"))]


def published_worktree(copy: Path) -> None:
    """A work tree that tracks published corpora (the default build's ``data/``), as a clone of main does."""
    (copy / "Snakefile").write_text("rules")
    for target in corpus_targets("standin"):
        (copy / target).parent.mkdir(parents=True, exist_ok=True)
        (copy / target).write_text("published")


def test_the_standin_copy_starts_from_the_smoke_base_model_and_corpora(factory, monkeypatch):
    """Its ``data/`` is the smoke copy's, which replaces the one of the work tree (published corpora) whole."""
    fake = FakeSnakemake()
    factory.snakemake, factory.copy_worktree = fake, published_worktree
    base = build_smoke_base(factory)
    past = 1_500_000_000_000_000_000  # ns: files built long before the copy is made
    shared = [base / SMOKE_MODEL / "model.safetensors", base / SMOKE_MODEL,
              *(base / target for target in corpus_targets("standin"))]
    for path in shared:
        os.utime(path, ns=(past, past))
    standin = build_standin(factory)
    assert fake.runs == [SMOKE_BASE, ("standin", "standin", STANDIN_TARGETS)]  # the base model and corpora: once
    for path in shared:
        copied = standin / path.relative_to(base)
        assert copied.stat().st_mtime_ns == path.stat().st_mtime_ns == past, copied
    assert (standin / SMOKE_MODEL / "model.safetensors").read_text() == SMOKE_MODEL
    assert [(standin / target).read_text() for target in corpus_targets("standin")] == corpus_targets("standin")


def test_the_standin_build_runs_in_the_background_beside_the_smoke_build(factory, monkeypatch):
    """Started once the base model exists, it is done while the rest of the smoke build still runs; a second start
    (another worker's) does nothing; an ask waits for it and gets its copy."""
    fake = FakeSnakemake(block=("all", "shared_stages"))
    factory.snakemake = fake
    build_smoke_base(factory)
    background = start_standin_build(factory)
    assert start_standin_build(factory) is None
    smoke = threading.Thread(target=build_smoke, args=(factory,))
    smoke.start()
    try:
        assert fake.blocked.wait(30)  # the smoke build runs, holding its lock
        background.join(30)
        assert not background.is_alive()
        assert smoke.is_alive()
        assert build_standin(factory).name == "standin"
    finally:
        fake.release.set()
        smoke.join(30)
    assert sorted(fake.runs) == sorted([SMOKE_BASE, ("smoke", "smoke", ("all", "shared_stages")),
                                        ("standin", "standin", STANDIN_TARGETS)])


def test_the_worker_makes_its_temporary_folder_before_the_builds_thread_starts(factory):
    """The thread's first ask for the folder would race the worker's next test (pytest makes the folder at its first
    ask, not safely across threads); the builds then run: the base model, the stand-in build beside the smoke build."""
    folder, asks = factory.getbasetemp(), []

    def getbasetemp() -> Path:
        asks.append(threading.current_thread())
        return folder

    factory.getbasetemp = getbasetemp
    factory.snakemake = fake = FakeSnakemake()
    start_shared_builds(factory, standin=True).join(30)
    assert asks[0] is threading.current_thread()
    assert len(asks) > 1
    assert all(ask is not threading.current_thread() for ask in asks[1:])
    assert fake.runs[0] == SMOKE_BASE
    assert sorted(fake.runs[1:]) == sorted([("smoke", "smoke", ("all", "shared_stages")),
                                            ("standin", "standin", STANDIN_TARGETS)])


def test_a_failed_stage_is_reported_to_every_later_ask(factory, monkeypatch):
    factory.snakemake = FakeSnakemake(returncode=1)
    with pytest.raises(pytest.fail.Exception) as failure:
        build_smoke(factory)
    assert str(failure.value).startswith(f"the smoke_base failed: snakemake --profile workflow/profiles/smoke "
                                         f"{SMOKE_MODEL} ")
    assert str(failure.value).endswith("\nthe build broke")
    factory.snakemake = fake = FakeSnakemake()
    with pytest.raises(pytest.fail.Exception, match=r"smoke_base failed \(in another worker\):\nthe smoke_base "):
        build_standin(factory)
    assert fake.runs == []


def test_a_failed_background_build_is_reported_to_its_asks(factory, monkeypatch):
    fake = FakeSnakemake()
    factory.snakemake = fake
    build_smoke_base(factory)
    fake.returncode = 1
    start_standin_build(factory).join(30)
    with pytest.raises(pytest.fail.Exception, match=r"standin_build failed \(in another worker\)"):
        build_standin(factory)
    assert fake.runs == [SMOKE_BASE, ("standin", "standin", STANDIN_TARGETS)]


def test_a_build_that_times_out_is_reported_as_failed(factory, monkeypatch):
    def times_out(copy, *targets, timeout, profile):
        raise subprocess.TimeoutExpired(["snakemake", *targets], timeout)

    factory.snakemake = times_out
    with pytest.raises(subprocess.TimeoutExpired):
        built_once(factory, "stage", "copy", [("smoke", "all")])
    with pytest.raises(pytest.fail.Exception, match="timed out after 3600 seconds"):
        built_once(factory, "stage", "copy", [("smoke", "all")])
