"""Byte-level BPE tokenizer trained with ``tokenizers`` and saved in the standard HF format.

Byte-level: every string round-trips exactly (``decode(encode(s)) == s``). One special token,
``<|endoftext|>``, serves as end-of-document (EOS), beginning (BOS) and padding token. Training is on the
pretraining split only, sequentially (``TOKENIZERS_PARALLELISM=false`` while training), so that merges of
equal count break ties the same way and the tokenizer is byte-identical on every run.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from common.io import atomic_dir

from .documents import Document

# the files of a saved Hugging Face tokenizer (any of them may be absent): what a checkpoint copies along
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json")

if TYPE_CHECKING:
    import torch

EOS = "<|endoftext|>"


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2):
    """A ``PreTrainedTokenizerFast`` with a byte-level BPE of ``vocab_size`` entries trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 300:
        raise ValueError(f"vocab_size must be at least 300 (256 bytes + merges + special), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # sequential counting: equal-count merges tie-break the same
    try:
        tokenizer.train_from_iterator(texts, trainer)
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM")
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS, bos_token=EOS, pad_token=EOS,
                                   unk_token=None, clean_up_tokenization_spaces=False)


def save_tokenizer(tokenizer, out_dir: str | Path) -> None:
    with atomic_dir(out_dir) as tmp:
        tokenizer.save_pretrained(tmp)


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    if not Path(path, "tokenizer.json").is_file() and Path(path).exists():
        raise ValueError(f"no tokenizer.json in {str(path)!r}")
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def stream_ids(tokenizer, texts: Sequence[str]) -> list[int]:
    """Token ids of ``texts`` in order, each text's tokens (no special tokens added) followed by ``eos_token_id``:
    the one encoding of every token stream (:func:`token_stream` in memory, :mod:`common.data.shards` on disk)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} has no eos_token_id")
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
    return [tok for ids in encoded for tok in (*ids, eos)]


def token_stream(tokenizer, documents: Sequence[Document]) -> torch.LongTensor:
    """:func:`stream_ids` of ``documents``' texts: the training/evaluation stream, a 1-D ``torch.long`` tensor."""
    import torch

    return torch.tensor(stream_ids(tokenizer, [d.text for d in documents]), dtype=torch.long)


def tokenizer_fingerprint(tokenizer) -> str:
    """Hex sha256 of a fast tokenizer's serialized form (vocabulary, merges, normalizer, pre-tokenizer, special
    tokens): equal fingerprints encode every text alike. What a token shard records and checks."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"tokenizer {type(tokenizer).__name__} is not a fast tokenizer (no backend_tokenizer)")
    return hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest()
