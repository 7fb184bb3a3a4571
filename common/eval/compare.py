"""Comparing evaluated models: the relative drop of a metric, the standard error of an accuracy, and the perplexity
gaps of a model study's cells to its unquantized reference."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def relative_drop(value: float, reference: float, higher_is_better: bool) -> float | None:
    """How much worse ``value`` is than ``reference``, relative, positive = worse: ``(reference - value) / reference``
    for a metric where higher is better (accuracy), ``(value - reference) / reference`` otherwise (perplexity); None
    (undefined) when ``reference`` is 0, e.g. an accuracy of 0 on a tiny model."""
    if reference == 0:
        return None
    return (reference - value) / reference if higher_is_better else (value - reference) / reference


def accuracy_standard_error(accuracy: float, examples: int) -> float:
    """Binomial standard error ``sqrt(p (1 - p) / n)`` of an accuracy ``p`` on ``n`` examples. A difference of two
    accuracies on the same examples has standard error at most ``sqrt(se_1^2 + se_2^2)`` (independent errors;
    paired errors make it smaller)."""
    return math.sqrt(accuracy * (1.0 - accuracy) / examples)


def metric_entry(metric: str, group: Mapping[str, Any], field: str, accuracy: bool) -> dict[str, Any]:
    """``{metric: group[field]}`` from one metric group of an evaluation record (e.g. ``record["metrics"]["cloze"]``,
    field ``"acc"``); for an accuracy also ``<metric>_n`` (the group's ``examples``) and ``<metric>_se``
    (:func:`accuracy_standard_error`)."""
    entry: dict[str, Any] = {metric: float(group[field])}
    if accuracy:
        entry[f"{metric}_n"] = int(group["examples"])
        entry[f"{metric}_se"] = accuracy_standard_error(entry[metric], entry[f"{metric}_n"])
    return entry


def perplexity_gaps(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]],
                    fields: Sequence[str]) -> dict[str, Any]:
    """A model study's summary: the reference perplexity and, per cell record, ``fields`` copied from it, its
    perplexity and ``gap = ppl(cell) - ppl(unquantized)``; ``wall_time_s`` sums every record's."""
    base = unquantized["metrics"]["perplexity"]["perplexity"]
    cells = list(cells)
    rows = [{**{f: c[f] for f in fields}, "perplexity": c["metrics"]["perplexity"]["perplexity"],
             "gap": c["metrics"]["perplexity"]["perplexity"] - base} for c in cells]
    return {"model": model, "perplexity": base, "tokens": unquantized["data"]["split"]["tokens"], "rows": rows,
            "wall_time_s": float(unquantized["wall_time_s"] + sum(c["wall_time_s"] for c in cells))}
