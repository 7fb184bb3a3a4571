"""The shared training loop (pretraining, continual pretraining, QAT through hooks)."""

from common.lazy import lazy_exports

from .config import TrainConfig, learning_rate

# a run's settings and schedule above; the loop (torch) on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    "loop": ("Hooks", "SequenceSampler", "causal_lm_loss", "evaluate_loss", "is_main_process", "train"),
})

__all__ = ["TrainConfig", "learning_rate", *_LAZY]
