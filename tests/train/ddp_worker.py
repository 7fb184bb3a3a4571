"""Run under torchrun by test_loop.py: train the tiny setup with DDP and save the final weights."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_setup

from common.train import TrainConfig, train

if __name__ == "__main__":
    out = Path(sys.argv[1])
    _, tokens, model = tiny_setup()
    config = TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, grad_accum=2, lr=3e-3, warmup_steps=2,
                         progress=False)
    train(model, tokens, config, out / "run")
    if torch.distributed.get_rank() == 0:
        torch.save(model.state_dict(), out / "weights.pt")
