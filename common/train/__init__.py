"""The shared training loop (pretraining, continual pretraining, QAT through hooks)."""

from .loop import (
    Hooks,
    SequenceSampler,
    TrainConfig,
    causal_lm_loss,
    evaluate_loss,
    is_main_process,
    learning_rate,
    train,
)

__all__ = ["Hooks", "SequenceSampler", "TrainConfig", "causal_lm_loss", "evaluate_loss", "is_main_process",
           "learning_rate", "train"]
