"""Atomic writes leave either the whole new file or the old one, never a partial file."""

import os
import shutil
from pathlib import Path

import pytest

from common.io import atomic_dir, atomic_path, read_json, write_json


def test_write_json_round_trip(tmp_path):
    write_json(tmp_path / "a" / "x.json", {"b": 1, "a": [1.5, None]})
    assert read_json(tmp_path / "a" / "x.json") == {"a": [1.5, None], "b": 1}
    assert (tmp_path / "a" / "x.json").read_text().startswith('{\n  "a"')


def write_then_fail(context, name):
    with context as tmp:
        (tmp / name if tmp.is_dir() else tmp).write_text("half")
        raise RuntimeError("boom")


def write_files(context, names, text):
    with context as folder:
        for name in names:
            (folder / name).write_text(text)


def test_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "x.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="boom"):
        write_then_fail(atomic_path(target), "x")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.txt"]


def test_atomic_dir_replaces_whole_folder(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.bin").write_text("o")
    with atomic_dir(target) as tmp:
        (tmp / "new.bin").write_text("n")
    assert sorted(p.name for p in target.iterdir()) == ["new.bin"]
    with pytest.raises(RuntimeError, match="boom"):
        write_then_fail(atomic_dir(target), "partial.bin")
    assert sorted(p.name for p in target.iterdir()) == ["new.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_atomic_dir_interrupted_while_removing_the_old_folder_leaves_the_new_one_whole(tmp_path, monkeypatch):
    """The old folder goes aside before the new one takes its name: a kill while it is being deleted (here: after
    one of its files) leaves the whole new folder, never a mix of the two."""
    target = tmp_path / "model"
    target.mkdir()
    for name in ("a.bin", "b.bin"):
        (target / name).write_text("old")
    real_rmtree = shutil.rmtree

    def killed_rmtree(path, ignore_errors=False):
        if ignore_errors:
            return real_rmtree(path, ignore_errors=True)
        next(Path(path).iterdir()).unlink()
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(shutil, "rmtree", killed_rmtree)
    with pytest.raises(KeyboardInterrupt):
        write_files(atomic_dir(target), ("a.bin", "b.bin"), "new")
    assert {p.name: p.read_text() for p in target.iterdir()} == {"a.bin": "new", "b.bin": "new"}


def test_atomic_dir_failing_to_put_the_new_folder_in_place_keeps_the_old_one(tmp_path, monkeypatch):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.bin").write_text("o")
    real_replace = os.replace

    def failing_replace(source, destination):
        if Path(source).name.startswith(".tmp-") and not Path(source).name.endswith(".old"):
            raise OSError("disk full")
        return real_replace(source, destination)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_files(atomic_dir(target), ("new.bin",), "n")
    assert sorted(p.name for p in target.iterdir()) == ["old.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
