"""The paper's figures (seaborn): ``plot_*`` draws one figure from a summary artifact and returns it (the
notebook shows it), ``*_figure`` saves it as PNG and PDF atomically with byte-stable metadata. Regions A and B
are shaded from the summary's detected sigmas. :data:`PLOTS` and :data:`CAPTIONS` by figure kind
(``settings.FIGURES``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from common.report.figures import check_figures, lookup_caption, save_figure, set_report_theme

from .claims import HEURISTICS
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
    "gap": "Perplexity gap to the unquantized model vs block size, the MLP linears' weights and activations "
           "fake-quantized to E2M1, one line per scale format and rule.",
}


def caption(figure_id: str) -> str:
    """The caption of a figure from its id (``mse-<scale>-<variant>``, ``brute-force-ratio-<scale>``,
    ``gap-<model>``: ``"<detail>: "`` and its kind's caption), ValueError for an unknown id."""
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


def gap_figure(summary: Mapping[str, Any], png: Path, pdf: Path) -> None:
    """:func:`plot_gap` saved as ``png`` and ``pdf``."""
    save_figure(plot_gap(summary), png, pdf)


def plot_gap(summary: Mapping[str, Any]) -> plt.Figure:
    """Perplexity gap to the unquantized model vs block size, a line per (scale, variant)."""
    rows = pd.DataFrame.from_records(summary["rows"])
    rows["setting"] = rows["scale"].str.upper() + " " + rows["variant"]
    set_report_theme()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sns.lineplot(rows, x="block_size", y="gap", hue="setting", marker="o", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="block size", ylabel="perplexity gap",
           title=f"{summary['model']}: MLP weights + activations in E2M1 (unquantized ppl {summary['perplexity']:.2f})")
    ax.legend(fontsize=7)
    return fig


PLOTS = {"mse": plot_mse, "brute-force-ratio": plot_brute_force_ratio, "gap": plot_gap}
check_figures(__name__, FIGURES, PLOTS, CAPTIONS)
