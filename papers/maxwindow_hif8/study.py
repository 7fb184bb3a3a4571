"""The study's summary, read from the artifacts of every run, and the synthetic observer cell.

Per run (``settings.run_names``), against the BF16 baseline at the same learning rate (``bf16-lr<rate>``):

* training-loss APE, the paper's measure of "the loss looks fine": the mean over the steps where HiF8 is on
  (``t >= warmup_steps``; every step of the baseline and the run see the same batches, same seed) of
  ``|L_t - L_t^BF16| / L_t^BF16``;
* downstream metrics of the evaluated model (HiF8 W8A8 after checkpoint quantization for QAT runs; the baselines
  unquantized, as the paper compares them, and also after the same checkpoint quantization, i.e. PTQ): perplexity
  on the held-out test split of the pretraining corpus (forgetting) and of the shift corpus (learning), and the
  zero-shot accuracies on the pretraining corpus (cloze ``acc``; 4-way choice ``acc_norm``, as HellaSwag);
* the relative drop of each metric vs the baseline, positive = worse: ``(m_BF16 - m) / m_BF16`` for accuracies,
  ``(m - m_BF16) / m_BF16`` for perplexities;
* saturation statistics per tensor role (``run.saturation_summary``).

Accuracies carry their binomial standard error ``sqrt(p (1 - p) / n)``; a difference of two accuracies on the same
``n`` examples has standard error at most ``sqrt(se_1^2 + se_2^2)`` (independent errors; paired errors make it
smaller), which the claims use to tell a drop from noise.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from typing import Any

from common.analysis import observer_study
from common.analysis.observer_study import SPIKE_KINDS, TRACE_KINDS, amax_trace, run_observer, spike_steps
from common.eval.compare import metric_entry, relative_drop
from common.observers import OBSERVER_NAMES

from .settings import run_names, run_settings

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
    """The rows of a run's ``telemetry.csv`` (``common.qat.TELEMETRY_FIELDS``), typed: ``step`` int, ``layer`` and
    ``role`` str, ``overflow`` and ``cold_start`` bool (the CSV's ``True`` / ``False``), the rest float; ValueError
    naming a flag that is neither."""
    rows = []
    with open(path, newline="") as handle:
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


def study_summary(config: Mapping[str, Any], logs: Mapping[str, str | os.PathLike[str]],
                  saturation: Mapping[str, Mapping[str, Any]], evaluations: Mapping[str, Mapping[str, Any]],
                  train_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The study's summary (module docstring).

    ``logs``: run -> its ``train_log.csv``; ``saturation``: run -> its ``saturation.json``; ``evaluations``:
    ``"<precision>/<run>/<corpus role>"`` -> evaluation record, with precision ``hif8`` (after checkpoint
    quantization) or ``bf16``, run a run name or ``base`` (the model before continual pretraining) and role
    ``pretrain`` or ``shift``. Every run needs its log, saturation and HiF8 evaluations; the baselines also their
    BF16 ones, and ``bf16/base`` must be there. ValueError naming what is missing.
    """
    names = run_names(config)

    def metrics_of(precision: str, run: str) -> dict[str, Any]:
        keys = [f"{precision}/{run}/{role}" for role in ("pretrain", "shift")]
        missing = [k for k in keys if k not in evaluations]
        if missing:
            raise ValueError(f"missing evaluation(s): {', '.join(missing)}")
        return evaluated_metrics(*(evaluations[k] for k in keys))

    for name in names:
        for what, table in (("training log", logs), ("saturation summary", saturation)):
            if name not in table:
                raise ValueError(f"run {name!r} has no {what}")
    losses = {name: read_losses(logs[name]) for name in names}
    baselines = {rate: metrics_of("bf16", f"bf16-lr{rate}") for rate in ("high", "low")}
    rows = []
    for name in names:
        settings = run_settings(config, name)
        rate, observer = settings["rate"], settings["observer"]
        reference = f"bf16-lr{rate}"
        precision = "bf16" if observer is None else "hif8"
        metrics = baselines[rate] if observer is None else metrics_of("hif8", name)
        rows.append({
            "run": name, "observer": observer, "rate": rate, "lr": settings["lr"],
            "warmup_steps": settings["warmup_steps"], "precision": precision,
            "steps": max(losses[name]) + 1, "final_loss": losses[name][max(losses[name])],
            "loss_ape": None if observer is None else loss_ape(losses[name], losses[reference],
                                                               settings["warmup_steps"]),
            "metrics": metrics, "drop": drops(metrics, baselines[rate]),
            "drop_vs_low_rate_bf16": drops(metrics, baselines["low"]),
            "saturation": dict(saturation[name]), "train_seconds": float(train_seconds.get(name, 0.0)),
        })
    ptq = []
    for rate in ("high", "low"):
        metrics = metrics_of("hif8", f"bf16-lr{rate}")
        ptq.append({"run": f"bf16-lr{rate}", "rate": rate, "metrics": metrics, "drop": drops(metrics, baselines[rate])})
    base = metrics_of("bf16", "base")
    return {"runs": rows, "ptq": ptq, "base": base,
            "losses": {name: [losses[name][t] for t in sorted(losses[name])] for name in names},
            "warmup_steps": config["bf16_warmup_steps"], "learning_rates": dict(config["learning_rates"]),
            "recipe": f"max_window-lrlow-w{config['bf16_warmup_steps']}"}


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
    """One flat row per run (for tables and notebooks): settings, loss APE, metrics, drops, input saturation."""
    flat = []
    for row in summary["runs"]:
        entry = {k: row[k] for k in ("run", "observer", "rate", "warmup_steps", "precision", "final_loss", "loss_ape")}
        entry |= {k: v for k, v in row["metrics"].items() if not k.endswith(("_n", "_se"))}
        entry |= {f"drop_{k}": v for k, v in row["drop"].items()}
        for role, stats in row["saturation"].items():
            entry[f"{role}_overflow_rate"] = stats["overflow_rate"]
        flat.append(entry)
    return flat


def recipe_row(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The summary row of the paper's recipe (max_window, warmup, low learning rate)."""
    return row_of(summary, summary["recipe"])


def row_of(summary: Mapping[str, Any], run: str) -> Mapping[str, Any]:
    """The summary row of ``run`` (ValueError naming a run the summary lacks)."""
    for row in summary["runs"]:
        if row["run"] == run:
            return row
    raise ValueError(f"run {run!r} is not in the summary; runs: {', '.join(r['run'] for r in summary['runs'])}")


def all_rows(summary: Mapping[str, Any], **match: Any) -> Sequence[Mapping[str, Any]]:
    """The runs whose settings equal ``match`` (e.g. ``rate="low"``)."""
    return [row for row in summary["runs"] if all(row[k] == v for k, v in match.items())]
