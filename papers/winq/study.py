"""The study's summary, read from the artifacts of every run: convergence curves, speedups, final quality at equal
budget, the Hessian spectra.

Per run (``settings.run_names``: ``<setting>-<method>``), against the setting's ``baseline`` (ParetoQ QAT, same step
budget, learning-rate schedule and data order):

* the validation-perplexity curve (``eval_log.csv`` of :func:`common.train.train`: the quantized model, eval mode,
  every ``eval_every`` steps and at the last step), indexed by steps taken (``step + 1``);
* **steps to the baseline's quality**: the first curve point whose perplexity is at or below the baseline's final
  validation perplexity ``P_b`` (None when the run never gets there); the resolution is the evaluation interval;
* **speedup** ``= steps_b / steps``, where ``steps_b`` is the baseline's own first step at or below ``P_b`` (its
  last step unless its curve dipped below ``P_b`` earlier): how much sooner the run reaches the baseline's final
  quality (the paper's 1.5x to 4x); None when it never does;
* **final quality at equal budget** of the checkpoint-quantized model (packed codes and learned scales,
  ``common.ptq``): perplexity on the held-out test split of the pretraining corpus, cloze ``acc`` and 4-way choice
  ``acc_norm`` (with binomial standard errors), and the **improvement** ``(P_b - P) / P_b`` of the test perplexity
  (positive = better than the baseline; the paper's "up to 8.8%");
* the bits per weight the checkpoint stores (codes and scales of the quantized layers).

Hessian cells (``hessian/<run>.json``, :mod:`papers.winq.hessian`): the near-zero, negative and positive spectral
mass and the largest |eigenvalue| per run, with the density for the figures.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from typing import Any

from common.eval.compare import metric_entry

from .settings import run_names, run_settings

# (metric, metric group in the evaluation record, field, higher is better, label)
METRICS: tuple[tuple[str, str, str, bool, str], ...] = (
    ("perplexity", "perplexity", "perplexity", False, "test ppl"),
    ("cloze_acc", "cloze", "acc", True, "cloze acc"),
    ("choice_acc_norm", "choice", "acc_norm", True, "choice acc_norm"),
)
ACCURACIES = ("cloze_acc", "choice_acc_norm")
HESSIAN_FIELDS = ("near_zero_mass", "negative_mass", "positive_mass", "largest_abs_eigenvalue")


def read_curve(path: str | os.PathLike[str]) -> list[tuple[int, float]]:
    """``[(steps taken, validation perplexity), ...]`` of an ``eval_log.csv`` (``step`` is 0-based: a row at step
    ``s`` was evaluated after ``s + 1`` optimizer steps), in step order; ValueError naming a log without rows."""
    with open(path, newline="") as handle:
        curve = sorted((int(row["step"]) + 1, float(row["val_perplexity"])) for row in csv.DictReader(handle))
    if not curve:
        raise ValueError(f"evaluation log {str(path)!r} has no row")
    return curve


def steps_to_reach(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """The first step count of ``curve`` whose perplexity is ``<= target``; None when no point gets there."""
    return next((steps for steps, value in curve if value <= target), None)


def improvement(perplexity: float, baseline: float) -> float:
    """``(baseline - perplexity) / baseline``: the relative perplexity gain over the baseline (positive = better;
    exactly 0.0 for equal values)."""
    return (baseline - perplexity) / baseline


def evaluated_metrics(record: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`METRICS` of one evaluation record, with each accuracy's example count and standard error
    (``<metric>_n``, ``<metric>_se``); ValueError naming a missing metric group."""
    out: dict[str, Any] = {}
    for metric, group, field, *_ in METRICS:
        values = record["metrics"].get(group)
        if values is None:
            raise ValueError(f"the evaluation of {record['model']['path']!r} has no {group!r} metric")
        out |= metric_entry(metric, values, field, metric in ACCURACIES)
    return out


def hessian_row(run: str, cell: Mapping[str, Any]) -> dict[str, Any]:
    """The summary row of one Hessian cell: the run, its bit widths and method, :data:`HESSIAN_FIELDS`, the
    near-zero threshold, the Hessian's dimension, the probes' seed, and the Ritz values and weights of every probe
    (``nodes``, ``weights``: the figures' densities and the claims' per-probe statistics)."""
    return {"run": run, "setting": run.rpartition("-")[0], "bits": cell["bits"],
            "activation_bits": cell["activation_bits"], "method": cell["method"],
            **{field: float(cell[field]) for field in HESSIAN_FIELDS},
            "near_zero_threshold": float(cell["near_zero_threshold"]), "parameters": int(cell["parameters"]),
            "probes": int(cell["probes"]), "steps": int(cell["steps"]), "seed": int(cell["seed"]),
            "nodes": cell["nodes"], "weights": cell["weights"], "wall_time_s": float(cell["wall_time_s"])}


