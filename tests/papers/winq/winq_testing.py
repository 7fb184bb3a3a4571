"""The tiny WinQ training config (helpers of the tests here); the tiny corpus and ``smoke`` base model are
``paper_testing.build_tiny_setup``."""

from common.train import TrainConfig

SEQ_LEN = 16
EVAL_SEQUENCES = 2
MICRO_BATCH = 2


def train_config(**changes) -> TrainConfig:
    """6 steps of 2 x 16 tokens, validation every 2 steps (after steps 1, 3, 5), a checkpoint after step 2."""
    return TrainConfig(**{"max_steps": 6, "seq_len": SEQ_LEN, "micro_batch_size": MICRO_BATCH, "lr": 1e-3,
                          "warmup_steps": 1, "weight_decay": 0.0, "eval_every": 2, "eval_sequences": EVAL_SEQUENCES,
                          "checkpoint_every": 3, "progress": False, **changes})
