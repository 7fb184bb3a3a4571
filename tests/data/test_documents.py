"""Cleaning, archive extraction, deterministic splits, JSONL round trip."""

import hashlib
import json

import pytest

from common.data.documents import (
    SPLITS,
    Document,
    clean_documents,
    clean_text,
    hashed_split,
    read_archive_documents,
    read_jsonl,
    read_local_documents,
    split_documents,
    write_hashed_splits,
    write_splits,
)
from common.io import sha256_file

from .test_sources import source_for, tiny_archive


def test_clean_text():
    raw = "Line one  \r\nline two\r\n\r\n\r\n\r\nLast\t\n"
    assert clean_text(raw) == "Line one\nline two\n\nLast"
    gutenberg = ("Header\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\nBody text.\n"
                 "*** END OF THE PROJECT ***\nLicense")
    assert clean_text(gutenberg) == "Body text."
    assert clean_text("e\u0301") == "\u00e9"  # NFC


def test_archive_documents_with_json_members_and_exclusions(tmp_path):
    archive = tiny_archive(tmp_path / "t.tgz", {
        "package/data/b.json": json.dumps({"text": "bee"}),
        "package/data/a.json": json.dumps({"text": "ay"}),
        "package/data/contents.json": json.dumps({"text": "skip me"}),
        "package/lib/c.json": json.dumps({"text": "outside"}),
    })
    source = source_for(archive)
    source = type(source)(**{**source.__dict__, "members": "package/data/*.json", "text_field": "text",
                             "exclude": ("contents",)})
    docs = read_archive_documents(archive, source)
    assert docs == [Document("a", "ay"), Document("b", "bee")]
    assert sha256_file(archive) == source.sha256


def test_splits_are_deterministic_disjoint_and_complete():
    docs = [Document(f"d{i:03d}", "x" * 300) for i in range(50)]
    a = split_documents(docs, seed=0)
    assert split_documents(list(reversed(docs)), seed=0) == a  # input order does not matter
    assert split_documents(docs, seed=1) != a
    ids = [d.id for split in a.values() for d in split]
    assert sorted(ids) == sorted(d.id for d in docs)
    assert (len(a["train"]), len(a["validation"]), len(a["test"])) == (40, 5, 5)
    with pytest.raises(ValueError, match="validation fraction must be in"):
        split_documents(docs, seed=0, validation=0.7)
    with pytest.raises(ValueError, match="at least 3 documents"):
        split_documents(docs[:2], seed=0)


def test_short_and_duplicate_documents():
    docs = clean_documents([Document("a", "x" * 250), Document("b", "short")], min_chars=200)
    assert [d.id for d in docs] == ["a"]
    with pytest.raises(ValueError, match="duplicate document id 'a'"):
        clean_documents([Document("a", "x" * 300), Document("a", "y" * 300)])


def test_write_splits_and_read_back(tmp_path):
    docs = [Document(f"d{i}", f"text {i} " * 40) for i in range(10)]
    splits = split_documents(docs, seed=0)
    write_splits(tmp_path, splits, {"source": {"files": {}}})
    assert read_jsonl(tmp_path / "train.jsonl") == splits["train"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["splits"]["test"]["documents"] == len(splits["test"])
    assert manifest["splits"]["train"]["characters"] == sum(len(d.text) for d in splits["train"])


def test_local_files(tmp_path):
    (tmp_path / "one.txt").write_text("first")
    (tmp_path / "two.txt").write_text("second")
    docs = read_local_documents([str(tmp_path / "*.txt")])
    assert docs == [Document("one", "first"), Document("two", "second")]
    with pytest.raises(ValueError, match="no text file at"):
        read_local_documents([str(tmp_path / "missing.txt")])


def test_read_jsonl_skips_blank_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"id": "b", "text": "bee"}\n\n{"id": "a", "text": "ay"}\n\n', encoding="utf-8")
    assert read_jsonl(path) == [Document("b", "bee"), Document("a", "ay")]  # file order


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "text": "x"}\n{"id": "a"\n', r"s.jsonl:2: not valid JSON"),
        ('{"id": "a", "text": 3}\n', r's.jsonl:1: expected \{"id": str, "text": str\}'),
        ('["a", "x"]\n', r's.jsonl:1: expected \{"id": str, "text": str\}'),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "s.jsonl:2: duplicate document id 'a'"),
        ("\n", "s.jsonl: no documents"),
    ],
)
def test_read_jsonl_names_the_bad_line(tmp_path, content, message):
    (tmp_path / "s.jsonl").write_text(content)
    with pytest.raises(ValueError, match=message):
        read_jsonl(tmp_path / "s.jsonl")


