"""The paper's figures (seaborn): ``plot_*`` draws one figure from a summary artifact and returns it (the
notebook shows it), ``*_figure`` saves it as PNG and PDF atomically with byte-stable metadata. Regions A and B
are shaded from the summary's detected sigmas. :data:`PLOTS` and :data:`CAPTIONS` by figure kind
(``settings.FIGURES``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from common.report.figures import check_figures, lookup_caption, save_figure, set_report_theme
from common.uncertainty import Evidence

from .claims import HEURISTICS, point_ratios, sweeps_of
from .model_study import OPERANDS, OUR_EXTENSIONS
from .numerical import curves, table_from_summary
from .settings import FIGURES

REGION_STYLE = {"A": ("#d62728", "Region A (scale underflow)"),
                "B": ("#1f77b4", "Region B (reversal with prevent-zero)")}
Path = str | os.PathLike[str]
CAPTIONS = {
    "mse": "Relative MSE (MSE / sigma^2) of FP4 E2M1 block quantization of Normal(0, sigma^2) data vs sigma for one "
           "block scale format and scale-selection variant (named before the colon), one line per block size. "
           "Shaded: Region A (abs-max scale underflow) and Region B (the reversal that survives prevent-zero), "
           "detected from the data by the rules in Table 1.",
    "brute-force-ratio": "MSE of each scale-selection heuristic divided by brute force's (the best single "
                         "representable scale per block, in the scale format named before the colon) at the smallest "
                         "block size; 1 is optimal.",
    "sweep": "The sweep of the source model and the operands named before the colon (w: weights only, our extension: "
             "the authors' repository has no weights-only run; wa: weights and activations, the paper's setting): "
             "ppl(4)/ppl(16) - 1 of each scale rule vs the sweep point's weight sigma (the median "
             "over the quantized gate/up projections), with its 95% paired-bootstrap interval over the evaluation "
             "windows. Above 0 a smaller block is worse (the U-shape). Shaded: the numerical study's Regions A and B. "
             "Every point computes the same function; only the weights' scale differs.",
}


def caption(figure_id: str) -> str:
    """The caption of a figure from its id (``mse-<scale>-<variant>``, ``brute-force-ratio-<scale>``,
    ``sweep-<model>-<operands>``: ``"<detail>: "`` and its kind's caption), ValueError for an unknown id."""
    return lookup_caption(CAPTIONS, figure_id)


def shade_regions(ax: plt.Axes, regions: Mapping[str, Any], grid: list[float]) -> None:
    """Shade each region's intervals, extended half a grid step on both sides (log scale)."""
    step = (grid[1] / grid[0]) ** 0.5 if len(grid) > 1 else 1.0
    for name, (color, label) in REGION_STYLE.items():
        for i, (low, high) in enumerate(regions[name]["intervals"]):
            ax.axvspan(low / step, high * step, color=color, alpha=0.12, label=label if i == 0 else None, lw=0)


def mse_figure(summary: Mapping[str, Any], scale: str, variant: str, png: Path, pdf: Path) -> None:
    """:func:`plot_mse` saved as ``png`` and ``pdf``."""
    save_figure(plot_mse(summary, scale, variant), png, pdf)


def plot_mse(summary: Mapping[str, Any], scale: str, variant: str) -> plt.Figure:
    """Relative MSE (MSE / sigma^2) vs sigma of one (scale, variant), a line per block size, regions shaded."""
    data = curves(table_from_summary(summary), scale, variant, "relative_mse")
    long = data.reset_index().melt(id_vars="sigma", var_name="block size", value_name="relative MSE")
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sns.lineplot(long, x="sigma", y="relative MSE", hue="block size", palette="viridis", marker="o", markersize=3,
                 ax=ax)
    shade_regions(ax, summary["regions"], sorted(data.index))
    ax.set(xscale="log", yscale="log", xlabel=r"$\sigma$ of Normal(0, $\sigma^2$) data",
           ylabel=r"MSE / $\sigma^2$", title=f"E2M1 elements, {scale.upper()} scales, {variant}")
    ax.legend(fontsize=7, loc="lower left")
    return fig


def brute_force_ratio_figure(summary: Mapping[str, Any], scale: str, png: Path, pdf: Path) -> None:
    """:func:`plot_brute_force_ratio` saved as ``png`` and ``pdf``."""
    save_figure(plot_brute_force_ratio(summary, scale), png, pdf)


def plot_brute_force_ratio(summary: Mapping[str, Any], scale: str) -> plt.Figure:
    """MSE of each heuristic over brute force's vs sigma at the smallest block size (1 = optimal)."""
    table = table_from_summary(summary)
    brute = curves(table, scale, "brute_force")
    block = brute.columns[0]
    frames = [pd.DataFrame({"sigma": brute.index, "variant": v,
                            "ratio": curves(table, scale, v)[block] / brute[block]}) for v in HEURISTICS]
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sns.lineplot(pd.concat(frames), x="sigma", y="ratio", hue="variant", marker="o", markersize=3, ax=ax)
    shade_regions(ax, summary["regions"], sorted(brute.index))
    ax.set(xscale="log", yscale="log", xlabel=r"$\sigma$", ylabel="MSE / brute-force MSE",
           title=f"Heuristics vs the optimal single scale, block {block}, {scale.upper()} scales")
    ax.legend(fontsize=7)
    return fig


def sweep_figure(numerical: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]], operands: str,
                 evidence: Evidence, png: Path, pdf: Path) -> None:
    """:func:`plot_sweep` saved as ``png`` and ``pdf``."""
    save_figure(plot_sweep(numerical, summaries, operands, evidence), png, pdf)


def plot_sweep(numerical: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]], operands: str,
               evidence: Evidence) -> plt.Figure:
    """``ppl(4)/ppl(16) - 1`` (with its 95% paired-bootstrap interval) of every scale rule vs the sweep point's
    weight sigma, the numerical study's Regions A/B shaded; above 0 a smaller block is worse."""
    (sweep,) = sweeps_of(summaries, numerical)
    rows = pd.DataFrame.from_records(point_ratios(sweep, operands, evidence))
    rows["setting"] = rows["scale"].str.upper() + " " + rows["variant"]
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for setting, part in rows.groupby("setting", sort=False):
        part = part.sort_values("sigma")
        line = ax.plot(part["sigma"], part["value"], marker="o", markersize=3, label=setting)[0]
        ax.fill_between(part["sigma"], part["low"], part["high"], color=line.get_color(), alpha=0.15, lw=0)
    shade_regions(ax, numerical["regions"], sorted(table_from_summary(numerical)["sigma"].unique()))
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set(xscale="log", xlabel=r"weight $\sigma$ of the quantized linears (sweep point)",
           ylabel=r"$\mathrm{ppl}(4)/\mathrm{ppl}(16) - 1$",
           title=f"{sweep.source} sweep, {OPERANDS[operands]} in E2M1"
                 + (f"\n({OUR_EXTENSIONS[operands]})" if operands in OUR_EXTENSIONS else ""))
    ax.legend(fontsize=7)
    return fig


PLOTS = {"mse": plot_mse, "brute-force-ratio": plot_brute_force_ratio, "sweep": plot_sweep}
check_figures(__name__, FIGURES, PLOTS, CAPTIONS)
