"""Zero-shot scoring of cloze and multiple-choice tasks, request for request as lm-eval-harness 0.4 scores them.

Tokenization (lm-eval's ``_encode_pair`` for causal models): trailing whitespace of the context is moved to the
front of the continuation, then

    ctx = tok(context),   cont = tok(context + continuation)[len(ctx):]

with ``add_special_tokens=False`` (the project's tokenizers add none; the evaluation stream has no BOS either).
So the continuation tokens are the tail of the whole text's tokenization (a merge across the boundary goes to
the continuation). The model reads (ctx + cont)[-(max_length + 1):][:-1]: contexts are truncated
from the left to the model's context length, the continuation is never truncated.

Per request: ll = sum_{t in cont} log p(x_t | x_<t), is_greedy = every continuation token is the argmax.

Cloze (LAMBADA): acc = mean(is_greedy); perplexity = exp(-mean over examples of ll) (lm-eval's aggregation);
token_perplexity = exp(-sum ll / number of target tokens).

Choice (HellaSwag): continuation_i = " " + choices[i]; acc = mean[argmax_i ll_i == gold];
acc_norm = mean[argmax_i ll_i / len(choices[i]) == gold] with len in characters (lm-eval's acc_norm);
acc_bytes: the same with len in UTF-8 bytes (lm-eval's acc_bytes). Ties go to the first maximum (numpy argmax).
chance = mean over examples of 1 / number of choices. Both report ``truncated_contexts``: how many requests
had their context cut on the left.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .logprobs import config_max_length, inference, next_token_logprobs

TARGET_DELIMITER = " "


def encode_pair(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context tokens, continuation tokens) as lm-eval's causal ``_encode_pair`` (see the module docstring)."""
    if not context:
        raise ValueError(f"empty context for continuation {continuation[:40]!r}")
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"]
    whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx) :]
    if not cont:
        raise ValueError(f"continuation {continuation!r} after context ending {context[-40:]!r} has no tokens")
    return ctx, cont


def loglikelihoods(
    model: torch.nn.Module,
    tokenizer: Any,
    requests: Sequence[tuple[str, str]],
    batch_size: int = 1,
    max_length: int | None = None,
) -> tuple[list[tuple[float, bool, int]], int]:
    """(ll, is_greedy, continuation tokens) per (context, continuation) request, and how many contexts were
    left-truncated. ``max_length`` defaults to the context length in ``model.config``."""
    if max_length is None:
        max_length = config_max_length(model)
        if max_length is None:
            raise ValueError(f"{type(model).__name__} has no context length in its config; pass max_length")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    sequences, cont_lens = [], []
    truncated = 0
    for context, continuation in requests:
        ctx, cont = encode_pair(tokenizer, context, continuation)
        if len(cont) > max_length:
            raise ValueError(f"continuation {continuation[:40]!r} has {len(cont)} tokens > max_length={max_length}")
        truncated += len(ctx) + len(cont) > max_length + 1
        sequences.append((ctx + cont)[-(max_length + 1) :])
        cont_lens.append(len(cont))
    with inference(model):
        scored = next_token_logprobs(model, sequences, batch_size)
    results = [
        (float(logprobs[-n:].sum()), bool(greedy[-n:].all()), n)
        for (logprobs, greedy), n in zip(scored, cont_lens, strict=True)
    ]
    return results, truncated


def _check_cloze(i: int, ex: Any) -> None:
    if not (isinstance(ex, dict) and isinstance(ex.get("context"), str) and isinstance(ex.get("target"), str)):
        raise ValueError(f"cloze example {i} needs string 'context' and 'target': {str(ex)[:80]!r}")
    if not ex["target"].strip():
        raise ValueError(f"cloze example {ex.get('id', i)!r} has an empty target {ex['target']!r}")


