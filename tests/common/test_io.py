"""Atomic writes leave either the whole new file or the old one, never a partial file."""

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
