"""The paper's figures (seaborn): ``plot_*`` draws one figure from the study summary and returns it (the notebook
shows it); ``python -m papers.winq figure <id>`` saves it as PNG and PDF (:func:`common.report.figures.save_figure`).
:data:`PLOTS` and :data:`CAPTIONS` by figure kind (``settings.FIGURES``).

Spectral densities are drawn from the Ritz values ``theta`` and weights ``tau`` of stochastic Lanczos quadrature
(the cell's ``nodes`` and ``weights``): the ``tau``-weighted histogram over :data:`BINS` equal bins spanning the
spectra of the panel, on a log mass axis (the kernel density of the cell, sigma 1e-3 on 400 grid points across the
whole spectrum, is sharper than the grid spacing and would miss most Ritz values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from common.report.figures import check_figures, lookup_caption, set_report_theme

from .settings import FIGURES

CAPTIONS = {
    "curves": "Validation perplexity of the quantized model during QAT, per setting and method (same step budget, "
              "learning-rate schedule and data order). The dotted line is the baseline's final validation perplexity: "
              "the step where a curve first reaches it gives the speedup.",
    "final": "Test perplexity of every checkpoint-quantized model (packed codes and learned scales) at equal budget, "
             "per setting and method; the line is the full-precision base model.",
    "spectra": "Hessian spectral density (stochastic Lanczos quadrature over the quantized layers' latent weights) of "
               "the baseline QAT models per bit width: the Ritz-value weights as a histogram of equal eigenvalue "
               "bins, log mass axis; the bin around zero holds the near-zero mass.",
    "spectra-winq": "Hessian spectral density of the baseline and the WinQ model of each setting (as in the spectra "
                    "figure).",
    "hessian-stats": "Fraction of the Hessian spectrum near zero (|eigenvalue| within the threshold, a fixed "
                     "fraction of the largest |eigenvalue|) and the largest |eigenvalue| per weight bit width, "
                     "baseline vs WinQ.",
}
BINS = 60


def caption(figure_id: str) -> str:
    """The caption of a figure file stem (:func:`common.report.figures.lookup_caption`; ValueError naming an
    unknown one)."""
    return lookup_caption(CAPTIONS, figure_id)


def _palette(names: Sequence[str]) -> dict[str, Any]:
    return dict(zip(names, sns.color_palette("tab10", len(names)), strict=True))


def _grid(count: int) -> tuple[plt.Figure, np.ndarray]:
    columns = min(3, count)
    rows = math.ceil(count / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.4 * columns, 2.8 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, axes.flat


def plot_curves(summary: Mapping[str, Any]) -> plt.Figure:
    """Validation perplexity vs steps, one panel per setting (caption ``curves``)."""
    set_report_theme()
    palette = _palette(summary["methods"])
    fig, axes = _grid(len(summary["settings"]))
    for ax, setting in zip(axes, summary["settings"], strict=False):
        for method in summary["methods"]:
            curve = summary["curves"][f"{setting}-{method}"]
            ax.plot(curve["steps"], curve["perplexity"], marker=".", color=palette[method], label=method)
        target = summary["curves"][f"{setting}-baseline"]["perplexity"][-1]
        ax.axhline(target, color="black", linestyle=":", linewidth=1)
        ax.set(title=setting, xlabel="step", ylabel="validation perplexity")
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_final(summary: Mapping[str, Any]) -> plt.Figure:
    """Test perplexity per setting and method, base model as a line (caption ``final``)."""
    set_report_theme()
    methods, settings = summary["methods"], summary["settings"]
    palette = _palette(methods)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(settings) + 2), 3.6))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        values = [next(r for r in summary["runs"] if r["run"] == f"{s}-{method}")["metrics"]["perplexity"]
                  for s in settings]
        ax.bar(np.arange(len(settings)) + (i - (len(methods) - 1) / 2) * width, values, width, label=method,
               color=palette[method])
    ax.axhline(summary["base"]["perplexity"], color="black", linestyle="--", linewidth=1, label="full precision")
    ax.set_xticks(np.arange(len(settings)), settings)
    ax.set(ylabel="test perplexity", yscale="log")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    return fig


def _ritz(cell: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """All Ritz values of a cell and their weights ``tau / probes`` (summing to 1)."""
    theta = np.concatenate([np.asarray(n, dtype=float) for n in cell["nodes"]])
    tau = np.concatenate([np.asarray(w, dtype=float) for w in cell["weights"]]) / len(cell["nodes"])
    return theta, tau


def spectrum_edges(cells: Sequence[Mapping[str, Any]], bins: int = BINS) -> np.ndarray:
    """``bins`` equal bins spanning every Ritz value of ``cells`` (a range of 1 around a single value)."""
    theta = np.concatenate([_ritz(cell)[0] for cell in cells])
    low, high = float(theta.min()), float(theta.max())
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, bins + 1)


def _spectra_axes(ax: plt.Axes, cells: Mapping[str, Mapping[str, Any]], palette: Mapping[str, Any]) -> None:
    edges = spectrum_edges(list(cells.values()))
    for label, cell in cells.items():
        theta, tau = _ritz(cell)
        mass, _ = np.histogram(theta, bins=edges, weights=tau)
        ax.stairs(mass, edges, color=palette[label], label=label, linewidth=1.4)
    ax.set_yscale("log")
    ax.set(xlabel="eigenvalue", ylabel="spectral mass per bin")


def plot_spectra(summary: Mapping[str, Any]) -> plt.Figure:
    """Spectral density of the baseline models per bit width (caption ``spectra``)."""
    set_report_theme()
    cells = {f"{h['setting']} (W{h['bits']:g})": h for h in summary["hessian"] if h["method"] == "baseline"}
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    _spectra_axes(ax, cells, _palette(list(cells)))
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_spectra_winq(summary: Mapping[str, Any]) -> plt.Figure:
    """Baseline vs WinQ spectral density per setting (caption ``spectra-winq``)."""
    set_report_theme()
    by_run = {h["run"]: h for h in summary["hessian"]}
    settings = [s for s in summary["settings"] if f"{s}-baseline" in by_run and f"{s}-winq" in by_run]
    fig, axes = _grid(max(1, len(settings)))
    palette = _palette(["baseline", "winq"])
    for ax, setting in zip(axes, settings, strict=False):
        _spectra_axes(ax, {m: by_run[f"{setting}-{m}"] for m in ("baseline", "winq")}, palette)
        ax.set_title(setting)
    if settings:
        axes[0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_hessian_stats(summary: Mapping[str, Any]) -> plt.Figure:
    """Near-zero mass and largest |eigenvalue| per bit width, baseline vs WinQ (caption ``hessian-stats``)."""
    set_report_theme()
    fig, (near, largest) = plt.subplots(1, 2, figsize=(8.4, 3.4))
    methods = sorted({h["method"] for h in summary["hessian"]}, key=summary["methods"].index)
    palette = _palette(methods)
    for method in methods:
        for a8, marker, suffix in ((False, "o", ""), (True, "s", " A8")):
            rows = sorted((h for h in summary["hessian"] if h["method"] == method
                           and (h["activation_bits"] is not None) == a8), key=lambda h: h["bits"])
            if not rows:
                continue
            bits = [h["bits"] for h in rows]
            style = {"color": palette[method], "marker": marker, "linestyle": "--" if a8 else "-",
                     "label": method + suffix}
            near.plot(bits, [h["near_zero_mass"] for h in rows], **style)
            largest.plot(bits, [h["largest_abs_eigenvalue"] for h in rows], **style)
    near.set(xlabel="weight bits", ylabel="near-zero spectral mass")
    largest.set(xlabel="weight bits", ylabel="largest |eigenvalue|", yscale="log")
    near.legend(fontsize="small")
    fig.tight_layout()
    return fig


PLOTS = {"curves": plot_curves, "final": plot_final, "spectra": plot_spectra, "spectra-winq": plot_spectra_winq,
         "hessian-stats": plot_hessian_stats}
check_figures(__name__, FIGURES, PLOTS, CAPTIONS)
