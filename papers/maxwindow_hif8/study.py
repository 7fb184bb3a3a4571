"""The study's summary, read from the artifacts of every run, and the synthetic observer cell.

Per run (``settings.run_names``) and seed (``seeds``), against the BF16 baseline at the same learning rate and seed
(``bf16-lr<rate>/seed<k>``: the same batches):

* training-loss APE, the paper's measure of "the loss looks fine": the mean over the steps where HiF8 is on
  (``t >= warmup_steps``) of ``|L_t - L_t^BF16| / L_t^BF16``;
* downstream metrics of the trained model evaluated in BF16 (the latent weights as trained, the paper's lm-eval
  comparison) and after the HiF8 W8A8 checkpoint quantization (deployed): perplexity on the held-out test split of
  the pretraining corpus (forgetting) and of the shift corpus (learning), and the zero-shot accuracies on the
  pretraining corpus (cloze ``acc``; 4-way choice ``acc_norm``, as HellaSwag);
* the relative drop of each metric vs the BF16 baseline evaluated in BF16, positive = worse:
  ``(m_BF16 - m) / m_BF16`` for accuracies, ``(m - m_BF16) / m_BF16`` for perplexities;
* saturation statistics per tensor role (:func:`common.quantizers.saturation_summary`).

A run's row holds the seed means (metrics, APE, saturation statistics; the loss curve is the mean over seeds per
step) and, under ``seeds``, every seed's own values; drops are of the seed means. The claims' intervals are made
from the artifacts themselves (``claims.py``), not from this summary.
"""

from __future__ import annotations

import csv
import gzip
import os
from collections.abc import Mapping, Sequence
from typing import Any

from common.analysis import observer_study
from common.analysis.observer_study import SPIKE_KINDS, TRACE_KINDS, amax_trace, run_observer, spike_steps
from common.eval.compare import metric_entry, relative_drop
from common.observers import OBSERVER_NAMES
from common.qat.seeds import seed_cell

from .settings import recipe, run_names, run_settings

# (metric, evaluated corpus role, metric group in the evaluation record, field, higher is better)
METRICS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("pretrain_perplexity", "pretrain", "perplexity", "perplexity", False),
    ("cloze_acc", "pretrain", "cloze", "acc", True),
    ("choice_acc_norm", "pretrain", "choice", "acc_norm", True),
    ("shift_perplexity", "shift", "perplexity", "perplexity", False),
)
METRIC_LABELS = {"pretrain_perplexity": "pretrain ppl", "cloze_acc": "cloze acc", "choice_acc_norm": "choice acc_norm",
                 "shift_perplexity": "shift ppl"}  # short names for tables and figures
ACCURACIES = {"cloze_acc": "cloze", "choice_acc_norm": "choice"}
TRACE_STEPS_SHOWN = 160  # steps of each synthetic trace kept for the figure


def read_losses(path: str | os.PathLike[str]) -> dict[int, float]:
    """``{step: loss}`` of a training log (``common.train``'s ``train_log.csv``); ValueError if it has no step."""
    with open(path, newline="") as handle:
        losses = {int(row["step"]): float(row["loss"]) for row in csv.DictReader(handle)}
    if not losses:
        raise ValueError(f"training log {str(path)!r} has no step")
    return losses


