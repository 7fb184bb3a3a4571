"""Tiny fixtures shared by the evaluation tests: a synthetic corpus, a byte-level BPE tokenizer trained on it, and
a 2-layer Llama (seeded), in memory and saved as HF folders."""

import random

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from common.data.documents import Document, write_jsonl

WORDS = [
    "the", "a", "river", "stone", "green", "light", "quiet", "house", "old", "road", "cold", "winter", "morning",
    "garden", "small", "bird", "water", "bright", "over", "under", "near", "far", "window", "door", "red", "blue",
    "slow", "fast", "tree", "sun", "moon", "field", "dog", "cat", "runs", "sees", "holds", "finds", "makes", "walks",
    "sings", "opens", "closes", "reads", "writes",
]
EOS = "<|endoftext|>"


def make_docs(n_docs=12, n_sentences=12, seed=0):
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        sentences = []
        for _ in range(n_sentences):
            words = [rng.choice(WORDS) for _ in range(rng.randint(6, 12))]
            sentences.append(" ".join(words).capitalize() + rng.choice(".....!?"))
        docs.append(Document(f"doc-{d:02d}", " ".join(sentences)))
    return docs


@pytest.fixture(scope="session")
def docs():
    return make_docs()


@pytest.fixture(scope="session")
def tokenizer(docs):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([doc.text for doc in docs], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS)


@pytest.fixture(scope="session")
def model(tokenizer):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def saved(tmp_path_factory, docs, tokenizer, model):
    """{"model", "tokenizer", "split"} paths of the saved checkpoint, tokenizer folder and split JSONL."""
    root = tmp_path_factory.mktemp("saved")
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "tokenizer")
    split = root / "valid.jsonl"
    write_jsonl(split, docs)
    return {"model": root / "model", "tokenizer": root / "tokenizer", "split": split}
