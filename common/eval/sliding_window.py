"""Strided sliding-window perplexity of a token stream (the HF "perplexity of fixed-length models" recipe).

Windows of ``window`` tokens start at 0, stride, 2*stride, ... until a window reaches the end of the stream
(the last window may be shorter). Window k = [b_k, e_k) scores the tokens t with max(e_{k-1}, b_k + 1) <= t < e_k,
each conditioned on the tokens [b_k, t) of its own window: every token is scored at most once, by the first
window that contains it with at least one token of context, and token 0 never is. With stride < window every
token 1..N-1 is scored once; with stride == window the first token of each window is not scored (it has no
context inside its window), exactly as in the HF guide, and ``tokens`` counts only what was scored.

    mean_nll = -(1/T) sum_{scored t} log p(x_t | x_{b(t)}, ..., x_{t-1}),   perplexity = exp(mean_nll)

accumulated in float64.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from .logprobs import config_max_length, inference, next_token_logprobs


def window_spans(n_tokens: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first scored token) of every window, as in the module docstring."""
    spans = []
    prev_end = 0
    for begin in range(0, n_tokens, stride):
        end = min(begin + window, n_tokens)
        spans.append((begin, end, max(prev_end, begin + 1)))
        prev_end = end
        if end == n_tokens:
            break
    return spans


def perplexity(
    model: torch.nn.Module, token_ids: torch.Tensor, *, window: int, stride: int, batch_size: int = 1
) -> dict[str, Any]:
    """Strided sliding-window perplexity of ``token_ids`` (1-D integer tensor); see the module docstring.

    Returns nll_sum, tokens (scored), mean_nll = nll_sum / tokens, perplexity = exp(mean_nll), window, stride,
    windows, window_nll and window_tokens (each window's NLL sum and scored tokens, the units of a paired
    bootstrap: :func:`common.uncertainty.paired_bootstrap`) and wall_time_s. ``window`` may not exceed the
    context length in ``model.config``.
    """
    if window < 2:
        raise ValueError(f"window must be >= 2, got {window}")
    if not 1 <= stride <= window:
        raise ValueError(f"stride must be in [1, window={window}], got {stride}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    max_length = config_max_length(model)
    if max_length is not None and window > max_length:
        raise ValueError(f"window={window} exceeds the model's context length {max_length}")
    if token_ids.dim() != 1 or token_ids.dtype.is_floating_point or token_ids.dtype.is_complex:
        shape = tuple(token_ids.shape)
        raise ValueError(f"token_ids must be a 1-D integer tensor, got {token_ids.dtype} of shape {shape}")
    n_tokens = token_ids.numel()
    if n_tokens < window:
        raise ValueError(f"token stream of {n_tokens} tokens is shorter than window={window}")

    start = time.perf_counter()
    tokens = token_ids.tolist()
    spans = window_spans(n_tokens, window, stride)
    with inference(model):
        scored = next_token_logprobs(model, [tokens[b:e] for b, e, _ in spans], batch_size)
    window_nll, window_tokens = [], []
    for (begin, _, first), (logprobs, _) in zip(spans, scored, strict=True):
        # logprobs[i] = log p(tokens[begin + 1 + i] | tokens[begin : begin + 1 + i])
        targets = logprobs[first - begin - 1 :]
        window_nll.append(-float(targets.double().sum()))
        window_tokens.append(targets.numel())
    nll_sum = math.fsum(window_nll)
    count = sum(window_tokens)
    mean_nll = nll_sum / count
    return {
        "nll_sum": nll_sum,
        "tokens": count,
        "mean_nll": mean_nll,
        "perplexity": math.exp(mean_nll),
        "window": window,
        "stride": stride,
        "windows": len(spans),
        "window_nll": window_nll,
        "window_tokens": window_tokens,
        "wall_time_s": time.perf_counter() - start,
    }

