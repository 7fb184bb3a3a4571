"""A corpus split and its evaluation token stream.

A split is JSONL, one ``{"id": str, "text": str}`` document a line. Its evaluation stream is each document's
tokens (no special tokens added) followed by ``eos_token_id``, concatenated in file order.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch


def read_split(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Read a corpus split: JSONL, one ``{"id": str, "text": str}`` object a line, ids unique."""
    docs = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({err.msg})") from None
            if not (isinstance(doc, dict) and isinstance(doc.get("id"), str) and isinstance(doc.get("text"), str)):
                raise ValueError(f'{path}:{line_no}: expected {{"id": str, "text": str}}, got {line.strip()[:80]!r}')
            if doc["id"] in seen:
                raise ValueError(f"{path}:{line_no}: duplicate document id {doc['id']!r}")
            seen.add(doc["id"])
            docs.append({"id": doc["id"], "text": doc["text"]})
    if not docs:
        raise ValueError(f"{path}: no documents")
    return docs


def token_stream(tokenizer: Any, docs: list[dict[str, str]]) -> torch.LongTensor:
    """The evaluation stream of a split: each document's tokens (no special tokens added) then ``eos_token_id``,
    concatenated in document order."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no eos_token_id")
    encoded = tokenizer([doc["text"] for doc in docs], add_special_tokens=False)["input_ids"]
    return torch.tensor([tok for ids in encoded for tok in (*ids, eos)], dtype=torch.long)
