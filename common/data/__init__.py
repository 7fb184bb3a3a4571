"""Corpora from the package registries (pinned, checksummed), cleaning, document splits, BPE tokenizer, token
shards (a split tokenized once, memory-mapped)."""

from .documents import (
    SPLITS,
    Document,
    clean_documents,
    clean_text,
    hashed_split,
    iter_jsonl,
    read_jsonl,
    split_documents,
    write_hashed_splits,
    write_splits,
)
from .shards import TokenShards, load_tokens, shard_split, write_token_shards
from .sources import CORPORA, CorpusSource, fetch_archive, get_corpus, verify_archive
from .tokenizer import (
    EOS,
    load_tokenizer,
    save_tokenizer,
    stream_ids,
    token_stream,
    tokenizer_fingerprint,
    train_tokenizer,
)

__all__ = [
    "CORPORA",
    "EOS",
    "SPLITS",
    "CorpusSource",
    "Document",
    "TokenShards",
    "clean_documents",
    "clean_text",
    "fetch_archive",
    "get_corpus",
    "hashed_split",
    "iter_jsonl",
    "load_tokenizer",
    "load_tokens",
    "read_jsonl",
    "save_tokenizer",
    "shard_split",
    "split_documents",
    "stream_ids",
    "token_stream",
    "tokenizer_fingerprint",
    "train_tokenizer",
    "verify_archive",
    "write_hashed_splits",
    "write_splits",
    "write_token_shards",
]
