"""The paper's figures (seaborn): ``plot_*`` draws one figure from artifacts and returns it (the notebook shows
it); ``python -m papers.microscaling_limits figure ...`` saves it as PNG and PDF
(:func:`common.report.figures.save_figure`). :data:`PLOTS` and :data:`CAPTIONS` by figure kind
(``settings.FIGURES``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullFormatter, PercentFormatter

from common.report.figures import check_figures, lookup_caption, set_report_theme

from .settings import FIGURES

PARTS = ("non_max", "max_element", "zero_blocks")
CAPTIONS = {
    "theory-vs-simulation": "Relative MSE (MSE / sigma^2) vs sigma: our exact analytic model (lines, Normal data) "
                            "and Monte Carlo simulation (points, 2^20 samples) for each block size (an "
                            "implementation check).",
    "parts": "The three contributions of the theory's MSE (non-max elements, the max element, whole blocks "
             "rounded to zero) vs sigma.",
    "fit": "Implementation check: our exact model / simulation - 1 at every simulated point (chi2 = mean squared "
           "difference of MSE / sigma^2).",
    "crossovers": "The theory's crossover sigma below which block n is worse than 2n, per scale format, with the "
                  "sigma range of each model's weight tensors (shaded).",
    "paper-model": "The paper's analytic model (dashed: the other elements Normal truncated at +-6s, s the quantized "
                   "scale) and ours (solid: conditioned on the block max) against simulation (points, 2^20 samples) "
                   "on the authors' sigma grid: top, MSE / sigma^2; bottom, model / simulation - 1 with the "
                   "simulation's 95% band (grey).",
    "tensors": "Every linear weight tensor: measured block MSE vs the theory's prediction from its fitted sigma.",
    "gap": "Perplexity gap to the unquantized model vs block size with UE4M3, UE4M3-S (per-tensor scale) and UE5M3 "
           "block scales (weights and activations of every block Linear in E2M1).",
    "sweep": "The function-preserving sweep: left, ppl(n) / ppl(2n) - 1 with the moved weights in FP4 vs their median "
             "sigma (95% paired bootstrap intervals; above 0: the inversion), with the pre-registered crossover "
             "sigma* of the paper's model (dashed) and of ours (dotted); right, the relative perplexity gap to the "
             "unquantized model at block n, weights only (solid) and weights plus activations (dashed).",
}


def caption(figure_id: str) -> str:
    """Caption from a figure id ``<kind>[-<detail>]``: ``"<detail>: "`` and its kind's caption (ValueError naming an
    unknown id)."""
    return lookup_caption(CAPTIONS, figure_id)


def plot_theory_vs_simulation(theory: Mapping[str, Any], validation: Mapping[str, Any]) -> plt.Figure:
    """MSE / sigma^2 vs sigma for one scale: theory lines (Normal data) and simulation points, per block size."""
    scale = theory["scale"]
    curves = pd.DataFrame(theory["rows"]).query("dist == 'normal'")
    points = pd.DataFrame(validation["points"]).query("scale == @scale")
    curves = curves[curves["block_size"].isin(points["block_size"].unique())]
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    blocks = sorted(curves["block_size"].unique())
    palette = dict(zip(blocks, sns.color_palette("viridis", len(blocks)), strict=True))
    for n, part in curves.groupby("block_size"):
        ax.plot(part["sigma"], part["total"] / part["sigma"] ** 2, color=palette[n], label=f"theory, n={n}")
    for n, part in points.groupby("block_size"):
        ax.scatter(part["sigma"], part["simulation"] / part["sigma"] ** 2, color=palette[n], s=10, marker="o",
                   edgecolor="black", linewidth=0.3)
    ax.set(xscale="log", yscale="log", xlabel=r"$\sigma$", ylabel=r"MSE / $\sigma^2$",
           title=f"E2M1 with {scale.upper()} scales: theory (lines) vs simulation (points)")
    ax.legend(fontsize=7, loc="lower left")
    return fig


def plot_parts(theory: Mapping[str, Any], block_size: int) -> plt.Figure:
    """The three contributions (non-max, max element, zero blocks) of the theory's MSE vs sigma at one block size."""
    rows = pd.DataFrame(theory["rows"]).query("dist == 'normal' and block_size == @block_size")
    long = rows.melt(id_vars="sigma", value_vars=list(PARTS), var_name="part", value_name="mse")
    long["relative"] = (long["mse"] / long["sigma"] ** 2).where(long["mse"] > 0)  # log axis: zero parts are gaps
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sns.lineplot(long, x="sigma", y="relative", hue="part", ax=ax)
    ax.set(xscale="log", yscale="log", ylim=(1e-6, 2), xlabel=r"$\sigma$", ylabel=r"contribution / $\sigma^2$",
           title=f"Where the error comes from: {theory['scale'].upper()}, block {block_size}")
    return fig


