"""Helpers of the paper tests (importable: ``tests/papers`` is on the path through its ``conftest.py``)."""

from pathlib import Path

import torch

from common.data.documents import Document
from common.data.tokenizer import train_tokenizer
from common.io import write_jsonl
from common.models import build_model, save_checkpoint

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "seven", "bold", "geese"]


def build_tiny_setup(root: Path) -> Path:
    """``root/base`` (a ``smoke`` checkpoint with a 300-token BPE), ``root/train.jsonl`` (16 documents) and
    ``root/valid.jsonl`` (4 documents) of seeded random words; returns ``root``."""
    g = torch.Generator().manual_seed(0)
    docs = [Document(str(i), " ".join(WORDS[int(j)] for j in torch.randint(0, len(WORDS), (80,), generator=g)))
            for i in range(20)]
    tokenizer = train_tokenizer((d.text for d in docs), 300)
    save_checkpoint(build_model("smoke", tokenizer, seed=0), tokenizer, root / "base", {"init": "smoke"})
    write_jsonl(root / "train.jsonl", [{"id": d.id, "text": d.text} for d in docs[:16]])
    write_jsonl(root / "valid.jsonl", [{"id": d.id, "text": d.text} for d in docs[16:]])
    return root


class KilledError(Exception):
    """A run killed mid-way (what a SIGKILL leaves: the last checkpoint)."""


def killed_train(train, at_step):
    """``train`` (the QAT skeleton's training loop) killed with :class:`KilledError` right after the optimizer step
    ``at_step``: patch ``common.qat.run.train`` with it to leave a run as a kill would."""
    def killed(model, *args, **kwargs):
        hooks = kwargs["hooks"]
        step_hook = hooks.after_optimizer_step

        def after_optimizer_step(model_, step):
            step_hook(model_, step)
            if step == at_step:
                raise KilledError

        hooks.after_optimizer_step = after_optimizer_step
        return train(model, *args, **kwargs)

    return killed
