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
temporary folder and each stage runs once, under its lock, whichever worker asks first. The run's first test is one
of this folder, whose worker starts the builds in the background (:func:`shared_builds`): the smoke base model, then
the stand-in build beside the smoke build (when the run has stand-in tests), so that the builds share the cores with
the unit tests instead of starting when the end-to-end tests, last in collection order, reach them. Every test holds
the copy's lock while it runs (exclusive for a test that runs Snakemake in the copy, shared for one that only reads
it), so no two tests ever change a copy at once."""

import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_testing import shared_lock
from workflow_testing import build_smoke, build_standin, snakemake, start_shared_builds


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The run's first test is the first of this folder, so that its worker starts the shared builds
    (:func:`shared_builds`) at once and the unit tests of both workers run beside them, instead of the builds
    starting when the last tests in collection order, this folder's, reach them."""
    here = Path(__file__).parent
    first = next((item for item in items if here in Path(item.path).parents), None)
    if first is not None:
        items.remove(first)
        items.insert(0, first)


@pytest.fixture(scope="session", autouse=True)
def shared_builds(request, tmp_path_factory) -> Iterator[None]:
    """Starts, in a thread of this worker, the shared builds this run's tests ask for: the smoke base model, then the
    stand-in build beside the smoke build (when a test asks for the stand-in copy):
    ``workflow_testing.start_shared_builds``. The worker ends after the thread (another worker may be waiting for
    its build)."""
    wanted = {name for item in request.session.items for name in item.fixturenames}
    thread = start_shared_builds(tmp_path_factory, "standin_copy" in wanted) if "smoke_copy" in wanted else None
    yield
    if thread is not None:
        thread.join()


@pytest.fixture(scope="session")
def smoke_copy(tmp_path_factory) -> Path:
    """The smoke copy after the smoke build (``all shared_stages``), started by :func:`shared_builds`."""
    return build_smoke(tmp_path_factory)


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
    """The smoke-built copy, locked for the test: exclusively when the test runs Snakemake in it
    (:func:`run_snakemake`), shared otherwise (a test that reads it, or plans in it: :func:`plan_snakemake`)."""
    with shared_lock(tmp_path_factory, fcntl.LOCK_EX if "run_snakemake" in request.fixturenames else fcntl.LOCK_SH,
                     "smoke_build"):
        yield smoke_copy


@pytest.fixture(scope="session")
def run_snakemake():
    """``run_snakemake(copy, *args)``: Snakemake with the smoke profile in a copy."""
    return snakemake


@pytest.fixture(scope="session")
def plan_snakemake():
    """``plan_snakemake(copy, *args)``: a dry run (``-n``) of Snakemake with the smoke profile in a copy. It changes
    nothing a test reads (Snakemake takes no lock for a dry run; it writes only its I/O cache,
    ``.snakemake/iocache``, which a run reads only when told to trust it), so its test shares the copy's lock with
    the tests that read the copy."""
    return lambda copy, *args: snakemake(copy, "-n", *args)
