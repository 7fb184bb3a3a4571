"""The study's summary, read from the artifacts of every training cell: convergence curves, gradient norms, speedups,
final quality at equal budget, the Hessian spectra; per cell (one seed of a run) and as seed means per run.

Per cell (``settings.training_cells``: ``<setting>-<method>/seed<k>``), against the ``baseline`` of the same setting
and seed (ParetoQ QAT, same step budget, learning-rate schedule, data order and initialisation):

* the validation-perplexity curve (``eval_log.csv`` of :func:`common.train.train`: the quantized model, eval mode,
  every ``eval_every`` steps and at the last step), indexed by steps taken (``step + 1``), with its first value,
  its value at half the run (the last evaluation at or before ``max_steps / 2`` steps, the run's own length:
  ``settings.run_steps``) and its last;
* the gradient norm of every step (``train_log.csv``: the total norm before clipping) and its means over the second
  quarter of the run (steps taken in ``(N/4, N/2]``), the last quarter (``(3N/4, N]``) and the last half
  (``(N/2, N]``), the integer boundaries ``N // 4``, ``N // 2``, ``3 N // 4``;
* **steps to the baseline's quality**: the first curve point whose perplexity is at or below the same seed's
  baseline final validation perplexity ``P_b`` (None when the cell never gets there; the resolution is the
  evaluation interval);
* **speedup** ``= steps_b / steps``, where ``steps_b`` is the baseline's own first step at or below ``P_b`` (its
  last step unless its curve dipped below ``P_b`` earlier); None when the cell never gets there;
* **final quality at equal budget** of the checkpoint-quantized model (packed codes and learned scales,
  ``common.ptq``): perplexity on the held-out test split, cloze ``acc`` and 4-way choice ``acc_norm`` (with
  binomial standard errors), and the **improvement** ``(P_b - P) / P_b`` of the test perplexity over the same seed's
  baseline (positive = better; the paper's "up to 8.8%");
* the bits per weight the checkpoint stores, the interpolations performed and the seeds the run recorded (its data
  order and its noise generator);
* **mechanism** (``mechanism.jsonl`` of :mod:`.diagnostics`, one record per boundary ``K, 2K, ...``, also
  in the runs that do not interpolate; :func:`mechanism_summary`): per boundary the share of codes changed over the
  period, the shares of latent weights within the next period's travel of a code boundary and outside the clip
  range, before and after the interpolation, and their means over the periods (the near-boundary shares over the
  boundaries with a next period; ``codes_changed_after_first`` over the periods after the first boundary, where an
  interpolating run and its baseline have begun to differ); None for a run without records; and
  ``mechanism_vs_baseline``: each of :data:`MECHANISM_DIFFERENCES` minus the same seed's baseline's, the boundaries
  paired step for step (0 for the baseline itself; None where either is);
* **stagnation** (``stagnation.jsonl``: the authors' relative gradient norm ``||grad_W L|| / ||W||`` of the quantized
  weights at every evaluation; :func:`stagnation_summary`): the curve and its means over the evaluations in the
  second quarter and the last quarter of the run (steps taken in ``(N//4, N//2]`` and ``(3N//4, N]``, as the
  training log's gradient norm) and their ratio;
* **stall** (:func:`cell_stall`): the codes changed per unit of summed learning rate over the last half of the
  interpolation periods over the first half, the premise statistic of :mod:`papers.winq.premise` (None without
  mechanism records or where it is undefined).

Per run: the seeds it was trained on and the seed means (and sample sd) of the final validation and test
perplexity, the improvement and the speedup (None when a seed never reached the baseline's quality), and the seed
means of the mechanism's period means and of the stagnation quarters and ratio (None when a seed has none): what the
figures draw.

Hessian cells (``hessian/<run>/seed<k>.json``, :mod:`papers.winq.hessian`): the near-zero, negative and positive
spectral mass at the relative threshold of the cell and at the paper's absolute thresholds (recomputed from the Ritz
values and weights: :func:`threshold_masses`), the largest |eigenvalue|, and the nodes and weights per probe.
"""

from __future__ import annotations

import csv
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from common.eval.compare import metric_entry
from common.io import read_jsonl
from common.qat.seeds import parse_seed_cell, seed_cell