def read_telemetry(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a run's ``telemetry.csv.gz`` (gzip-compressed CSV of ``common.quantizers.TELEMETRY_FIELDS``),
    typed: ``step`` int, ``layer`` and ``role`` str, ``overflow`` and ``cold_start`` bool (the CSV's ``True`` /
    ``False``), the rest float; ValueError naming a flag that is neither."""
    rows = []
    with gzip.open(path, "rt", newline="", encoding="utf-8") as handle:
        for line, row in enumerate(csv.DictReader(handle), start=2):
            flags = {}
            for name in ("overflow", "cold_start"):
                if row[name] not in ("True", "False"):
                    raise ValueError(f"{str(path)!r} line {line}: {name} {row[name]!r} is not True or False")
                flags[name] = row[name] == "True"
            numbers = {k: float(v) for k, v in row.items() if k not in ("step", "layer", "role", *flags)}
            rows.append({**numbers, "step": int(row["step"]), "layer": row["layer"], "role": row["role"], **flags})
    return rows


def loss_errors(losses: Mapping[int, float], reference: Mapping[int, float], start: int = 0) -> dict[int, float]:
    """``{t: |L_t - R_t| / R_t}`` over the steps ``t >= start`` both logs have, ascending (ValueError if none)."""
    steps = sorted(t for t in losses if t >= start and t in reference)
    if not steps:
        raise ValueError(f"no common training step at or after step {start}")
    return {t: abs(losses[t] - reference[t]) / reference[t] for t in steps}


def loss_ape(losses: Mapping[int, float], reference: Mapping[int, float], start: int = 0) -> float:
    """Mean of :func:`loss_errors`, ``|L_t - R_t| / R_t`` over the steps ``t >= start`` both logs have."""
    errors = loss_errors(losses, reference, start)
    return sum(errors.values()) / len(errors)


def evaluated_metrics(pretrain: Mapping[str, Any], shift: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`METRICS` of one model from its two evaluation records, with accuracies' example counts and
    standard errors (``<metric>_n``, ``<metric>_se``)."""
    records = {"pretrain": pretrain, "shift": shift}
    out: dict[str, Any] = {}
    for metric, corpus, group, field, _ in METRICS:
        values = records[corpus]["metrics"].get(group)
        if values is None:
            raise ValueError(f"the {corpus} evaluation of {records[corpus]['model']['path']!r} has no {group!r} metric")
        out |= metric_entry(metric, values, field, metric in ACCURACIES)
    return out


def drops(metrics: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, float | None]:
    """Relative drop of every :data:`METRICS` entry vs ``reference`` (positive = worse)."""
    return {metric: relative_drop(metrics[metric], reference[metric], higher) for metric, *_, higher in METRICS}


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _mean_record(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Key-wise mean of flat numeric records (None stays None)."""
    return {k: _mean([r[k] for r in records]) for k in records[0]}


def study_summary(config: Mapping[str, Any], logs: Mapping[tuple[str, int], str | os.PathLike[str]],
                  saturation: Mapping[tuple[str, int], Mapping[str, Any]], evaluations: Mapping[str, Mapping[str, Any]],
                  train_seconds: Mapping[tuple[str, int], float]) -> dict[str, Any]:
    """The study's summary (module docstring).

    ``logs``: ``(run, seed)`` -> its ``train_log.csv``; ``saturation``: ``(run, seed)`` -> its ``saturation.json``;
    ``evaluations``: ``"<precision>/<run>/seed<k>/<corpus role>"`` (or ``"bf16/base/<role>"``, the model before
    continual pretraining) -> evaluation record, precision ``bf16`` (as trained) or ``hif8`` (after checkpoint
    quantization), role ``pretrain`` or ``shift``. Every cell needs its log, saturation and both evaluations.
    ValueError naming what is missing.
    """
    names, seeds = run_names(config), list(config["seeds"])

    def metrics_of(precision: str, cell: str) -> dict[str, Any]:
        keys = [f"{precision}/{cell}/{role}" for role in ("pretrain", "shift")]
        missing = [k for k in keys if k not in evaluations]
        if missing:
            raise ValueError(f"missing evaluation(s): {', '.join(missing)}")
        return evaluated_metrics(*(evaluations[k] for k in keys))

    for name in names:
        for seed in seeds:
            for what, table in (("training log", logs), ("saturation summary", saturation)):
                if (name, seed) not in table:
                    raise ValueError(f"run {name!r} seed {seed} has no {what}")
    losses = {(name, seed): read_losses(logs[name, seed]) for name in names for seed in seeds}
    rows = []
    for name in names:
        settings = run_settings(config, name)
        rate, observer, warmup = settings["rate"], settings["observer"], settings["warmup_steps"]
        per_seed = {}
        for seed in seeds:
            reference = (f"bf16-lr{rate}", seed)
            curve = losses[name, seed]
            per_seed[seed] = {
                "final_loss": curve[max(curve)],
                "loss_ape": None if observer is None else loss_ape(curve, losses[reference], warmup),
                "metrics": metrics_of("bf16", seed_cell(name, seed)),
                "metrics_hif8": metrics_of("hif8", seed_cell(name, seed)),
                "saturation": dict(saturation[name, seed]),
                "train_seconds": float(train_seconds.get((name, seed), 0.0))}
        rows.append({"run": name, "observer": observer, "rate": rate, "lr": settings["lr"], "warmup_steps": warmup,
                     "steps": max(losses[name, seeds[0]]) + 1, "seeds": per_seed,
                     **{k: _mean([per_seed[s][k] for s in seeds]) for k in ("final_loss", "loss_ape",
                                                                              "train_seconds")},
                     "metrics": _mean_record([per_seed[s]["metrics"] for s in seeds]),
                     "metrics_hif8": _mean_record([per_seed[s]["metrics_hif8"] for s in seeds]),
                     "saturation": {role: _mean_record([per_seed[s]["saturation"][role] for s in seeds])
                                    for role in per_seed[seeds[0]]["saturation"]}})
    baselines = {row["rate"]: row["metrics"] for row in rows if row["observer"] is None}
    for row in rows:
        row["drop"] = drops(row["metrics"], baselines[row["rate"]])
        row["drop_hif8"] = drops(row["metrics_hif8"], baselines[row["rate"]])
    steps = sorted(losses[names[0], seeds[0]])
    return {"runs": rows, "base": metrics_of("bf16", "base"), "seeds": seeds,
            "losses": {name: [_mean([losses[name, s][t] for s in seeds]) for t in steps] for name in names},
            "warmup_steps": config["bf16_warmup_steps"], "learning_rates": dict(config["learning_rates"]),
            "recipe": recipe(config)}


def observer_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """The synthetic observer study of ``config`` (``observer_options``, ``observer_study``) over every observer
    of ``common.observers``, ``config["observers"]`` first (cheap, so even a profile that trains with fewer
    compares them all): ``rows`` of
    :func:`common.analysis.observer_study` over every trace kind, and per kind the first :data:`TRACE_STEPS_SHOWN`
    steps of the trace, its spike steps and every observer's prediction (the figure)."""
    steps, seed = config["observer_study"]["steps"], config["observer_study"]["seed"]
    options = config["observer_options"]
    observers = [*config["observers"], *(name for name in OBSERVER_NAMES if name not in config["observers"])]
    rows = observer_study(TRACE_KINDS, observers, steps=steps, seed=seed, observer_options=options)
    shown = min(steps, TRACE_STEPS_SHOWN)
    traces = {}
    for kind in TRACE_KINDS:
        trace = amax_trace(kind, steps, seed=seed)
        spikes = spike_steps(kind, steps, seed=seed) if kind in SPIKE_KINDS else None
        traces[kind] = {
            "amax": trace[:shown].tolist(),
            "spikes": [] if spikes is None else [int(t) for t in spikes if t < shown],
            "prediction": {name: run_observer(trace, name, **options.get(name, {}))["prediction"][:shown].tolist()
                           for name in observers}}
    return {"steps": steps, "seed": seed, "observer_options": dict(options), "rows": rows, "traces": traces}


def run_table(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One flat row per run (for tables and notebooks), seed means: settings, loss APE, metrics in BF16, drops,
    saturation rate per role."""
    flat = []
    for row in summary["runs"]:
        entry = {k: row[k] for k in ("run", "observer", "rate", "warmup_steps", "final_loss", "loss_ape")}
        entry |= {k: v for k, v in row["metrics"].items() if not k.endswith(("_n", "_se"))}
        entry |= {f"drop_{k}": v for k, v in row["drop"].items()}
        for role, stats in row["saturation"].items():
            entry[f"{role}_overflow_rate"] = stats["overflow_rate"]
        flat.append(entry)
    return flat
