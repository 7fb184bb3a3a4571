"""End to end: a build killed hard resumes with the same command (issue 30, section 5).

A fresh copy of the session's smoke build (``conftest.py``) keeps its sources and what one WinQ training cell reads
(the data, the smoke base model, its token shards); ``make reports PROFILE=smoke TARGETS=...`` builds that cell and
its checkpoint quantization there, and is killed with SIGKILL, its whole process group, while the cell trains, after
its checkpoint. The kill leaves what used to stop the same command twice: Snakemake's lock (a LockException) and
the cell's outputs marked incomplete (an IncompleteFilesException). The same command then runs to completion: the
Makefile clears the stale lock (``workflow/unlock_stale.py``), the smoke profile's ``rerun-incomplete`` reruns the
cut-off job, and the cell resumes from its checkpoint. Its artifacts equal those of the smoke build, which built
the cell uninterrupted: byte for byte, except the fields that record wall time and the resumed step."""

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

CELL = "w1-winq/seed0"
RUN_DIR = f"results/smoke/winq/runs/{CELL}"
TRAINED = f"results/smoke/models/trained/winq/{CELL}"
QUANTIZED = f"results/smoke/models/quantized/paretoq_learned/trained/winq/{CELL}"
BUILT = (RUN_DIR, TRAINED, QUANTIZED)  # what the build makes, compared with the smoke build's
INPUTS = ("data", "results/smoke/models/base/smoke", "results/smoke/tokens")  # what the cell reads
BUILD_FOLDERS = {".snakemake", "data", "logs", "reports", "results"}  # a build's outputs and records (.gitignore)
VOLATILE = {"seconds", "resumed_from"}  # the only fields a resumed run may change: wall time, where it resumed
LOG = "stderr.log"  # the training rule's log (progress and timings), no artifact


def make_reports(copy: Path, output: Path) -> subprocess.Popen:
    """``make reports PROFILE=smoke TARGETS=<the quantized cell>`` in ``copy``, in a process group of its own, its
    output to ``output``; ``.venv`` is this interpreter's (``-o``: make does not set one up)."""
    command = ["make", "-o", ".venv/.installed", "reports", f"BIN={Path(sys.executable).parent}", "PROFILE=smoke",
               f"TARGETS={QUANTIZED}"]
    with open(output, "w") as handle:
        return subprocess.Popen(command, cwd=copy, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)


def planned_jobs(output: str) -> dict[str, int]:
    """Snakemake's table of the jobs it is about to run (``Job stats:``): ``{rule: count}``."""
    table = output.split("Job stats:", 1)[1].split("\ntotal", 1)[0]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def kill_group_when(build: subprocess.Popen, ready: Path, output: Path, timeout: float = 600) -> None:
    """SIGKILL to every process of ``build``'s group as soon as ``ready`` exists; returns once none is left."""
    deadline = time.monotonic() + timeout
    while not ready.exists():
        assert build.poll() is None, f"the build ended before {ready} appeared:\n{output.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {ready} after {timeout} s"
        time.sleep(0.005)
    os.killpg(build.pid, signal.SIGKILL)
    build.wait()
    while group_alive(build.pid):
        assert time.monotonic() < deadline, f"process group {build.pid} outlived SIGKILL"
        time.sleep(0.05)


def group_alive(group: int) -> bool:
    """Whether a process of process group ``group`` still runs (a zombie has ended)."""
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except ProcessLookupError:
            continue
    return False


def without_volatile(value):
    if isinstance(value, dict):
        return {key: without_volatile(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(item) for item in value]
    return value


def parsed(path: Path):
    """A JSON document or the rows of a CSV file, without the :data:`VOLATILE` fields; None for another file."""
    if path.suffix == ".json":
        return without_volatile(json.loads(path.read_text()))
    if path.suffix == ".csv":
        with open(path, newline="") as handle:
            return without_volatile(list(csv.DictReader(handle)))
    return None


def artifacts(folder: Path) -> list[Path]:
    """The files under ``folder`` (relative), Snakemake's hidden bookkeeping and the training log aside."""
    return sorted(path.relative_to(folder) for path in folder.rglob("*")
                  if path.is_file() and path.name != LOG and not path.name.startswith("."))


def test_a_killed_build_resumes_with_the_same_command(smoke_build, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(smoke_build, copy, ignore=lambda folder, names: BUILD_FOLDERS & set(names)
                    if Path(folder) == smoke_build else set())
    for name in INPUTS:
        shutil.copytree(smoke_build / name, copy / name, symlinks=True)

    killed = tmp_path / "killed.log"
    kill_group_when(make_reports(copy, killed), copy / RUN_DIR / "checkpoint.pt", killed)
    assert planned_jobs(killed.read_text()) == {"quantize_checkpoint": 1, "wq_train": 1}
    assert any((copy / ".snakemake/locks").iterdir())  # a LockException for the next plain `snakemake`
    assert any((copy / ".snakemake/incomplete").iterdir())  # and then an IncompleteFilesException:
    assert (copy / RUN_DIR / "train_log.csv").exists()  # the cell's outputs, begun and marked incomplete
    assert not (copy / TRAINED).exists()

    resumed = tmp_path / "resumed.log"
    rerun = make_reports(copy, resumed)
    assert rerun.wait(timeout=600) == 0, resumed.read_text()[-4000:]
    output = resumed.read_text()
    assert "the lock is stale (a run killed hard): snakemake --unlock" in output
    assert not re.search(r"LockException|IncompleteFilesException|cannot be locked", output)
    assert planned_jobs(output) == {"quantize_checkpoint": 1, "wq_train": 1}

    summary = json.loads((copy / RUN_DIR / "train_summary.json").read_text())
    assert summary["resumed_from"] == summary["config"]["checkpoint_every"]  # from the checkpoint the kill left
    for folder in BUILT:
        reference, built = smoke_build / folder, copy / folder
        assert artifacts(built) == artifacts(reference), folder
        for name in artifacts(reference):
            if (built / name).read_bytes() != (reference / name).read_bytes():
                assert parsed(built / name) is not None, f"{folder}/{name} differs from the uninterrupted build's"
                assert parsed(built / name) == parsed(reference / name), f"{folder}/{name}"