def plot_fit(validation: Mapping[str, Any]) -> plt.Figure:
    """Fit quality: theory / simulation - 1 at every simulated point, per scale and block size."""
    points = pd.DataFrame(validation["points"])
    points["signed error"] = points["theory"] / points["simulation"] - 1
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sns.scatterplot(points, x="sigma", y="signed error", hue="block_size", style="scale", palette="viridis", s=14,
                    ax=ax)
    ax.set(xscale="log", xlabel=r"$\sigma$", ylabel="theory / simulation - 1",
           title="; ".join(f"{s.upper()}: chi2 {f['chi2']:.1e}, max |err| {f['max_relative_error']:.2%}"
                           for s, f in validation["fits"].items()))
    ax.axhline(0, color="black", lw=0.6)
    return fig


def plot_crossovers(validation: Mapping[str, Any], tensors: Sequence[Mapping[str, Any]]) -> plt.Figure:
    """The theory's crossover sigma (below it block n is worse than 2n) per block size and scale, with the sigma
    range of every model's weight tensors."""
    rows = pd.DataFrame([c for c in validation["crossovers"] if c["sigma"] is not None])
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    if not rows.empty:
        sns.lineplot(rows, x="block_size", y="sigma", hue="scale", marker="o", ax=ax)
    for i, cell in enumerate(tensors):
        stds = [t["std"] for t in cell["tensors"]]
        ax.axhspan(min(stds), max(stds), alpha=0.12, color=sns.color_palette("Set2")[i % 8],
                   label=f"{cell['model']} weight sigmas")
    ax.set(xscale="log", yscale="log", xlabel="block size n", ylabel=r"crossover $\sigma$ (n worse than 2n below)",
           title="Where finer stops being better")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7)
    return fig


MODEL_STYLES = {"exact": ("our model (exact)", "-"), "paper": ("the paper's model", "--")}
# the pre-registered sigma* lines: sweep summary key suffix -> (model, line style)
SIGMA_STARS = {"_paper": ("the paper's model", "--"), "": ("our exact model", ":")}


def plot_paper_model(comparison: Mapping[str, Any], scale: str, blocks: Sequence[int]) -> plt.Figure:
    """Both analytic models and the simulation on the authors' grid (``paper_model/comparison.json``,
    :func:`.analytic_models.compare`) for one scale, one column per block size of ``blocks``: MSE / sigma^2 (top)
    and ``model / simulation - 1`` with the simulation's 95% band ``+-1.96`` relative standard errors (bottom);
    the smallest sigma (1e-4, where every block rounds to zero) is left out of the linear axis."""
    points = pd.DataFrame(comparison["points"]).query("scale == @scale and sigma >= 1e-3")
    set_report_theme()
    fig, axes = plt.subplots(2, len(blocks), figsize=(3.6 * len(blocks), 5.6), sharex=True, squeeze=False,
                             layout="constrained", gridspec_kw={"height_ratios": (3, 2)})
    for column, n in enumerate(blocks):
        top, bottom = axes[0, column], axes[1, column]
        part = points[points["block_size"] == n].sort_values("sigma")
        relative = part["simulation"] / part["sigma"] ** 2
        top.errorbar(part["sigma"], relative, yerr=1.96 * part["relative_se"] * relative, color="black", fmt="o",
                     ms=2.5, lw=0.6, label="simulation")
        band = 1.96 * part["relative_se"]
        bottom.fill_between(part["sigma"], -band, band, color="grey", alpha=0.3, lw=0)
        for model, (label, style) in MODEL_STYLES.items():
            top.plot(part["sigma"], part[model] / part["sigma"] ** 2, ls=style, label=label)
            bottom.plot(part["sigma"], part[f"{model}_error"], ls=style, label=label)
        bottom.axhline(0, color="black", lw=0.6)
        top.set(title=f"{scale.upper()}, n = {n}", yscale="log", ylabel=r"MSE / $\sigma^2$" if column == 0 else "")
        bottom.set(xlabel=r"$\sigma$", ylabel="model / simulation - 1" if column == 0 else "")
        bottom.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes[0, 0].legend(fontsize=7)
    return fig


