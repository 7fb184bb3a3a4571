"""The per-unit scores of an evaluation record (:mod:`.record`): the units a bootstrap resamples
(:mod:`common.uncertainty`), and whether they make the metrics the record reports.

* perplexity (:func:`.perplexity.perplexity`): ``metrics.perplexity.window_nll`` (the NLL sum of each window)
  and ``window_tokens`` (its scored tokens); the recorded ``perplexity`` is ``exp(sum_j nll_j / sum_j tokens_j)``
  and ``tokens`` is ``sum_j tokens_j``;
* a zero-shot task (:func:`.zeroshot.score_cloze`, :func:`.zeroshot.score_choice`): the 0/1 correctness of each
  example, ``example_correct`` (``example_correct_norm`` for the length-normalized choice), adding up to
  ``correct`` (``correct_norm``); the accuracy ``acc`` (``acc_norm``) is their mean (:data:`ACCURACY`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from common.uncertainty import perplexity_columns

SCORE_TOLERANCE = 1e-9  # relative: a metric recomputed from its per-unit scores (float sums in another order)


class AccuracyFields(NamedTuple):
    """Where an accuracy lives in a zero-shot metric group: the ``metric``, its per-example correctness and its
    correct count."""

    metric: str
    per_example: str
    total: str


ACCURACY = {"acc": AccuracyFields("acc", "example_correct", "correct"),
            "acc_norm": AccuracyFields("acc_norm", "example_correct_norm", "correct_norm")}
# the accuracy a report claims per zero-shot task: plain for cloze (one continuation), length-normalized for the
# multiple choice (lm-eval's acc_norm, the papers' convention for HellaSwag-style tasks)
TASK_ACCURACY: dict[str, AccuracyFields] = {"cloze": ACCURACY["acc"], "choice": ACCURACY["acc_norm"]}


def _window_scores(name: str, record: Mapping[str, Any]) -> Mapping[str, Any]:
    """The perplexity group of ``record`` (ValueError naming ``name`` when it has no per-window scores)."""
    scores = record["metrics"]["perplexity"]
    if "window_nll" not in scores or "window_tokens" not in scores:
        raise ValueError(f"the evaluation of {name!r} has no per-window scores (window_nll, window_tokens): rerun it")
    return scores


def window_columns(name: str, record: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The bootstrap columns ``<name>.nll`` and ``<name>.tokens`` of the record's evaluation windows
    (:func:`common.uncertainty.perplexity_columns`)."""
    scores = _window_scores(name, record)
    return perplexity_columns(name, scores["window_nll"], scores["window_tokens"])


def example_correct(name: str, record: Mapping[str, Any], task: str, fields: AccuracyFields) -> np.ndarray:
    """The 0/1 correctness (float64) of each example of ``task`` for ``fields``'s accuracy (ValueError naming
    ``name`` when the record has no such scores)."""
    group = record["metrics"].get(task, {})
    if fields.per_example not in group:
        raise ValueError(f"the evaluation of {name!r} has no {task} {fields.per_example} (metric groups: "
                         f"{', '.join(sorted(record['metrics']))})")
    return np.asarray(group[fields.per_example], dtype=np.float64)


def score_mismatches(name: str, record: Mapping[str, Any], tasks: Mapping[str, AccuracyFields],
                     rel_tol: float = SCORE_TOLERANCE) -> list[str]:
    """Where the per-unit scores of ``record`` (named ``name``) do not make its metrics: ``exp(sum nll / sum
    tokens)`` against the recorded perplexity (relative tolerance ``rel_tol``) and the window tokens against the
    recorded ``tokens``; per-example correctness against the correct count of each of ``tasks`` (task -> its
    accuracy's fields) that the record has. Empty when everything agrees."""
    scores = _window_scores(name, record)
    tokens = sum(scores["window_tokens"])
    value = math.exp(math.fsum(scores["window_nll"]) / tokens) if tokens else math.nan
    wrong = []
    if tokens != scores["tokens"] or not math.isclose(value, scores["perplexity"], rel_tol=rel_tol):
        wrong.append(f"{name}: perplexity {scores['perplexity']:.10g} vs {value:.10g} from {tokens} window tokens "
                     f"(recorded {scores['tokens']})")
    for task, fields in tasks.items():
        group = record["metrics"].get(task)
        if group is not None and sum(group[fields.per_example]) != group[fields.total]:
            wrong.append(f"{name}: {task} {fields.total} {group[fields.total]} vs {sum(group[fields.per_example])} "
                         f"from {fields.per_example}")
    return wrong
