"""Next-token log-probabilities of token sequences under a causal LM, batched; the one model call of the package.

For a sequence s of length L >= 2 the model reads s[:-1] and, at every position t = 1..L-1, returns
log p(s[t] | s[:t]) = log_softmax(logits[t-1])[s[t]] (logits cast to float32 before the softmax, values
returned as float64) and whether s[t] is the greedy argmax of logits[t-1].

Sequences are batched longest first and right-padded. No attention mask is passed: with causal attention a
position never attends to later positions, so the padding after a sequence cannot change its log-probs (the
same argument lm-eval-harness uses for its right-padded loglikelihood batches).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch

from common.progress import progress

# Config fields that hold a causal LM's context length, in the order lm-eval-harness consults them.
_MAX_LENGTH_FIELDS = ("n_positions", "max_position_embeddings", "n_ctx")


@contextlib.contextmanager
def inference(model: torch.nn.Module) -> Iterator[None]:
    """Run the block with ``model`` in eval mode and without autograd; its train/eval mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def config_max_length(model: torch.nn.Module) -> int | None:
    """The context length in ``model.config`` (n_positions, max_position_embeddings or n_ctx), None if absent."""
    config = getattr(model, "config", None)
    for field in _MAX_LENGTH_FIELDS:
        value = getattr(config, field, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a parameterless module)."""
    param = next(model.parameters(), None)
    return torch.device("cpu") if param is None else param.device


def next_token_logprobs(
    model: torch.nn.Module, sequences: Sequence[Sequence[int]], batch_size: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per sequence s: (log p(s[t] | s[:t]) for t = 1..len(s)-1 as float64, greedy-match bool), both CPU, length
    len(s) - 1, in input order. The caller holds ``inference(model)``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for i, seq in enumerate(sequences):
        if len(seq) < 2:
            raise ValueError(f"sequence {i} has {len(seq)} tokens; scoring needs at least 2")
    device = model_device(model)
    order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
    out: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    batches = range(0, len(order), batch_size)
    for start in progress(batches, "scoring", total=len(batches), unit="batch"):
        chunk = order[start : start + batch_size]
        width = len(sequences[chunk[0]])
        padded = torch.zeros(len(chunk), width, dtype=torch.long)
        for row, i in enumerate(chunk):
            padded[row, : len(sequences[i])] = torch.as_tensor(sequences[i], dtype=torch.long)
        padded = padded.to(device)
        logits = model(input_ids=padded[:, :-1], use_cache=False).logits.float()
        targets = padded[:, 1:]
        logprobs = logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        greedy = logits.argmax(-1) == targets
        for row, i in enumerate(chunk):
            n = len(sequences[i]) - 1
            out[i] = (logprobs[row, :n].double().cpu(), greedy[row, :n].cpu())
    return [out[i] for i in range(len(sequences))]
