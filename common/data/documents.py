"""Documents: extraction from an archive or local files, cleaning, and deterministic splits.

Cleaning, applied to every document of every corpus (in this order):

1. decode UTF-8 and normalize to Unicode NFC; ``\\r\\n`` and ``\\r`` become ``\\n``;
2. keep only the text between Project Gutenberg ``*** START OF`` / ``*** END OF`` markers when present;
3. strip trailing whitespace on every line, collapse runs of 3+ newlines to one blank line, strip the ends;
4. drop documents shorter than ``min_chars`` characters (default 200).

Splits are by document, by one of two rules:

* a corpus read whole (a registry archive, local files; :func:`split_documents`): the document ids are sorted,
  permuted with ``numpy.random.default_rng(seed)``, and the first ``round(test * N)`` go to test, the next
  ``round(validation * N)`` to validation (each at least 1), the rest to train;
* a ``datasets`` dataset split by us (:func:`write_hashed_splits`, e.g. a FineWeb sample of millions of documents):
  streamed, one document in memory at a time, each document's split set by a seeded hash of its id alone
  (:func:`hashed_split`), so the split sizes are ``test * N`` and ``validation * N`` in expectation, not exactly.

Each split is written as JSONL, one ``{"id", "text"}`` per line in id order.

A ``datasets`` dataset with its own splits (``--hf-splits``, e.g. WikiText-2's train/validation/test) keeps them
instead: each of our splits is the named split of the dataset, cleaned row by row, or with ``--join SEP`` one
verbatim document of the rows joined by SEP (``joined_document``: what a paper's perplexity is computed on).
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import re
import tarfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common import io
from common.io import atomic_path, jsonl_line, write_json

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


def iter_hf_dataset_documents(name: str, split: str = "train", text_field: str = "text",
                              config_name: str | None = None, max_rows: int | None = None,
                              streaming: bool = False) -> Iterator[Document]:
    """One document per row of split ``split`` of a ``datasets`` dataset (a hub id, which needs network or a warm
    cache, or a local dataset folder), in row order, ids the row numbers zero-padded to 9 digits (id order is row
    order). ``streaming`` reads the rows as the hub serves them, with no download of the whole dataset (e.g.
    FineWeb's ``sample-10BT``); ``max_rows`` keeps the first ``max_rows`` rows and implies ``streaming``. Offline
    (``HF_HUB_OFFLINE``), where nothing can be streamed, the rows come from the ``datasets`` cache instead (memory-
    mapped Arrow, read a row at a time): the same rows in the same order."""
    import datasets

    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    streaming = (streaming or max_rows is not None) and not datasets.config.HF_HUB_OFFLINE
    dataset = datasets.load_dataset(name, config_name, split=split, streaming=streaming)
    if max_rows is not None:
        dataset = dataset.take(max_rows) if streaming else dataset.select(range(min(max_rows, len(dataset))))
    rows = dataset
    for i, row in enumerate(rows):  # a streamed dataset may not know its fields before its first row
        if text_field not in row:
            raise ValueError(f"dataset {name!r} has no field {text_field!r}; fields: {', '.join(row)}")
        yield Document(f"{i:09d}", row[text_field])


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


def _check_fractions(validation: float, test: float) -> None:
    for name, fraction in (("validation", validation), ("test", test)):
        if not 0 < fraction < 0.5:
            raise ValueError(f"{name} fraction must be in (0, 0.5), got {fraction}")


def split_documents(documents: Sequence[Document], seed: int, validation: float = 0.1,
                    test: float = 0.1) -> dict[str, list[Document]]:
    """Deterministic split of a corpus read whole (module docstring, first rule); every split non-empty."""
    _check_fractions(validation, test)
    ordered = sorted(documents, key=lambda d: d.id)
    if len(ordered) < 3:
        raise ValueError(f"need at least 3 documents to split, got {len(ordered)}")
    order = np.random.default_rng(seed).permutation(len(ordered))
    n_test = max(1, round(test * len(ordered)))
    n_val = max(1, round(validation * len(ordered)))
    chosen = {"test": order[:n_test], "validation": order[n_test : n_test + n_val], "train": order[n_test + n_val :]}
    return {split: sorted((ordered[i] for i in chosen[split]), key=lambda d: d.id) for split in SPLITS}


def hashed_split(doc_id: str, seed: int, validation: float = 0.1, test: float = 0.1) -> str:
    """The split of one document of a streamed corpus (module docstring, second rule): with ``u`` the first 8 bytes
    of ``sha256(f"{seed}:{doc_id}")`` as a big-endian integer over ``2**64`` (uniform on [0, 1)), ``"test"`` when
    ``u < test``, ``"validation"`` when ``u < test + validation``, else ``"train"``. It depends on the id alone, so a
    document keeps its split whatever else the corpus holds (a longer sample only adds documents to each split)."""
    digest = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return "test" if u < test else "validation" if u < test + validation else "train"


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
    _write_manifest(out_dir, manifest, counts)


def _write_manifest(out_dir: Path, manifest: dict, counts: dict[str, dict[str, int]]) -> None:
    """``manifest.json`` of a corpus folder: ``manifest`` with the cleaning version and the per-split counts."""
    write_json(out_dir / "manifest.json", {**manifest, "cleaning_version": CLEANING_VERSION, "splits": counts})


def write_hashed_splits(out_dir: str | Path, documents: Iterable[Document], seed: int, manifest: dict, *,
                        validation: float = 0.1, test: float = 0.1, min_chars: int = 200) -> None:
    """Clean, filter and split a streamed corpus (module docstring: cleaning steps 1-4, the second split rule) into
    ``<split>.jsonl`` and ``manifest.json`` in ``out_dir``, as :func:`write_splits` writes them, holding one document
    in memory at a time. The documents must come in id order with unique ids (:func:`iter_hf_dataset_documents`'s
    row numbers), which keeps each split in id order. ``ValueError`` for a split left empty or an id out of order;
    nothing is written then (every file is written atomically)."""
    _check_fractions(validation, test)
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    try:
        counts, raw = _stream_splits(out_dir, documents, seed, validation, test, min_chars)
    except BaseException:
        if created and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()  # nothing written: not even the folder
        raise
    _write_manifest(out_dir, {**manifest, "seed": seed, "min_chars": min_chars, "split_rule": "hashed",
                              "fractions": {"validation": validation, "test": test}, "raw_documents": raw,
                              "kept_documents": sum(c["documents"] for c in counts.values())}, counts)


def _stream_splits(out_dir: Path, documents: Iterable[Document], seed: int, validation: float, test: float,
                   min_chars: int) -> tuple[dict[str, dict[str, int]], int]:
    """:func:`write_hashed_splits`'s three files, each atomic; ``(counts per split, documents read)``."""
    counts = {split: {"documents": 0, "characters": 0} for split in SPLITS}
    raw, previous = 0, None
    with ExitStack() as files:
        handles = {split: files.enter_context(open(files.enter_context(atomic_path(out_dir / f"{split}.jsonl")),
                                                   "w", encoding="utf-8")) for split in SPLITS}
        for document in documents:
            if previous is not None and document.id <= previous:
                raise ValueError(f"document id {document.id!r} follows {previous!r}: a streamed corpus must come in "
                                 "increasing id order")
            raw, previous = raw + 1, document.id
            text = clean_text(document.text)
            if len(text) < min_chars:
                continue
            split = hashed_split(document.id, seed, validation, test)
            handles[split].write(jsonl_line({"id": document.id, "text": text}))
            counts[split]["documents"] += 1
            counts[split]["characters"] += len(text)
        empty = [split for split in SPLITS if not counts[split]["documents"]]
        if empty:
            kept = sum(c["documents"] for c in counts.values())
            raise ValueError(f"split {empty[0]!r} is empty: {kept} of {raw} documents kept (min_chars {min_chars}), "
                             f"validation {validation}, test {test}; more documents or larger fractions are needed")
    return counts, raw
