"""The byte-level BPE tokenizer: exact round trip, deterministic training, HF save/load, EOS placement."""

import pytest
import torch

from common.data.documents import Document
from common.data.tokenizer import EOS, load_tokenizer, save_tokenizer, token_stream, train_tokenizer

TEXTS = ["Fellow-Citizens of the Senate and House of Representatives: " * 20,
         "Call me Ishmael. Some years ago - never mind how long precisely. " * 20,
         "To be, or not to be, that is the question: " * 20]


def test_round_trip_is_exact_even_for_unseen_characters(tmp_path):
    tokenizer = train_tokenizer(TEXTS, vocab_size=400)
    sample = "Naïve café — 東京 \t tabs\nand  double  spaces ✓"
    ids = tokenizer(sample, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == sample
    save_tokenizer(tokenizer, tmp_path / "tok")
    loaded = load_tokenizer(tmp_path / "tok")
    assert loaded(sample, add_special_tokens=False)["input_ids"] == ids
    assert loaded.eos_token == EOS
    assert len(loaded) == len(tokenizer)


def test_training_is_deterministic():
    assert train_tokenizer(TEXTS, 400).get_vocab() == train_tokenizer(TEXTS, 400).get_vocab()
    with pytest.raises(ValueError, match=r"vocab_size must be at least 300 .*, got 100"):
        train_tokenizer(TEXTS, 100)


def test_token_stream_ends_each_document_with_eos():
    tokenizer = train_tokenizer(TEXTS, 400)
    docs = [Document("a", "one two"), Document("b", "three")]
    stream = token_stream(tokenizer, docs)
    first = tokenizer("one two", add_special_tokens=False)["input_ids"]
    second = tokenizer("three", add_special_tokens=False)["input_ids"]
    assert stream.dtype == torch.long and stream.dim() == 1
    assert stream.tolist() == [*first, tokenizer.eos_token_id, *second, tokenizer.eos_token_id]
    assert token_stream(tokenizer, []).tolist() == []


def test_token_stream_needs_an_eos_token():
    tokenizer = train_tokenizer(TEXTS, 400)
    tokenizer.eos_token = None
    with pytest.raises(ValueError, match="has no eos_token_id"):
        token_stream(tokenizer, [Document("a", "one")])
