"""A tiny WinQ setup (helpers of the tests here): a 300-token BPE, the ``smoke`` architecture (4 blocks of width 64),
a 16-document training split and a 4-document validation split of random words, and a 6-step training config."""

from pathlib import Path

import torch

from common.data.documents import Document
from common.data.tokenizer import train_tokenizer
from common.io import write_jsonl
from common.models import build_model, save_checkpoint
from common.train import TrainConfig

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "seven", "bold", "geese"]
SEQ_LEN = 16
EVAL_SEQUENCES = 2
MICRO_BATCH = 2


def build_setup(root: Path) -> Path:
    """``root/base`` (checkpoint), ``root/train.jsonl``, ``root/valid.jsonl``; returns ``root``."""
    g = torch.Generator().manual_seed(0)
    docs = [Document(str(i), " ".join(WORDS[int(j)] for j in torch.randint(0, len(WORDS), (80,), generator=g)))
            for i in range(20)]
    tokenizer = train_tokenizer((d.text for d in docs), 300)
    save_checkpoint(build_model("smoke", tokenizer, seed=0), tokenizer, root / "base", {"init": "smoke"})
    write_jsonl(root / "train.jsonl", [{"id": d.id, "text": d.text} for d in docs[:16]])
    write_jsonl(root / "valid.jsonl", [{"id": d.id, "text": d.text} for d in docs[16:]])
    return root


def train_config(**changes) -> TrainConfig:
    """6 steps of 2 x 16 tokens, validation every 2 steps (after steps 1, 3, 5), a checkpoint after step 2."""
    return TrainConfig(**{"max_steps": 6, "seq_len": SEQ_LEN, "micro_batch_size": MICRO_BATCH, "lr": 1e-3,
                          "warmup_steps": 1, "weight_decay": 0.0, "eval_every": 2, "eval_sequences": EVAL_SEQUENCES,
                          "checkpoint_every": 3, "progress": False, **changes})
