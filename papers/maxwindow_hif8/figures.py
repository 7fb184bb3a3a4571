"""The paper's figures (seaborn): ``plot_*`` draws one figure from artifacts and returns it (the notebook shows
it); ``python -m papers.maxwindow_hif8 figure ...`` saves it as PNG and PDF
(:func:`common.report.figures.save_figure`). :data:`PLOTS` and :data:`CAPTIONS` by figure kind
(``settings.FIGURES``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from common.analysis.observer_study import TRACE_OPTIONS
from common.recipes import ROLES
from common.report.figures import check_figures, lookup_caption, set_report_theme

from .settings import FIGURES, RUN
from .study import METRIC_LABELS, METRICS

SPIKE_PERIOD = TRACE_OPTIONS["spikes"]["period"]

CAPTIONS = {
    "loss-curves": "Training loss of every run (mean over its seeds, rolling mean over 10 steps) at each learning "
                   "rate: BF16 (black) and HiF8 W8A8 QAT per observer, with the BF16 warmup (solid) and without "
                   "(dashed). Whether the curves lie on top of each other is the question the loss APE rows answer.",
    "saturation": "What the training loss hides: per step, the fraction of quantized layer-calls whose amax exceeded "
                  "the amax its delayed scale was predicted from (scale-induced saturation), per tensor role, for "
                  "each observer at the low learning rate with the BF16 warmup (rolling mean over 5 steps; the first "
                  "seed only, the claims use every seed).",
    "downstream": "Relative drop of every trained model vs the BF16 baseline at the same learning rate, evaluated "
                  "in BF16 (as trained, the paper's evaluation) and after the HiF8 W8A8 checkpoint quantization "
                  "(positive = worse; perplexity rises and accuracy falls count as drops), in percent, of the seed "
                  "means.",
    "forgetting": "Forgetting vs learning: perplexity on the pretraining corpus (held-out test split) against "
                  "perplexity on the shift corpus, evaluated in BF16, for the base model before continual "
                  "pretraining and every run (seed means).",
    "observer-study": "Synthetic amax traces (black) and each observer's delayed prediction: a step saturates "
                      f"where the trace rises above the prediction. Equal spikes recur every {SPIKE_PERIOD} steps "
                      "(top), a non-monotone oscillation (middle) and a slow monotone drift (bottom).",
}


def caption(figure_id: str) -> str:
    """The caption of a figure file stem (:func:`common.report.figures.lookup_caption`; ValueError naming an
    unknown one)."""
    return lookup_caption(CAPTIONS, figure_id)


def _palette(observers: Sequence[str]) -> dict[str, Any]:
    return dict(zip(observers, sns.color_palette("tab10", len(observers)), strict=True))


def plot_loss_curves(summary: Mapping[str, Any]) -> plt.Figure:
    """Training loss vs step per learning rate (caption ``loss-curves``)."""
    set_report_theme()
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.8), sharey=True)
    observers = sorted({r["observer"] for r in summary["runs"] if r["observer"]})
    palette = _palette(observers)
    for ax, rate in zip(axes, ("high", "low"), strict=True):
        for row in (r for r in summary["runs"] if r["rate"] == rate):
            loss = pd.Series(summary["losses"][row["run"]]).rolling(10, min_periods=1).mean()
            if row["observer"] is None:
                ax.plot(loss.index, loss, color="black", linewidth=2.0, label="BF16", zorder=3)
            else:
                variant = RUN.fullmatch(row["run"])["variant"]  # a negative control: its own label and dots
                ax.plot(loss.index, loss, color=palette[row["observer"]], linewidth=1.0,
                        linestyle=":" if variant else "-" if row["warmup_steps"] else "--",
                        label=f"{row['observer']}, warmup {row['warmup_steps']}" + (f", {variant}" if variant else ""))
        ax.axvline(summary["warmup_steps"], color="grey", linestyle=":", linewidth=1)
        ax.set(xlabel="step", ylabel="training loss", title=f"lr {summary['learning_rates'][rate]:g} ({rate})")
    axes[1].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def plot_saturation(telemetry: Mapping[str, pd.DataFrame], warmup_steps: int) -> plt.Figure:
    """Fraction of saturating layers per step and role, per observer (caption ``saturation``); ``telemetry``
    maps an observer to its run's telemetry rows."""
    set_report_theme()
    fig, axes = plt.subplots(1, len(ROLES), figsize=(11, 3.4), sharey=True)
    palette = _palette(list(telemetry))
    for ax, role in zip(axes, ROLES, strict=True):
        for observer, rows in telemetry.items():
            mine = rows[(rows["role"] == role) & ~rows["cold_start"].astype(bool)]
            if mine.empty:
                continue
            per_step = mine.groupby("step")["overflow"].mean().rolling(5, min_periods=1).mean()
            ax.plot(per_step.index, per_step, color=palette[observer], label=observer)
        ax.axvline(warmup_steps, color="grey", linestyle=":", linewidth=1)
        ax.set(xlabel="step", ylabel="saturating layers (fraction)", title=role, ylim=(-0.02, 1.02))
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_downstream(summary: Mapping[str, Any]) -> plt.Figure:
    """Heatmap of relative drops vs BF16 at the same learning rate (caption ``downstream``)."""
    def percent(drop: Mapping[str, float | None]) -> dict[str, float]:
        return {METRIC_LABELS[m]: math.nan if drop[m] is None else 100 * drop[m] for m, *_ in METRICS}

    rows = [{"model": f"{r['run']} ({label})", **percent(r[key])} for r in summary["runs"]
            for key, label in (("drop", "BF16"), ("drop_hif8", "HiF8"))]
    table = pd.DataFrame(rows).set_index("model")
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(table) + 1.2))
    limit = max(1.0, float(np.nanmax(table.abs().to_numpy())))
    sns.heatmap(table, annot=True, fmt=".1f", cmap="RdBu_r", center=0, vmin=-limit, vmax=limit, ax=ax,
                annot_kws={"fontsize": 6}, cbar_kws={"label": "relative drop vs BF16 (%)"})
    ax.set(xlabel="", ylabel="")
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def plot_forgetting(summary: Mapping[str, Any]) -> plt.Figure:
    """Pretraining-corpus vs shift-corpus perplexity per model (caption ``forgetting``)."""
    rows = [{"shift": r["metrics"]["shift_perplexity"], "pretrain": r["metrics"]["pretrain_perplexity"],
             "observer": r["observer"] or "BF16", "learning rate": r["rate"]} for r in summary["runs"]]
    frame = pd.DataFrame(rows)
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sns.scatterplot(frame, x="shift", y="pretrain", hue="observer", style="learning rate", s=50, ax=ax)
    ax.scatter([summary["base"]["shift_perplexity"]], [summary["base"]["pretrain_perplexity"]], marker="*", s=160,
               color="black", label="base model")
    ax.set(xscale="log", yscale="log", xlabel="shift-corpus perplexity (learning)",
           ylabel="pretraining-corpus perplexity (forgetting)")
    ax.legend(fontsize=7)
    return fig


