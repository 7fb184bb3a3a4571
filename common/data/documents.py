"""Documents: extraction from an archive or local files, cleaning, and deterministic splits.

Cleaning, applied to every document of every corpus (in this order):

1. decode UTF-8 and normalize to Unicode NFC; ``\\r\\n`` and ``\\r`` become ``\\n``;
2. keep only the text between Project Gutenberg ``*** START OF`` / ``*** END OF`` markers when present;
3. strip trailing whitespace on every line, collapse runs of 3+ newlines to one blank line, strip the ends;
4. drop documents shorter than ``min_chars`` characters (default 200).

Splits are by document: the document ids are sorted, permuted with ``numpy.random.default_rng(seed)``, and
the first ``round(test * N)`` go to test, the next ``round(validation * N)`` to validation (each at least 1),
the rest to train. Each split is written as JSONL, one ``{"id", "text"}`` per line in id order.

A ``datasets`` dataset with its own splits (``--hf-splits``, e.g. WikiText-2's train/validation/test) keeps them
instead: each of our splits is the named split of the dataset, cleaned row by row, or with ``--join SEP`` one
verbatim document of the rows joined by SEP (``joined_document``: what a paper's perplexity is computed on).
"""

from __future__ import annotations

import fnmatch
import glob
import json
import re
import tarfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import io
from common.io import write_json

from .sources import CorpusSource

SPLITS = ("train", "validation", "test")
CLEANING_VERSION = 1
_GUTENBERG = re.compile(r"\*\*\* ?START OF.*?\*\*\*(.*?)\*\*\* ?END OF", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class Document:
    id: str
    text: str


def clean_text(raw: str) -> str:
    """Steps 1-3 of the module docstring."""
    text = unicodedata.normalize("NFC", raw).replace("\r\n", "\n").replace("\r", "\n")
    marked = _GUTENBERG.search(text)
    if marked:
        text = marked.group(1)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def read_archive_documents(archive: Path, source: CorpusSource) -> list[Document]:
    """Raw documents of ``source`` from its archive (member stem = document id), uncleaned."""
    documents = []
    with tarfile.open(archive, "r:*") as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.isfile() or not fnmatch.fnmatch(member.name, source.members):
                continue
            if any(part in Path(member.name).name for part in source.exclude):
                continue
            payload = tar.extractfile(member).read().decode("utf-8")
            text = json.loads(payload)[source.text_field] if source.text_field else payload
            documents.append(Document(Path(member.name).stem, text))
    if not documents:
        raise ValueError(f"archive {archive} has no member matching {source.members!r}")
    return documents


def read_local_documents(paths: Sequence[str | Path]) -> list[Document]:
    """One document per local text file (id = file stem; paths may be globs)."""
    files: list[Path] = []
    for pattern in paths:
        matched = ([Path(p) for p in sorted(glob.glob(str(pattern)))] if any(c in str(pattern) for c in "*?[")
                   else [Path(pattern)])
        missing = [p for p in matched if not p.is_file()]
        if not matched or missing:
            raise ValueError(f"no text file at {str(missing[0] if missing else pattern)!r}")
        files.extend(matched)
    return [Document(path.stem, path.read_text(encoding="utf-8")) for path in files]


def read_hf_dataset_documents(name: str, split: str = "train", text_field: str = "text",
                              config_name: str | None = None, max_rows: int | None = None) -> list[Document]:
    """One document per row of split ``split`` of a ``datasets`` dataset (a hub id, which needs network or a warm
    cache, or a local dataset folder), ids the row numbers; with ``max_rows``, the first ``max_rows`` rows, streamed
    (a sample of a corpus too large to download whole, e.g. FineWeb's ``sample-10BT``)."""
    import datasets

    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    dataset = datasets.load_dataset(name, config_name, split=split, streaming=max_rows is not None)
    rows = dataset.take(max_rows) if max_rows is not None else dataset
    documents = []
    for i, row in enumerate(rows):  # a streamed dataset may not know its fields before its first row
        if text_field not in row:
            raise ValueError(f"dataset {name!r} has no field {text_field!r}; fields: {', '.join(row)}")
        documents.append(Document(f"{i:07d}", row[text_field]))
    return documents


def joined_document(documents: Sequence[Document], separator: str, doc_id: str) -> Document:
    """The texts of ``documents`` in order, joined by ``separator``, as one document, verbatim (no cleaning). How
    perplexity papers take WikiText-2's test split: the GPTQ convention ``"\\n\\n".join(rows)``, which the
    Finer-is-Better and microscaling-limits evaluations (sequence 2048, stride 2048) follow."""
    if not documents:
        raise ValueError(f"no rows to join into document {doc_id!r}")
    return Document(doc_id, separator.join(d.text for d in documents))


def clean_documents(documents: Iterable[Document], min_chars: int = 200) -> list[Document]:
    """Clean every document and drop the short ones (steps 1-4); ids must be unique."""
    cleaned = [Document(d.id, clean_text(d.text)) for d in documents]
    ids = [d.id for d in cleaned]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"duplicate document id {duplicate!r}")
    return [d for d in cleaned if len(d.text) >= min_chars]