def test_hashed_split_is_the_stated_formula():
    for doc_id in ("000000000", "000000001", "000123456", "doc-x"):
        u = int(hashlib.sha256(f"7:{doc_id}".encode()).hexdigest()[:16], 16) / 2**64
        expected = "test" if u < 0.1 else "validation" if u < 0.3 else "train"
        assert hashed_split(doc_id, 7, validation=0.2, test=0.1) == expected


def test_hashed_split_sizes_follow_the_fractions():
    ids = [f"{i:09d}" for i in range(20000)]
    counts = {split: sum(hashed_split(i, 0, 0.1, 0.05) == split for i in ids) for split in SPLITS}
    # binomial: 20000 * 0.05 = 1000 +- 31, 2000 +- 42 (one standard deviation); 5 sd allowed
    assert abs(counts["test"] - 1000) < 5 * 31 and abs(counts["validation"] - 2000) < 5 * 42
    assert sum(counts.values()) == len(ids)
    assert [hashed_split(i, 1, 0.1, 0.05) for i in ids] != [hashed_split(i, 0, 0.1, 0.05) for i in ids]


def streamed(n: int, short: set[int] = frozenset()):
    """A one-shot stream of ``n`` documents in id order, the ones in ``short`` under 200 characters."""
    return (Document(f"{i:09d}", "short" if i in short else f"row {i}  \r\n" + "word " * 60) for i in range(n))


def test_write_hashed_splits_streams_cleans_and_keeps_id_order(tmp_path):
    write_hashed_splits(tmp_path, streamed(300, short={3, 4}), 0, {"source": {"hf_dataset": "x"}},
                        validation=0.1, test=0.1, min_chars=200)
    read = {split: read_jsonl(tmp_path / f"{split}.jsonl") for split in SPLITS}
    for split, documents in read.items():
        assert [d.id for d in documents] == sorted(d.id for d in documents)  # id order
        assert all(hashed_split(d.id, 0, 0.1, 0.1) == split for d in documents)
    kept = sorted(d.id for docs in read.values() for d in docs)
    assert kept == [f"{i:09d}" for i in range(300) if i not in (3, 4)]
    assert read["train"][0].text == clean_text(f"row {int(read['train'][0].id)}  \r\n" + "word " * 60)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["split_rule"] == "hashed" and manifest["seed"] == 0
    assert (manifest["raw_documents"], manifest["kept_documents"]) == (300, 298)
    assert {split: c["documents"] for split, c in manifest["splits"].items()} == {
        split: len(docs) for split, docs in read.items()}
    assert manifest["source"] == {"hf_dataset": "x"}


def test_a_longer_stream_only_adds_documents_to_each_split(tmp_path):
    write_hashed_splits(tmp_path / "short", streamed(200), 0, {}, validation=0.1, test=0.1)
    write_hashed_splits(tmp_path / "long", streamed(400), 0, {}, validation=0.1, test=0.1)
    for split in SPLITS:
        short = read_jsonl(tmp_path / "short" / f"{split}.jsonl")
        assert read_jsonl(tmp_path / "long" / f"{split}.jsonl")[:len(short)] == short


@pytest.mark.parametrize(("documents", "message"), [
    (streamed(3), r"split '(validation|test)' is empty: 3 of 3 documents kept \(min_chars 200\), validation 0.1, "
                  r"test 0.1"),
    ((Document(i, "x" * 300) for i in ("b", "a")), r"document id 'a' follows 'b': a streamed corpus must come in"),
])
def test_write_hashed_splits_refuses_and_writes_nothing(tmp_path, documents, message):
    with pytest.raises(ValueError, match=message):
        write_hashed_splits(tmp_path / "out", documents, 0, {})
    assert not (tmp_path / "out").exists()