def study_summary(config: Mapping[str, Any], curves: Mapping[str, str | os.PathLike[str]],
                  evaluations: Mapping[str, Mapping[str, Any]], hessians: Mapping[str, Mapping[str, Any]],
                  train_seconds: Mapping[str, float], bits_per_weight: Mapping[str, float]) -> dict[str, Any]:
    """The study's summary (module docstring).

    ``curves``: run -> its ``eval_log.csv``; ``evaluations``: run -> the evaluation record of its checkpoint-quantized
    model, and ``base`` -> the base model's (full precision); ``hessians``: run -> Hessian cell (any subset of the
    runs); ``train_seconds`` and ``bits_per_weight``: per run. Every run needs a curve and an evaluation, every
    setting its baseline run, and ``base`` its evaluation: ValueError naming what is missing.
    """
    names = run_names(config)
    for name in [*names, "base"]:
        if name not in evaluations:
            raise ValueError(f"missing evaluation of {name!r}")
    for name in names:
        if name not in curves:
            raise ValueError(f"run {name!r} has no evaluation log (eval_log.csv)")
    for setting in config["study_settings"]:
        if f"{setting}-baseline" not in names:
            raise ValueError(f"setting {setting!r} has no baseline run: the study's methods must include 'baseline'")
    read = {name: read_curve(curves[name]) for name in names}
    metrics = {name: evaluated_metrics(evaluations[name]) for name in [*names, "base"]}
    rows = []
    for name in names:
        settings = run_settings(config, name)
        baseline = f"{settings['setting']}-baseline"
        target = read[baseline][-1][1]
        steps, steps_baseline = steps_to_reach(read[name], target), steps_to_reach(read[baseline], target)
        rows.append({
            "run": name, "setting": settings["setting"], "bits": settings["bits"],
            "activation_bits": settings["activation_bits"], "method": settings["method"], "lr": settings["lr"],
            "steps": read[name][-1][0], "final_val_perplexity": read[name][-1][1],
            "baseline_final_val_perplexity": target, "steps_to_baseline": steps,
            "speedup": None if steps is None else steps_baseline / steps,
            "metrics": metrics[name],
            "improvement": improvement(metrics[name]["perplexity"], metrics[baseline]["perplexity"]),
            "bits_per_weight": float(bits_per_weight[name]) if name in bits_per_weight else None,
            "train_seconds": float(train_seconds.get(name, 0.0)),
        })
    return {"runs": rows, "base": metrics["base"],
            "curves": {name: {"steps": [s for s, _ in read[name]], "perplexity": [p for _, p in read[name]]}
                       for name in names},
            "hessian": [hessian_row(run, hessians[run]) for run in names if run in hessians],
            "settings": list(config["study_settings"]), "methods": list(config["methods"]),
            "interpolation": dict(config["interpolation"]), "noise_sigma": config["noise"]["sigma"],
            "learning_rates": dict(config["learning_rates"]), "eval_every": config["train"]["eval_every"]}


def row_of(summary: Mapping[str, Any], run: str) -> Mapping[str, Any]:
    """The summary row of ``run`` (ValueError naming an unknown run)."""
    for row in summary["runs"]:
        if row["run"] == run:
            return row
    raise ValueError(f"no run {run!r} in the summary; runs: {', '.join(r['run'] for r in summary['runs'])}")


def hessian_of(summary: Mapping[str, Any], run: str) -> Mapping[str, Any] | None:
    """The Hessian row of ``run``, None when the study computed no spectrum for it."""
    return next((row for row in summary["hessian"] if row["run"] == run), None)


def run_table(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat record per run (the notebook's and the report's table): settings, speedup, final quality."""
    return [{"run": r["run"], "setting": r["setting"], "method": r["method"], "lr": r["lr"],
             "final val ppl": r["final_val_perplexity"], "steps to baseline": r["steps_to_baseline"],
             "speedup": r["speedup"], **{label: r["metrics"][m] for m, *_, label in METRICS},
             "improvement": r["improvement"], "bits/weight": r["bits_per_weight"]} for r in summary["runs"]]
