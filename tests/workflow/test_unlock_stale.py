"""workflow/unlock_stale.py (`make reports` runs it first): a lock is cleared only when no Snakemake process runs in
the folder. The real `snakemake --unlock` runs in tests/workflow/test_resume.py; here it is recorded."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

# workflow/ is no package: the script is imported by its path
SPEC = importlib.util.spec_from_file_location("unlock_stale", Path(__file__).resolve().parents[2] / "workflow"
                                              / "unlock_stale.py")
unlock_stale = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(unlock_stale)
LOCKS, clear_stale_lock, is_snakemake = unlock_stale.LOCKS, unlock_stale.clear_stale_lock, unlock_stale.is_snakemake
snakemake_processes = unlock_stale.snakemake_processes


@pytest.mark.parametrize(("cmdline", "expected"), [
    (["/repo/.venv/bin/python", "/repo/.venv/bin/snakemake", "--profile", "workflow/profiles/smoke"], True),
    (["snakemake", "--cores", "2"], True),
    (["python", "-m", "snakemake", "--profile", "workflow/profiles/smoke"], True),
    (["python", "-X", "utf8", "-m", "snakemake"], True),
    (["python", "workflow/unlock_stale.py"], False),
    (["python", "-m", "common.train", "--run-dir", "results/snakemake"], False),
    (["python", "-m", "pytest", "tests/workflow/snakemake"], False),
    ([], False),
])
def test_is_snakemake(cmdline, expected):
    assert is_snakemake(cmdline) is expected


class Unlock:
    """Records the folders it is asked to unlock, and removes their locks as `snakemake --unlock` does."""

    def __init__(self, status=0):
        self.status, self.folders = status, []

    def __call__(self, folder):
        self.folders.append(folder)
        for lock in (folder / LOCKS).iterdir():
            lock.unlink()
        return self.status


def locked(folder):
    (folder / LOCKS).mkdir(parents=True)
    (folder / LOCKS / "0.input.lock").write_text(f"{folder}/data\n")
    return folder


def test_no_lock_nothing_to_do(tmp_path):
    unlock = Unlock()
    assert clear_stale_lock(tmp_path, unlock) is False
    (tmp_path / LOCKS).mkdir(parents=True)  # Snakemake keeps the empty folder after a clean run
    assert clear_stale_lock(tmp_path, unlock) is False
    assert unlock.folders == []


def test_a_lock_without_a_snakemake_process_is_cleared(tmp_path, capsys):
    unlock = Unlock()
    assert clear_stale_lock(locked(tmp_path), unlock) is True
    assert unlock.folders == [tmp_path.resolve()]
    assert list((tmp_path / LOCKS).iterdir()) == []
    assert "the lock is stale" in capsys.readouterr().err


def test_a_failed_unlock_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match=r"snakemake --unlock in .* failed with exit status 1"):
        clear_stale_lock(locked(tmp_path), Unlock(status=1))


@pytest.fixture
def fake_snakemake(tmp_path):
    """Starts a process named like Snakemake (a script `snakemake` run by Python) in a given folder."""
    script = tmp_path / "bin" / "snakemake"
    script.parent.mkdir()
    script.write_text("import time\ntime.sleep(60)\n")
    started = []

    def start(folder):
        started.append(subprocess.Popen([sys.executable, str(script)], cwd=folder))
        return started[-1].pid

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_the_lock_of_a_running_snakemake_is_kept(tmp_path, fake_snakemake, capsys):
    folder = locked(tmp_path / "repo")
    pid = fake_snakemake(folder)
    assert snakemake_processes(folder) == [pid]
    unlock = Unlock()
    assert clear_stale_lock(folder, unlock) is False
    assert unlock.folders == []
    assert (folder / LOCKS / "0.input.lock").exists()
    assert f"belongs to the Snakemake run in progress (process {pid}): kept" in capsys.readouterr().err


def test_a_snakemake_in_another_folder_does_not_keep_the_lock(tmp_path, fake_snakemake):
    folder, elsewhere = locked(tmp_path / "repo"), tmp_path / "other"
    elsewhere.mkdir()
    fake_snakemake(elsewhere)
    assert snakemake_processes(folder) == []
    assert clear_stale_lock(folder, Unlock()) is True
