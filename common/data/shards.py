"""Token shards: a split tokenized once into binary files of token ids, read back through memory maps.

The in-memory stream of :func:`common.data.tokenizer.token_stream` holds a split as int64 in RAM: 80 GB for the
paper profile's 10B-token QAT corpora. A shard folder holds the same stream on disk, 2 bytes a token (4 when an
id does not fit 16 bits), and :class:`TokenShards` reads only the sequences a batch asks for (the OS page cache
does the rest). The stream is exactly :func:`common.data.tokenizer.stream_ids` of the split's documents in file
order (each document's tokens, then EOS), cut every ``shard_tokens`` tokens (a document may straddle two
shards). So a run on the shards sees the same batches, bit for bit, as a run on the JSONL split:
:class:`common.train.loop.SequenceSampler`'s order is a function of the stream alone.

A folder::

    manifest.json       {"format": "lowbit-token-shards", "version": 1, "dtype": "uint16" | "uint32",
                         "tokens": N, "documents": D, "tokenizer_sha256": ..., "vocab_size": V,
                         "eos_token_id": E, "source": {"split": path, "bytes": size},
                         "shards": [{"file": "shard-00000.bin", "tokens": n, "sha256": ...}, ...]}
    shard-00000.bin     n little-endian ids of ``dtype``

It is written atomically (a temporary folder renamed into place: an interrupted run leaves nothing and starts
over). Opening checks every shard's size against the manifest; :meth:`TokenShards.verify` checks the checksums,
and :func:`load_tokens` that the shards were made by the tokenizer a run uses.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from common.io import atomic_dir, read_json, sha256_file, write_json

from .documents import Document, iter_jsonl, read_jsonl
from .tokenizer import stream_ids, token_stream, tokenizer_fingerprint

if TYPE_CHECKING:
    import torch

FORMAT = "lowbit-token-shards"
VERSION = 1
MANIFEST = "manifest.json"
SHARD_TOKENS = 1 << 28  # 268M tokens: 512 MiB a uint16 shard, ~40 shards for 10B tokens
ENCODE_BATCH = 512      # documents tokenized per call of the (batched, fast) tokenizer


def shard_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` when every id of a ``vocab_size`` vocabulary fits 16 bits, else ``uint32`` (little-endian)."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


def _batches(documents: Iterable[Document], size: int) -> Iterator[list[Document]]:
    iterator = iter(documents)
    while batch := list(islice(iterator, size)):
        yield batch


class _ShardWriter:
    """Appends ids to ``shard-NNNNN.bin`` files of ``capacity`` ids each in ``folder``, hashing as it writes."""

    def __init__(self, folder: Path, dtype: np.dtype, capacity: int):
        self.folder, self.dtype, self.capacity = folder, dtype, capacity
        self.shards: list[dict[str, Any]] = []
        self._file: Path | None = None
        self._digest: Any = None
        self._count = 0

    def write(self, ids: np.ndarray) -> None:
        ids = ids.astype(self.dtype, copy=False)
        while ids.size:
            if self._file is None:
                self._file = self.folder / f"shard-{len(self.shards):05d}.bin"
                self._digest, self._count = hashlib.sha256(), 0
            take = min(ids.size, self.capacity - self._count)
            chunk = ids[:take].tobytes()
            with open(self._file, "ab") as handle:
                handle.write(chunk)
            self._digest.update(chunk)
            self._count += take
            ids = ids[take:]
            if self._count == self.capacity:
                self.close()

    def close(self) -> None:
        """Record the open shard in :attr:`shards` (nothing when none is open)."""
        if self._file is not None:
            self.shards.append({"file": self._file.name, "tokens": self._count, "sha256": self._digest.hexdigest()})
            self._file = None


def write_token_shards(tokenizer: Any, documents: Iterable[Document], out_dir: str | os.PathLike[str], *,
                       shard_tokens: int = SHARD_TOKENS, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """Tokenize ``documents`` (any iterable: streamed, never held whole) into the shard folder ``out_dir``
    (module docstring); returns its manifest. ValueError for ``shard_tokens < 1`` or no tokens at all."""
    if shard_tokens < 1:
        raise ValueError(f"shard_tokens must be >= 1, got {shard_tokens}")
    vocab_size = len(tokenizer)
    dtype = shard_dtype(vocab_size)
    document_count = 0
    with atomic_dir(out_dir) as tmp:
        writer = _ShardWriter(tmp, dtype, shard_tokens)
        for batch in _batches(documents, ENCODE_BATCH):
            document_count += len(batch)
            ids = np.asarray(stream_ids(tokenizer, [d.text for d in batch]), dtype=np.int64)
            outside = ids[(ids < 0) | (ids >= vocab_size)]
            if outside.size:
                raise ValueError(f"token id {int(outside[0])} outside the vocabulary of {vocab_size} (ids 0 to "
                                 f"{vocab_size - 1}; {outside.size} such ids, {outside.min()} to {outside.max()}, "
                                 f"in documents {batch[0].id!r} to {batch[-1].id!r})")
            writer.write(ids)
        writer.close()
        if not writer.shards:
            raise ValueError(f"no tokens to shard into {str(out_dir)!r} ({document_count} documents)")
        manifest = {"format": FORMAT, "version": VERSION, "dtype": dtype.name,
                    "tokens": sum(s["tokens"] for s in writer.shards), "documents": document_count,
                    "tokenizer_sha256": tokenizer_fingerprint(tokenizer), "vocab_size": vocab_size,
                    "eos_token_id": int(tokenizer.eos_token_id), "source": dict(source or {}),
                    "shards": writer.shards}
        write_json(tmp / MANIFEST, manifest)
    return manifest


def shard_split(tokenizer: Any, split: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                shard_tokens: int = SHARD_TOKENS) -> dict[str, Any]:
    """:func:`write_token_shards` of a JSONL split, streamed line by line (:func:`common.data.iter_jsonl`)."""
    if not Path(split).is_file():
        raise ValueError(f"no split file at {str(split)!r}")
    source = {"split": str(split), "bytes": Path(split).stat().st_size}
    return write_token_shards(tokenizer, iter_jsonl(split), out_dir, shard_tokens=shard_tokens, source=source)


class TokenShards:
    """A shard folder as a 1-D token stream: ``numel()``, ``len()`` and slices (step 1) that return int64
    tensors, as a ``torch.long`` stream does; only the sliced ids are read."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        manifest_path = self.path / MANIFEST
        if not manifest_path.is_file():
            raise ValueError(f"no token shards at {str(self.path)!r} (no {MANIFEST})")
        manifest = read_json(manifest_path)
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise ValueError(f"{manifest_path}: format {manifest.get('format')!r} version {manifest.get('version')!r}"
                             f", expected {FORMAT!r} version {VERSION}")
        self.manifest = manifest
        dtype = np.dtype(manifest["dtype"]).newbyteorder("<")
        self._maps = []
        for shard in manifest["shards"]:
            file = self.path / shard["file"]
            expected = shard["tokens"] * dtype.itemsize
            actual = file.stat().st_size if file.is_file() else None
            if actual != expected:
                raise ValueError(f"shard {file} has {actual} bytes, the manifest says {expected} "
                                 f"({shard['tokens']} tokens of {dtype.name})")
            self._maps.append(np.memmap(file, dtype=dtype, mode="r"))
        self._ends = np.cumsum([m.size for m in self._maps])
        if self.numel() != manifest["tokens"]:
            raise ValueError(f"{manifest_path}: shards hold {self.numel()} tokens, the manifest says "
                             f"{manifest['tokens']}")

    def numel(self) -> int:
        return int(self._ends[-1]) if len(self._ends) else 0

    def __len__(self) -> int:
        return self.numel()

    def __getitem__(self, index: slice) -> torch.Tensor:
        if not isinstance(index, slice):
            raise TypeError(f"token shards are sliced (stream[a:b]), got index {index!r}")
        start, stop, step = index.indices(self.numel())
        if step != 1:
            raise ValueError(f"token shards are sliced with step 1, got step {step}")
        pieces = []
        position = start
        while position < stop:
            shard = int(np.searchsorted(self._ends, position, side="right"))
            offset = position - (int(self._ends[shard - 1]) if shard else 0)
            take = min(stop, int(self._ends[shard])) - position
            pieces.append(self._maps[shard][offset : offset + take])
            position += take
        import torch

        ids = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)
        return torch.from_numpy(ids.astype(np.int64))

    def tensor(self) -> torch.Tensor:
        """The whole stream in memory (``torch.long``)."""
        return self[:]

    def verify(self) -> None:
        """ValueError naming the first shard whose sha256 differs from the manifest's."""
        for shard in self.manifest["shards"]:
            digest = sha256_file(self.path / shard["file"])
            if digest != shard["sha256"]:
                raise ValueError(f"shard {self.path / shard['file']}: sha256 {digest}, the manifest says "
                                 f"{shard['sha256']}")


def load_tokens(tokenizer: Any, path: str | os.PathLike[str], *, in_memory: bool = False) -> torch.Tensor | TokenShards:
    """A split's token stream: a shard folder as :class:`TokenShards` (ValueError unless ``tokenizer`` made it; its
    :meth:`TokenShards.tensor` with ``in_memory``), a JSONL split as :func:`common.data.token_stream` in memory.
    ValueError naming a missing path."""
    path = Path(path)
    if path.is_dir():
        shards = TokenShards(path)
        fingerprint = tokenizer_fingerprint(tokenizer)
        if shards.manifest["tokenizer_sha256"] != fingerprint:
            raise ValueError(f"token shards {str(path)!r} were made by tokenizer {shards.manifest['tokenizer_sha256']}"
                             f", not by this run's {fingerprint}: reshard the split with the model's tokenizer")
        return shards.tensor() if in_memory else shards
    if not path.is_file():
        raise ValueError(f"no split file or token shards at {str(path)!r}")
    return token_stream(tokenizer, read_jsonl(path))