def plot_observer_study(cell: Mapping[str, Any],
                        kinds: Sequence[str] = ("spikes", "oscillation", "drift")) -> plt.Figure:
    """Synthetic traces and each observer's prediction (caption ``observer-study``)."""
    set_report_theme()
    fig, grid = plt.subplots(len(kinds), 1, figsize=(8, 2.4 * len(kinds)), sharex=True, squeeze=False)
    axes = grid[:, 0]
    observers = list(cell["traces"][kinds[0]]["prediction"])
    palette = _palette(observers)
    for ax, kind in zip(axes, kinds, strict=True):
        trace = cell["traces"][kind]
        ax.plot(trace["amax"], color="black", linewidth=1.4, label="amax")
        for name in observers:
            ax.plot(trace["prediction"][name], color=palette[name], linewidth=0.9, label=name,
                    linestyle=":" if name == "current" else "-")
        ax.set(ylabel="amax", title=kind, yscale="log" if kind == "spikes" else "linear")
    axes[0].legend(fontsize=7, ncol=5)
    axes[-1].set(xlabel="step")
    fig.tight_layout()
    return fig


PLOTS = {"loss-curves": plot_loss_curves, "saturation": plot_saturation, "downstream": plot_downstream,
         "forgetting": plot_forgetting, "observer-study": plot_observer_study}
check_figures(__name__, FIGURES, PLOTS, CAPTIONS)