from .settings import (
    GROUPS,
    compared_methods,
    interpolation_every,
    period_lr_sums,
    run_names,
    run_seeds,
    run_settings,
    train_config,
    training_cells,
)

# (metric, metric group in the evaluation record, field, higher is better, label)
METRICS: tuple[tuple[str, str, str, bool, str], ...] = (
    ("perplexity", "perplexity", "perplexity", False, "test ppl"),
    ("cloze_acc", "cloze", "acc", True, "cloze acc"),
    ("choice_acc_norm", "choice", "acc_norm", True, "choice acc_norm"),
)
ACCURACIES = ("cloze_acc", "choice_acc_norm")
HESSIAN_FIELDS = ("near_zero_mass", "negative_mass", "positive_mass", "largest_abs_eigenvalue")
# the per-boundary series of a mechanism record (.diagnostics.MECHANISM_FIELDS) the summary keeps
MECHANISM_SERIES = ("codes_changed", "codes_changed_by_interpolation", "near_boundary_before", "near_boundary_after",
                    "clipped_before", "clipped_after")
# the per-cell means of mechanism_summary (``mean``), averaged over seeds per run
MECHANISM_MEANS = ("codes_changed", "codes_changed_after_first", "codes_changed_by_interpolation_max",
                   "near_boundary_before", "near_boundary_after", "clipped_before", "clipped_after")
# the mechanism means a cell is compared on with the same seed's baseline (cell - baseline)
MECHANISM_DIFFERENCES = ("codes_changed", "codes_changed_after_first", "near_boundary_before", "near_boundary_after",
                         "clipped_before", "clipped_after")
STAGNATION_QUARTERS = ("second_quarter", "last_quarter", "last_over_second")


def read_curve(path: str | os.PathLike[str]) -> list[tuple[int, float]]:
    """``[(steps taken, validation perplexity), ...]`` of an ``eval_log.csv`` (``step`` is 0-based: a row at step
    ``s`` was evaluated after ``s + 1`` optimizer steps), in step order; ValueError naming a log without rows."""
    with open(path, newline="") as handle:
        curve = sorted((int(row["step"]) + 1, float(row["val_perplexity"])) for row in csv.DictReader(handle))
    if not curve:
        raise ValueError(f"evaluation log {str(path)!r} has no row")
    return curve


def read_grad_norms(path: str | os.PathLike[str]) -> list[float]:
    """The gradient norm of every step of a ``train_log.csv``, in step order; ValueError naming a log without rows
    or with a step missing."""
    with open(path, newline="") as handle:
        rows = sorted((int(row["step"]), float(row["grad_norm"])) for row in csv.DictReader(handle))
    if not rows or [s for s, _ in rows] != list(range(len(rows))):
        raise ValueError(f"training log {str(path)!r} has no row or a step missing")
    return [g for _, g in rows]