def split_documents(documents: Sequence[Document], seed: int, validation: float = 0.1,
                    test: float = 0.1) -> dict[str, list[Document]]:
    """Deterministic split by document (module docstring); every split non-empty."""
    for name, fraction in (("validation", validation), ("test", test)):
        if not 0 < fraction < 0.5:
            raise ValueError(f"{name} fraction must be in (0, 0.5), got {fraction}")
    ordered = sorted(documents, key=lambda d: d.id)
    if len(ordered) < 3:
        raise ValueError(f"need at least 3 documents to split, got {len(ordered)}")
    order = np.random.default_rng(seed).permutation(len(ordered))
    n_test = max(1, round(test * len(ordered)))
    n_val = max(1, round(validation * len(ordered)))
    chosen = {"test": order[:n_test], "validation": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    return {split: sorted((ordered[i] for i in chosen[split]), key=lambda d: d.id) for split in SPLITS}


def write_jsonl(path: str | Path, documents: Iterable[Document]) -> None:
    """Write a split: one ``{"id", "text"}`` object a line, atomically."""
    io.write_jsonl(path, ({"id": d.id, "text": d.text} for d in documents))


def iter_jsonl(path: str | Path) -> Iterator[Document]:
    """Stream a split: JSONL, one ``{"id": str, "text": str}`` object a line (blank lines skipped), ids unique,
    at least one document. A bad line raises ``ValueError`` naming ``path:line`` and the problem (when it is
    reached: a consumer that stops early sees only the lines it read)."""
    seen: set[str] = set()
    shape = '{"id": str, "text": str}'
    for line_no, record in io.read_jsonl(path, expected=shape):
        if not (isinstance(record.get("id"), str) and isinstance(record.get("text"), str)):
            raise ValueError(f"{path}:{line_no}: expected {shape}, got {json.dumps(record)[:80]!r}")
        if record["id"] in seen:
            raise ValueError(f"{path}:{line_no}: duplicate document id {record['id']!r}")
        seen.add(record["id"])
        yield Document(record["id"], record["text"])
    if not seen:
        raise ValueError(f"{path}: no documents")


def read_jsonl(path: str | Path) -> list[Document]:
    """A whole split in memory (:func:`iter_jsonl`'s documents and checks)."""
    return list(iter_jsonl(path))


def write_splits(out_dir: str | Path, splits: dict[str, list[Document]], manifest: dict) -> None:
    """Write ``<split>.jsonl`` for every split and ``manifest.json`` (counts added) into ``out_dir``."""
    out_dir = Path(out_dir)
    for split in SPLITS:
        write_jsonl(out_dir / f"{split}.jsonl", splits[split])
    counts = {split: {"documents": len(docs), "characters": sum(len(d.text) for d in docs)}
              for split, docs in splits.items()}
    write_json(out_dir / "manifest.json", {**manifest, "cleaning_version": CLEANING_VERSION, "splits": counts})
