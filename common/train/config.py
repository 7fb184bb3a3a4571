"""A training run's settings (:class:`TrainConfig`) and its learning-rate schedule, free of torch: what a step that
only plans or reports a run reads (the loop itself: :mod:`common.train.loop`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class TrainConfig:
    """Every knob of a run; ``max_steps`` optimizer steps of ``micro_batch_size * grad_accum * world`` sequences."""

    max_steps: int
    seq_len: int = 256
    micro_batch_size: int = 8
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 0
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    bf16: bool = False
    seed: int = 0
    eval_every: int = 0
    eval_sequences: int = 32
    checkpoint_every: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        for name in ("max_steps", "seq_len", "micro_batch_size", "grad_accum"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "eval_every", "checkpoint_every", "eval_sequences"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown training option {unknown[0]!r}; valid options: {', '.join(sorted(known))}")
        return cls(**values)


def learning_rate(step: int, config: TrainConfig) -> float:
    """lr for optimizer step ``step`` (0-based): ``lr (step+1)/warmup`` during warmup, then cosine from ``lr`` to
    ``min_lr_ratio * lr`` at the last step."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    decay_steps = max(1, config.max_steps - config.warmup_steps - 1)
    progress = min(1.0, (step - config.warmup_steps) / decay_steps)
    floor = config.min_lr_ratio * config.lr
    return floor + 0.5 * (config.lr - floor) * (1 + math.cos(math.pi * progress))
