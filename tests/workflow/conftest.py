"""Temporary copies of the repository, each built once per test run and shared by the end-to-end tests.

A copy holds the tracked files plus untracked files git does not ignore (so a working tree under review is what
gets built). The two builds share one smoke base model and the corpora they read, built once, in three stages
(``workflow_testing``):

* ``smoke_base``, in the smoke copy: the smoke base model and the corpora both builds read (``make standin``'s first
  run, and its shift corpus);
* ``smoke_build``, in the same copy: ``snakemake --profile workflow/profiles/smoke all shared_stages``, every report
  and the shared stages on that base model;
* ``standin_build``, in a copy of its own seeded with the smoke copy's base model and ``data/`` (with their
  modification times: Snakemake takes them as built, so nothing is fetched, prepared or pretrained twice):
  ``snakemake --profile workflow/profiles/standin reports/standin/index.html``, ``make standin``'s second run but
  the PDFs (which the smoke build compiles with the same rule). Its own copy, so that the
  smoke tests never see its results or its index entries, and nothing it runs can meet theirs.

Every Snakemake run of these builds starts its Python steps warm, forked from the worker's fork server
(``forkserver.py``, test infrastructure: the same programs, without their seconds of imports each); the users' path,
cold steps, is ``test_make_reports.py``'s.

Under pytest-xdist (``make test`` runs ``-n $(CORES)``) the workers share them: they live in the run's common
temporary folder and each stage runs once, under its lock, whichever worker asks first. The worker that builds the
smoke copy starts the stand-in build in the background as soon as the base model exists (when the run has stand-in
tests), so the two builds share the cores instead of one waiting for the other. Every test holds the copy's lock while
it runs (exclusive for a test that runs Snakemake in the copy, shared for one that only reads it), so no two tests ever
change a copy at once."""

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_testing import shared_lock
from workflow_testing import build_smoke, build_smoke_base, build_standin, snakemake, start_standin_build


@pytest.fixture(scope="session")
def smoke_copy(tmp_path_factory, request) -> Iterator[Path]:
    """The smoke copy after the smoke build (``all shared_stages``); the stand-in build starts beside it once the base
    model exists, when a test of this run asks for the stand-in copy (this worker ends after that build does: another
    may be waiting for it)."""
    build_smoke_base(tmp_path_factory)
    wanted = any("standin_copy" in item.fixturenames for item in request.session.items)
    standin = start_standin_build(tmp_path_factory) if wanted else None
    yield build_smoke(tmp_path_factory)
    if standin is not None:
        standin.join()


@pytest.fixture(scope="session")
def standin_copy(tmp_path_factory) -> Path:
    """A copy after ``make standin`` (docs/scale.md) on the smoke copy's base model and corpora: every report of the
    stand-in profile."""
    return build_standin(tmp_path_factory)


@pytest.fixture
def standin_build(standin_copy, tmp_path_factory):
    """The stand-in copy, locked (shared) for the test."""
    with shared_lock(tmp_path_factory, fcntl.LOCK_SH, "standin_build"):
        yield standin_copy


@pytest.fixture
def smoke_build(smoke_copy, request, tmp_path_factory):
    """The smoke-built copy, locked for the test: exclusively when the test runs Snakemake in it, shared otherwise."""
    with shared_lock(tmp_path_factory, fcntl.LOCK_EX if "run_snakemake" in request.fixturenames else fcntl.LOCK_SH,
                     "smoke_build"):
        yield smoke_copy


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(copy, *args)``: Snakemake with the smoke profile in a copy."""
    return snakemake