def grad_norm_means(norms: Sequence[float]) -> dict[str, float]:
    """Mean gradient norm over the second quarter, the last quarter and the last half of a run of ``N = len(norms)``
    steps (0-based indices ``[N//4, N//2)``, ``[3N//4, N)``, ``[N//2, N)``); ValueError for fewer than 4 steps."""
    n = len(norms)
    if n < 4:
        raise ValueError(f"a run of {n} steps has no quarters")
    return {"second_quarter": float(np.mean(norms[n // 4 : n // 2])),
            "last_quarter": float(np.mean(norms[3 * n // 4 :])), "last_half": float(np.mean(norms[n // 2 :]))}


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a JSONL file of :mod:`.diagnostics` (``mechanism.jsonl``, ``stagnation.jsonl``), in
    file order (an empty file: none)."""
    return [record for _, record in read_jsonl(path)]


def _mean_or_none(values: Sequence[float | None]) -> float | None:
    """The mean of the values that are not None; None when none is."""
    present = [v for v in values if v is not None]
    return float(statistics.fmean(present)) if present else None


def mechanism_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The mechanism of one cell from its ``mechanism.jsonl`` records (one per boundary, step order): ``steps``
    (steps taken at each boundary), ``travel``, ``interpolated``, the :data:`MECHANISM_SERIES` per boundary, and
    ``mean``: each series' mean over the boundaries where it is defined (the near-boundary shares: those with a next
    period), ``codes_changed_after_first`` (the mean over periods 2, 3, ...: None with one period) and
    ``codes_changed_by_interpolation_max`` (0 unless an interpolation changed a code). None for no records (a run
    recorded without a period)."""
    if not records:
        return None
    series = {field: [r[field] for r in records] for field in MECHANISM_SERIES}
    means = {field: _mean_or_none(values) for field, values in series.items()
             if field != "codes_changed_by_interpolation"}
    means["codes_changed_after_first"] = _mean_or_none(series["codes_changed"][1:])
    means["codes_changed_by_interpolation_max"] = max(series["codes_changed_by_interpolation"])
    return {"steps": [int(r["steps_taken"]) for r in records], "travel": [float(r["travel"]) for r in records],
            "interpolated": bool(records[0]["interpolated"]), **series, "mean": means}


def half_sums(values: Sequence[float]) -> tuple[float, float]:
    """``(sum of the first P // 2, sum of the last P // 2)`` of ``P`` values (the middle one of an odd count in
    neither)."""
    half = len(values) // 2
    return math.fsum(values[:half]), math.fsum(values[len(values) - half:])


def stall_ratio(codes_changed: Sequence[float], lr_sums: Sequence[float]) -> float | None:
    """The stall ratio (:mod:`papers.winq.premise`) of the per-period code-change shares ``codes_changed`` and
    summed learning rates ``lr_sums`` (one per period, in order); None where it is undefined. ValueError when the
    lengths differ."""
    if len(codes_changed) != len(lr_sums):
        raise ValueError(f"{len(codes_changed)} periods of code changes but {len(lr_sums)} of learning rate")
    if len(lr_sums) < 2:
        return None
    (c_early, c_late), (s_early, s_late) = half_sums(codes_changed), half_sums(lr_sums)
    if c_early <= 0 or s_early <= 0 or s_late <= 0:
        return None
    return (c_late / s_late) / (c_early / s_early)


def cell_stall(config: Mapping[str, Any], run: str, codes_changed: Sequence[float]) -> float | None:
    """The stall ratio of one cell of ``run`` from its mechanism's per-period code changes, on its schedule in
    ``config`` (:func:`papers.winq.settings.train_config`; the periods ``K`` its diagnostics record at)."""
    every = run_settings(config, run)["diagnostics_every"]
    return stall_ratio(codes_changed, period_lr_sums(train_config(config, run), every))


def stagnation_summary(records: Sequence[Mapping[str, Any]], max_steps: int) -> dict[str, Any]:
    """The stagnation statistic of one cell from its ``stagnation.jsonl`` records (one per evaluation): ``steps``
    (steps taken), ``relative_grad_norm`` (the curve), its means over the evaluations in the second quarter and the
    last quarter of a run of ``N = max_steps`` steps (steps taken in ``(N//4, N//2]``, ``(3N//4, N]``; None for a
    quarter without one) and ``last_over_second``, their ratio. ValueError for no records."""
    if not records:
        raise ValueError("no stagnation record (an evaluation every eval_every steps makes one)")
    steps = [int(r["steps_taken"]) for r in records]
    values = [float(r["relative_grad_norm"]) for r in records]
    n = max_steps
    second = _mean_or_none([v for t, v in zip(steps, values, strict=True) if n // 4 < t <= n // 2])
    last = _mean_or_none([v for t, v in zip(steps, values, strict=True) if 3 * n // 4 < t <= n])
    return {"steps": steps, "relative_grad_norm": values, "second_quarter": second, "last_quarter": last,
            "last_over_second": None if second is None or last is None else last / second}


def seed_means(entries: Sequence[Mapping[str, Any] | None], fields: Sequence[str]) -> dict[str, float | None] | None:
    """``{field: mean over the entries}`` of the given fields (a field None in any entry: None); None when an entry
    is None or there is none."""
    if not entries or any(entry is None for entry in entries):
        return None
    means: dict[str, float | None] = {}
    for field in fields:
        values = [entry[field] for entry in entries]
        means[field] = None if None in values else float(statistics.fmean(values))
    return means


def mechanism_difference(cell: Mapping[str, Any] | None,
                         baseline: Mapping[str, Any] | None) -> dict[str, float | None] | None:
    """``{field: cell - baseline}`` of the :data:`MECHANISM_DIFFERENCES` means of two :func:`mechanism_summary`
    results of one seed (None for a field None in either); None when either has no mechanism."""
    if cell is None or baseline is None:
        return None
    ours, theirs = cell["mean"], baseline["mean"]
    return {field: None if ours[field] is None or theirs[field] is None else ours[field] - theirs[field]
            for field in MECHANISM_DIFFERENCES}


def steps_to_reach(curve: Sequence[tuple[int, float]], target: float) -> int | None:
    """The first step count of ``curve`` whose perplexity is ``<= target``; None when no point gets there."""
    return next((steps for steps, value in curve if value <= target), None)


def value_at_half(curve: Sequence[tuple[int, float]], max_steps: int) -> float:
    """The perplexity of the last curve point at or before ``max_steps / 2`` steps (the first point when none)."""
    points = [value for steps, value in curve if 2 * steps <= max_steps]
    return points[-1] if points else curve[0][1]


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


def threshold_masses(cell: Mapping[str, Any], threshold: float) -> dict[str, float]:
    """The spectral mass with ``|theta| < threshold`` (``near_zero``), ``theta <= -threshold`` (``negative``) and
    ``theta >= threshold`` (``positive``), the mean over probes of the Ritz weights ``tau_pk`` (the paper's strict
    ``|eigenvalue| < 1e-3``; the three sum to 1)."""
    near = negative = positive = 0.0
    for theta, tau in zip(cell["nodes"], cell["weights"], strict=True):
        theta, tau = np.asarray(theta, dtype=np.float64), np.asarray(tau, dtype=np.float64)
        near += float(tau[np.abs(theta) < threshold].sum())
        negative += float(tau[theta <= -threshold].sum())
        positive += float(tau[theta >= threshold].sum())
    probes = len(cell["nodes"])
    return {"near_zero": near / probes, "negative": negative / probes, "positive": positive / probes}


def hessian_row(cell_name: str, cell: Mapping[str, Any], thresholds: Mapping[str, float]) -> dict[str, Any]:
    """The summary row of one Hessian cell: the cell, run, seed, its bit widths and method, :data:`HESSIAN_FIELDS`
    (at the cell's relative threshold), the masses at the absolute ``thresholds`` (``{"abs": .., "notebook": ..}``:
    ``<name>_threshold`` and ``<name>_masses``, :func:`threshold_masses`), the Hessian's dimension, the probes' seed,
    and the Ritz values and weights of every probe (``nodes``, ``weights``)."""
    run, seed = parse_seed_cell(cell_name)
    row = {"cell": cell_name, "run": run, "seed": seed, "setting": run.rpartition("-")[0], "bits": cell["bits"],
           "activation_bits": cell["activation_bits"], "method": cell["method"],
           **{field: float(cell[field]) for field in HESSIAN_FIELDS},
           "near_zero_threshold": float(cell["near_zero_threshold"]), "parameters": int(cell["parameters"]),
           "probes": int(cell["probes"]), "steps": int(cell["steps"]), "probe_seed": int(cell["seed"]),
           "nodes": cell["nodes"], "weights": cell["weights"], "wall_time_s": float(cell["wall_time_s"])}
    for name, threshold in thresholds.items():
        row[f"{name}_threshold"] = float(threshold)
        row[f"{name}_masses"] = threshold_masses(cell, threshold)
    return row


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    return float(statistics.fmean(values)), (float(statistics.stdev(values)) if len(values) > 1 else None)


def study_summary(config: Mapping[str, Any], curves: Mapping[str, str | os.PathLike[str]],
                  logs: Mapping[str, str | os.PathLike[str]], evaluations: Mapping[str, Mapping[str, Any]],
                  hessians: Mapping[str, Mapping[str, Any]], records: Mapping[str, Mapping[str, Any]],
                  train_seconds: Mapping[str, float], bits_per_weight: Mapping[str, float],
                  mechanism: Mapping[str, str | os.PathLike[str]] | None = None,
                  stagnation: Mapping[str, str | os.PathLike[str]] | None = None) -> dict[str, Any]:
    """The study's summary (module docstring).

    By cell ``<run>/seed<k>``: ``curves`` (its ``eval_log.csv``), ``logs`` (its ``train_log.csv``), ``evaluations``
    (the evaluation record of its checkpoint-quantized model; ``base``: the base model's, full precision),
    ``hessians`` (any subset of the cells), ``records`` (the ``qat`` record and ``training`` summary of its
    checkpoint's ``lowbit_metadata.json``: ``{"qat": .., "training": ..}``), ``train_seconds``,
    ``bits_per_weight``, and the diagnostics' ``mechanism`` (its ``mechanism.jsonl``) and ``stagnation`` (its
    ``stagnation.jsonl``; None: the summary has no such entries, each cell's is None). Every cell needs a curve, a
    training log, a record, an evaluation and, when they are given, its diagnostics, and ``base`` its evaluation:
    ValueError naming what is missing.
    """
    cells = training_cells(config)
    for name in [*cells, "base"]:
        if name not in evaluations:
            raise ValueError(f"missing evaluation of {name!r}")
    for what, given in (("evaluation log (eval_log.csv)", curves), ("training log (train_log.csv)", logs),
                        ("checkpoint record (lowbit_metadata.json)", records),
                        ("mechanism record (mechanism.jsonl)", mechanism),
                        ("stagnation record (stagnation.jsonl)", stagnation)):
        for name in cells:
            if given is not None and name not in given:
                raise ValueError(f"cell {name!r} has no {what}")
    read = {name: read_curve(curves[name]) for name in cells}
    norms = {name: read_grad_norms(logs[name]) for name in cells}
    mechanisms = {name: None if mechanism is None else mechanism_summary(read_records(mechanism[name]))
                  for name in cells}
    metrics = {name: evaluated_metrics(evaluations[name]) for name in [*cells, "base"]}
    rows = []
    for name in cells:
        run, seed = parse_seed_cell(name)
        settings = run_settings(config, run)
        baseline = seed_cell(f"{settings['setting']}-baseline", seed)
        target = read[baseline][-1][1]
        steps, steps_baseline = steps_to_reach(read[name], target), steps_to_reach(read[baseline], target)
        record = records[name]
        rows.append({
            "cell": name, "run": run, "seed": seed, "setting": settings["setting"], "bits": settings["bits"],
            "activation_bits": settings["activation_bits"], "hadamard": settings["hadamard"],
            "method": settings["method"], "lr": settings["lr"], "max_steps": settings["max_steps"],
            "every": (settings["interpolation"] or {}).get("every"),
            "interpolations": int(record["qat"].get("interpolations", 0)),
            "data_seed": int(record["training"]["config"]["seed"]),
            "noise_seed": record["qat"].get("noise_seed"),
            "steps": read[name][-1][0], "first_val_perplexity": read[name][0][1],
            "half_val_perplexity": value_at_half(read[name], settings["max_steps"]),
            "final_val_perplexity": read[name][-1][1],
            "baseline_final_val_perplexity": target, "steps_to_baseline": steps,
            "baseline_steps_to_baseline": steps_baseline,
            "speedup": None if steps is None else steps_baseline / steps,
            "grad_norm": grad_norm_means(norms[name]),
            "metrics": metrics[name],
            "improvement": improvement(metrics[name]["perplexity"], metrics[baseline]["perplexity"]),
            "bits_per_weight": float(bits_per_weight[name]) if name in bits_per_weight else None,
            "train_seconds": float(train_seconds.get(name, 0.0)),
            "mechanism": mechanisms[name],
            "stall": None if mechanisms[name] is None else cell_stall(config, run, mechanisms[name]["codes_changed"]),
            "mechanism_vs_baseline": mechanism_difference(mechanisms[name], mechanisms[baseline]),
            "stagnation": None if stagnation is None else stagnation_summary(read_records(stagnation[name]),
                                                                             settings["max_steps"]),
        })
    runs = []
    for run in run_names(config):
        mine = [r for r in rows if r["run"] == run]
        first = mine[0]
        final, final_sd = _mean_sd([r["final_val_perplexity"] for r in mine])
        test, test_sd = _mean_sd([r["metrics"]["perplexity"] for r in mine])
        gain, gain_sd = _mean_sd([r["improvement"] for r in mine])
        speedups = [r["speedup"] for r in mine]
        runs.append({
            "run": run, "setting": first["setting"], "bits": first["bits"], "activation_bits": first["activation_bits"],
            "hadamard": first["hadamard"], "method": first["method"], "lr": first["lr"],
            "max_steps": first["max_steps"], "every": first["every"],
            "seeds": [r["seed"] for r in mine],
            "compared": first["method"] in compared_methods(config, first["setting"]),
            "final_val_perplexity": final, "final_val_perplexity_sd": final_sd,
            "test_perplexity": test, "test_perplexity_sd": test_sd, "improvement": gain, "improvement_sd": gain_sd,
            "speedup": None if None in speedups else float(statistics.fmean(speedups)),
            "speedups": speedups, "bits_per_weight": first["bits_per_weight"],
            "train_seconds": sum(r["train_seconds"] for r in mine),
            "mechanism": seed_means([r["mechanism"] and r["mechanism"]["mean"] for r in mine],
                                    MECHANISM_MEANS),
            "mechanism_vs_baseline": seed_means([r["mechanism_vs_baseline"] for r in mine], MECHANISM_DIFFERENCES),
            "stagnation": seed_means([r["stagnation"] for r in mine], STAGNATION_QUARTERS)})
    hessian_config = config["hessian"]
    thresholds = {"abs": hessian_config["near_zero_abs"], "notebook": hessian_config["near_zero_notebook"]}
    return {"cells": rows, "runs": runs, "base": metrics["base"],
            "curves": {name: {"steps": [s for s, _ in read[name]], "perplexity": [p for _, p in read[name]]}
                       for name in cells},
            "grad_norms": {name: norms[name] for name in cells},
            "hessian": [hessian_row(name, hessians[name], thresholds) for name in cells if name in hessians],
            "settings": list(config["study_settings"]), "methods": list(config["methods"]),
            "compared": {s: compared_methods(config, s) for s in config["study_settings"]},
            "seeds": {run: run_seeds(config, run) for run in run_names(config)},
            "pooled_settings": [s for s in config["pooled_settings"] if s in config["study_settings"]],
            "interpolation": {"strength": config["interpolation"]["strength"],
                              "every": {group: interpolation_every(config, group) for group in GROUPS}},
            "noise_sigma": config["noise"]["sigma"], "learning_rates": dict(config["learning_rates"]),
            "eval_every": config["train"]["eval_every"],
            "hessian_thresholds": {"relative": hessian_config["near_zero"], **thresholds}}


def row_of(summary: Mapping[str, Any], run: str) -> Mapping[str, Any]:
    """The run-level summary row of ``run`` (seed means; ValueError naming an unknown run)."""
    for row in summary["runs"]:
        if row["run"] == run:
            return row
    raise ValueError(f"no run {run!r} in the summary; runs: {', '.join(r['run'] for r in summary['runs'])}")


def cell_of(summary: Mapping[str, Any], cell: str) -> Mapping[str, Any] | None:
    """The summary row of training cell ``<run>/seed<k>``, None when the study did not train it."""
    return next((row for row in summary["cells"] if row["cell"] == cell), None)


def hessian_of(summary: Mapping[str, Any], cell: str) -> Mapping[str, Any] | None:
    """The Hessian row of cell ``cell``, None when the study computed no spectrum for it."""
    return next((row for row in summary["hessian"] if row["cell"] == cell), None)


def run_table(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat record per training cell (the notebook's table): settings, speedup, final quality."""
    return [{"cell": r["cell"], "run": r["run"], "seed": r["seed"], "setting": r["setting"], "method": r["method"],
             "lr": r["lr"], "final val ppl": r["final_val_perplexity"], "steps to baseline": r["steps_to_baseline"],
             "speedup": r["speedup"], **{label: r["metrics"][m] for m, *_, label in METRICS},
             "improvement": r["improvement"], "grad norm last/second quarter":
                 r["grad_norm"]["last_quarter"] / r["grad_norm"]["second_quarter"],
             "bits/weight": r["bits_per_weight"]} for r in summary["cells"]]


def mean_curve(curves: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """The mean and the sample sd (0 for one curve) over curves of one length, pointwise."""
    data = np.asarray(curves, dtype=np.float64)
    return data.mean(axis=0), (data.std(axis=0, ddof=1) if len(data) > 1 else np.zeros(data.shape[1]))