def _check_choice(i: int, ex: Any) -> None:
    if not (isinstance(ex, dict) and isinstance(ex.get("context"), str) and isinstance(ex.get("choices"), list)):
        raise ValueError(f"choice example {i} needs a string 'context' and a list 'choices': {str(ex)[:80]!r}")
    name = ex.get("id", i)
    if len(ex["choices"]) < 2 or not all(isinstance(c, str) and c for c in ex["choices"]):
        raise ValueError(f"choice example {name!r} needs >= 2 non-empty string choices, got {ex['choices']!r}")
    gold = ex.get("gold")
    if not (isinstance(gold, int) and not isinstance(gold, bool) and 0 <= gold < len(ex["choices"])):
        raise ValueError(f"choice example {name!r}: gold={gold!r} is not an index into {len(ex['choices'])} choices")


def _check_all(examples: Sequence[dict[str, Any]], check: Any, kind: str) -> None:
    """At least one example, every one well-formed (``check`` raises ValueError naming the bad one)."""
    if not examples:
        raise ValueError(f"no {kind} examples to score")
    for i, ex in enumerate(examples):
        check(i, ex)


def score_cloze(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: Sequence[dict[str, Any]],
    batch_size: int = 1,
    max_length: int | None = None,
) -> dict[str, Any]:
    """LAMBADA-style scoring of {"context", "target"} examples (see the module docstring for the formulas)."""
    _check_all(examples, _check_cloze, "cloze")
    start = time.perf_counter()
    results, truncated = loglikelihoods(
        model, tokenizer, [(ex["context"], ex["target"]) for ex in examples], batch_size, max_length
    )
    n = len(results)
    ll_sum = math.fsum(ll for ll, _, _ in results)
    target_tokens = sum(k for _, _, k in results)
    per_example = [int(bool(greedy)) for _, greedy, _ in results]
    correct = sum(per_example)
    return {
        "examples": n,
        "correct": correct,
        "acc": correct / n,
        "example_correct": per_example,
        "loglikelihood_sum": ll_sum,
        "target_tokens": target_tokens,
        "perplexity": math.exp(-ll_sum / n),
        "token_perplexity": math.exp(-ll_sum / target_tokens),
        "truncated_contexts": truncated,
        "wall_time_s": time.perf_counter() - start,
    }


def _argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))


def score_choice(
    model: torch.nn.Module,
    tokenizer: Any,
    examples: Sequence[dict[str, Any]],
    batch_size: int = 1,
    max_length: int | None = None,
) -> dict[str, Any]:
    """HellaSwag-style scoring of {"context", "choices", "gold"} examples (formulas in the module docstring)."""
    _check_all(examples, _check_choice, "choice")
    start = time.perf_counter()
    requests = [(ex["context"], TARGET_DELIMITER + choice) for ex in examples for choice in ex["choices"]]
    results, truncated = loglikelihoods(model, tokenizer, requests, batch_size, max_length)
    per_example, per_example_norm = [], []
    correct_bytes = 0
    offset = 0
    for ex in examples:
        choices = ex["choices"]
        lls = [ll for ll, _, _ in results[offset : offset + len(choices)]]
        offset += len(choices)
        per_example.append(int(_argmax(lls) == ex["gold"]))
        per_example_norm.append(int(_argmax([ll / len(c) for ll, c in zip(lls, choices, strict=True)]) == ex["gold"]))
        correct_bytes += _argmax([ll / len(c.encode()) for ll, c in zip(lls, choices, strict=True)]) == ex["gold"]
    n = len(examples)
    correct, correct_norm = sum(per_example), sum(per_example_norm)
    return {
        "examples": n,
        "requests": len(requests),
        "correct": correct,
        "acc": correct / n,
        "correct_norm": correct_norm,
        "acc_norm": correct_norm / n,
        "example_correct": per_example,
        "example_correct_norm": per_example_norm,
        "correct_bytes": correct_bytes,
        "acc_bytes": correct_bytes / n,
        "chance": math.fsum(1 / len(ex["choices"]) for ex in examples) / n,
        "truncated_contexts": truncated,
        "wall_time_s": time.perf_counter() - start,
    }


# the scorer of each zero-shot task kind (the files of :mod:`.tasks`), one metric group each
TASK_SCORERS: dict[str, Callable[..., dict[str, Any]]] = {"cloze": score_cloze, "choice": score_choice}
