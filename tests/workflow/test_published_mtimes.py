"""workflow/published_mtimes.py: a clone's published outputs get their records' end times; a changed file keeps its
own."""

import json
import os
import subprocess
from pathlib import Path

from workflow.published_mtimes import metadata_file, restore


def record(root: Path, output: str, end: float) -> None:
    path = root / metadata_file(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rule": "r", "starttime": end - 5, "endtime": end}))


def test_a_clone_gets_the_build_times_back(tmp_path):
    root = tmp_path
    for name in ("results/models/base/m/model.bin", "results/models/base/m/config.json", "results/p/cell.json",
                 "results/p/changed.json", "results/p/unrecorded.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    record(root, "results/models/base/m", 1000.0)  # a folder output, made first
    record(root, "results/p/cell.json", 2000.0)
    record(root, "results/p/changed.json", 3000.0)
    record(root, "results/p/local.json", 4000.0)  # a record git does not track: left alone
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-f", "results", ".snakemake/metadata"], cwd=root, check=True)
    subprocess.run(["git", "rm", "-q", "--cached", str(metadata_file("results/p/local.json"))], cwd=root, check=True)
    (root / "results/p/changed.json").write_text("edited after the clone")
    before = (root / "results/p/changed.json").stat().st_mtime
    assert restore(root) == 2
    assert (root / "results/models/base/m").stat().st_mtime == 1000.0
    assert (root / "results/models/base/m/model.bin").stat().st_mtime == 1000.0
    assert (root / "results/p/cell.json").stat().st_mtime == 2000.0
    assert (root / "results/p/changed.json").stat().st_mtime == before  # modified: its own time
    assert (root / "results/p/unrecorded.json").stat().st_mtime > 2000.0


def test_outside_a_checkout_nothing_is_touched(tmp_path):
    record(tmp_path, "results/p/cell.json", 2000.0)
    (tmp_path / "results/p").mkdir(parents=True)
    (tmp_path / "results/p/cell.json").write_text("x")
    os.utime(tmp_path / "results/p/cell.json", (5000.0, 5000.0))
    assert restore(tmp_path) == 0
    assert (tmp_path / "results/p/cell.json").stat().st_mtime == 5000.0