def plot_tensors(cell: Mapping[str, Any]) -> plt.Figure:
    """Measured vs predicted MSE of every weight tensor of one model, per scale and block size."""
    rows = pd.DataFrame(cell["rows"])
    set_report_theme()
    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    sns.scatterplot(rows, x="predicted_mse", y="mse", hue="block_size", style="scale", palette="viridis", s=16, ax=ax)
    low, high = rows[["mse", "predicted_mse"]].min().min(), rows[["mse", "predicted_mse"]].max().max()
    ax.plot([low, high], [low, high], color="black", lw=0.6)
    ax.set(xscale="log", yscale="log", xlabel="theory (Normal with the tensor's sigma)", ylabel="measured MSE",
           title=f"{cell['model']}: weight tensors, measured vs predicted")
    ax.legend(fontsize=6)
    return fig


def plot_gap(summary: Mapping[str, Any]) -> plt.Figure:
    """Perplexity gap vs block size per scale variant."""
    rows = pd.DataFrame(summary["rows"])
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sns.lineplot(rows, x="block_size", y="gap", hue="variant", marker="o", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="block size", ylabel="perplexity gap",
           title=f"{summary['model']}: W+A FP4 (E2M1), unquantized ppl {summary['perplexity']:.2f}")
    return fig


def plot_sweep(summary: Mapping[str, Any]) -> plt.Figure:
    """The sweep (``sweep/summary.json``): per variant ``ppl(n) / ppl(2n) - 1`` vs the points' sigma with its
    interval and the pre-registered crossovers in range; ``ppl / ppl(unquantized) - 1`` at block n per variant
    and mode (symmetric log axis: linear within 0.1%)."""
    n, m = summary["pair"]
    ratios, cells = pd.DataFrame(summary["ratios"]), pd.DataFrame(summary["cells"])
    sigmas = [p["sigma"] for p in summary["points"]]
    set_report_theme()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.2), layout="constrained")
    palette = dict(zip(("ue4m3", "ue4m3s", "ue5m3"), sns.color_palette("deep", 3), strict=True))
    for variant, part in ratios.groupby("variant", sort=False):
        part = part.sort_values("sigma")
        left.errorbar(part["sigma"], part["value"], yerr=[part["value"] - part["low"], part["high"] - part["value"]],
                      color=palette[variant], marker="o", capsize=3, label=variant)
    for suffix, (model, style) in SIGMA_STARS.items():
        for scale, sigma in summary.get(f"crossover{suffix}", {}).items():
            if sigma is not None and min(sigmas) / 2 <= sigma <= max(sigmas) * 2:
                left.axvline(sigma, color=palette[scale], ls=style, lw=1, label=rf"$\sigma^*$ {scale} ({model})")
    left.axhline(0, color="black", lw=0.6)
    left.set(xscale="log", xlabel=r"median $\sigma$ of the moved weights", ylabel=f"ppl(b{n}) / ppl(b{m}) - 1",
             title=f"Block {n} vs {m}, weights in FP4")
    left.legend(fontsize=7)
    at_n = cells[cells["block_size"] == n].sort_values("sigma")
    for (variant, activations), part in at_n.groupby(["variant", "activations"]):
        right.plot(part["sigma"], part["gap"], color=palette[variant], marker="o", ls="--" if activations else "-",
                   label=f"{variant} {'W+A' if activations else 'W'}")
    right.set_yscale("symlog", linthresh=1e-3)
    right.set(xscale="log", xlabel=r"median $\sigma$ of the moved weights", ylabel="ppl / ppl(unquantized) - 1",
              title=f"Block {n}")
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.xaxis.set_minor_formatter(NullFormatter())
    return fig


PLOTS = {"theory-vs-simulation": plot_theory_vs_simulation, "parts": plot_parts, "fit": plot_fit,
         "crossovers": plot_crossovers, "paper-model": plot_paper_model, "tensors": plot_tensors, "gap": plot_gap,
         "sweep": plot_sweep}
check_figures(__name__, FIGURES, PLOTS, CAPTIONS)
