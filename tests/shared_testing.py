"""What the tests make once per test run and share across the pytest-xdist workers: files in the run's common
temporary folder (the parent of the workers' base temporary folders; the run's own one without xdist), made under an
exclusive lock by whichever worker asks first. A failure is recorded and reported to every worker that asks later,
never made again. Used by ``conftest.py`` (the SmolLM2 checkpoint) and ``workflow/`` (the end-to-end builds, the plans
of the dry runs)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def shared_lock(tmp_path_factory: pytest.TempPathFactory, mode: int, name: str) -> Iterator[Path]:
    """Holds the lock ``name`` (``fcntl.LOCK_EX`` or ``LOCK_SH``) in the temporary folder every xdist worker of this
    run shares; yields that folder."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, mode)
        yield root


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The shared folder after ``make(folder)``, run once per test run under the lock ``name`` by whichever worker
    asks first. An exception of ``make`` (a failed test included) is recorded in ``<name>.failed`` and raised; every
    later ask fails with it."""
    with shared_lock(tmp_path_factory, fcntl.LOCK_EX, name) as root:
        done, failed = root / f"{name}.done", root / f"{name}.failed"
        if failed.exists():
            pytest.fail(f"{name} failed (in another worker):\n{failed.read_text()}")
        if not done.exists():
            try:
                make(root)
            except (Exception, pytest.fail.Exception) as error:
                failed.write_text(str(error) or repr(error))
                raise
            done.touch()
    return root
