"""`python -m common.data prepare` from a `datasets` dataset: its own splits (joined verbatim or row by row), and a
sample streamed and split by the hash of its row ids. The dataset is a local folder of JSONL files, the offline stand-in of a hub id."""

import json

import datasets
import pytest

from common.data.__main__ import main
from common.data.documents import hashed_split, read_jsonl

ROWS = {
    "train": [" = Valkyria = \n", "", " It was released in 2011 .   \n", " And more text follows here . \n"],
    "validation": [" = Tower = \n", " The tower stands . \n"],
    "test": [" = Robert = \n", "", " Robert is an actor . \n"],
}


@pytest.fixture
def local_dataset(tmp_path):
    folder = tmp_path / "wikitext_standin"
    folder.mkdir()
    for split, rows in ROWS.items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps({"text": row}) + "\n" for row in rows))
    return folder


def test_dataset_splits_joined_verbatim(local_dataset, tmp_path):
    out = tmp_path / "wikitext2"
    code = main(["prepare", "--hf-dataset", str(local_dataset), "--hf-splits", "train=train",
                 "validation=validation", "test=test", "--join", r"\n\n", "--out-dir", str(out)])
    assert code == 0
    for split, rows in ROWS.items():
        (document,) = read_jsonl(out / f"{split}.jsonl")
        assert document.id == split
        assert document.text == "\n\n".join(rows)  # byte for byte: no cleaning, empty rows kept
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"]["splits"] == {"train": "train", "validation": "validation", "test": "test"}
    assert manifest["source"]["join"] == "\n\n"
    assert manifest["raw_documents"] == 9 and manifest["kept_documents"] == 3


def test_dataset_splits_row_by_row_are_cleaned(local_dataset, tmp_path):
    out = tmp_path / "rows"
    assert main(["prepare", "--hf-dataset", str(local_dataset), "--hf-splits", "train=train", "validation=test",
                 "test=validation", "--min-chars", "10", "--out-dir", str(out)]) == 0
    assert [d.text for d in read_jsonl(out / "train.jsonl")] == ["= Valkyria =", "It was released in 2011 .",
                                                                 "And more text follows here ."]
    assert [d.text for d in read_jsonl(out / "validation.jsonl")] == ["= Robert =", "Robert is an actor ."]


@pytest.fixture
def sample_dataset(tmp_path):
    """A one-split dataset of 40 rows (row 5 too short to keep), the offline stand-in of a FineWeb sample."""
    folder = tmp_path / "sample_standin"
    folder.mkdir()
    rows = ["tiny" if i == 5 else f"Document {i}. " + "Some words here. " * 20 for i in range(40)]
    (folder / "train.jsonl").write_text("".join(json.dumps({"text": row}) + "\n" for row in rows))
    return folder


@pytest.mark.parametrize("online", [True, False])
@pytest.mark.parametrize("flags", [["--max-rows", "30"], ["--streaming"], []])
def test_a_sample_is_streamed_and_split_by_the_hash_of_its_row_ids(sample_dataset, tmp_path, monkeypatch, flags,
                                                                    online):
    """Online a sample is streamed; offline it is read from the datasets cache (here: the local folder, loaded
    whole): the same rows, ids and splits either way."""
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", not online)
    out = tmp_path / "sample"
    assert main(["prepare", "--hf-dataset", str(sample_dataset), *flags, "--seed", "3", "--validation", "0.2",
                 "--test", "0.2", "--out-dir", str(out)]) == 0
    rows = 30 if "--max-rows" in flags else 40
    kept = {split: [d.id for d in read_jsonl(out / f"{split}.jsonl")] for split in ("train", "validation", "test")}
    assert sorted(i for ids in kept.values() for i in ids) == [f"{i:09d}" for i in range(rows) if i != 5]
    assert all(hashed_split(i, 3, 0.2, 0.2) == split for split, ids in kept.items() for i in ids)
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["raw_documents"], manifest["kept_documents"], manifest["split_rule"]) == (rows, rows - 1,
                                                                                               "hashed")
    assert manifest["source"]["max_rows"] == (30 if rows == 30 else None)
    assert manifest["source"]["streaming"] == ("--streaming" in flags)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hf-splits", "train=train", "test=test"], "--hf-splits needs OURS=THEIRS for each of"),
        (["--hf-splits", "train=train", "validation=validation", "dev=test"], "'dev=test'"),
        (["--join", r"\n"], "--join '\\n' needs --hf-splits"),
        (["--max-rows", "0"], "max_rows must be at least 1, got 0"),
    ],
)
def test_bad_dataset_options_name_the_value(local_dataset, tmp_path, capsys, args, message):
    out = tmp_path / "bad"
    assert main(["prepare", "--hf-dataset", str(local_dataset), *args, "--out-dir", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_text_field_is_named(local_dataset, tmp_path, capsys):
    out = tmp_path / "field"
    assert main(["prepare", "--hf-dataset", str(local_dataset), "--max-rows", "2", "--text-field", "body",
                 "--out-dir", str(out)]) == 2
    assert "has no field 'body'; fields: text" in capsys.readouterr().err  # streamed: read from the first row
    assert not out.exists()


def test_dataset_flags_without_a_dataset_are_named(tmp_path, capsys):
    assert main(["prepare", "--files", str(tmp_path / "x.txt"), "--hf-config", "c", "--max-rows", "3",
                 "--out-dir", str(tmp_path / "out")]) == 2
    assert "--hf-config, --max-rows need --hf-dataset" in capsys.readouterr().err
