"""The paper's figures (seaborn): ``plot_*`` draws one figure from the study summary and returns it (the notebook
shows it); ``python -m papers.winq figure <id>`` saves it as PNG and PDF (:func:`common.report.figures.save_figure`).
:data:`PLOTS` and :data:`CAPTIONS` by figure kind (``settings.FIGURES``).

Seeds: a curve is the mean over a run's seeds (the diagnostics: over its seeds with records) with a band of +-1
sample sd (none for a run of one seed, which only the figures use); a bar the seed mean with the seeds as dots.
Spectral densities are drawn from the Ritz values ``theta`` and weights ``tau`` of stochastic Lanczos quadrature (the
cells' ``nodes`` and ``weights``, every seed of a run pooled): the ``tau``-weighted histogram over :data:`BINS` equal
bins spanning the spectra of the panel, on a log mass axis (the kernel density of the cell, sigma 1e-3 on 400 grid
points across the whole spectrum, is sharper than the grid spacing and would miss most Ritz values).
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
from .study import mean_curve, row_of

CAPTIONS = {
    "curves": "Validation perplexity of the quantized model during QAT, per setting and method (same step budget, "
              "learning-rate schedule and data order per seed): the mean over the run's seeds, the band +-1 sample sd "
              "where it has several (runs only the figures use have one seed). The dotted line is the baseline's "
              "final validation perplexity (seed mean): the step where a curve first reaches it gives the speedup.",
    "grad-norm": "Gradient norm per optimizer step (total norm before clipping, a moving average over 1/40 of the "
                 "run) of the baseline and WinQ in every setting that has both: the mean over seeds, the band +-1 "
                 "sample sd over seeds (one seed: no band). A stagnating baseline flattens toward zero.",
    "diagnostics": "What the interpolation does and the authors' stagnation statistic during QAT, one row per setting "
                   "and a line per method (the mean over the run's seeds, the band +-1 sample sd where it has "
                   "several). Left: the share of integer codes that changed over each interpolation period, at its "
                   "end (steps K, 2K, ...; the methods without interpolation are measured at the same steps). Middle: "
                   "the share of latent weights within the next period's travel (the learning rate summed over it) "
                   "of a code boundary, right before and right after each boundary: the vertical step at a boundary "
                   "is what the interpolation did (none without one), the line between two boundaries joins the "
                   "period's ends. Right: the relative gradient norm ||grad_W L|| / ||W|| of the quantized weights at "
                   "every evaluation, on fixed training batches (log axis).",
    "final": "Test perplexity of every checkpoint-quantized model (packed codes and learned scales) at equal budget, "
             "per setting and method: the bar is the mean over the run's seeds, the dots the seeds (runs only the "
             "figures use have one seed); the line is the full-precision base model.",
    "spectra": "Hessian spectral density (stochastic Lanczos quadrature over the quantized layers' latent weights) of "
               "the baseline QAT models per bit width, the Ritz values of every seed pooled: the Ritz-value weights "
               "as a histogram of equal eigenvalue bins, log mass axis; the bin around zero holds the near-zero "
               "mass.",
    "spectra-methods": "Hessian spectral density of every method with a spectrum in each setting (as in the spectra "
                       "figure, seeds pooled): the baseline, WinQ and the two ablations.",
    "hessian-stats": "Fraction of the Hessian spectrum near zero at the paper's absolute threshold (|eigenvalue| < "
                     "1e-3) and the largest |eigenvalue| per weight bit width and method: the mean over seeds, the "
                     "bars the range of the seeds.",
}
BINS = 60
SMOOTHING = 40  # the gradient-norm figure's moving average: 1 / SMOOTHING of the run


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


def _run_cells(summary: Mapping[str, Any], run: str) -> list[str]:
    return [c["cell"] for c in summary["cells"] if c["run"] == run]


def _band(ax: plt.Axes, steps: Sequence[float], curves: Sequence[Sequence[float]], color: Any, label: str,
          marker: str | None = None) -> None:
    mean, sd = mean_curve(curves)
    ax.plot(steps, mean, color=color, label=label, marker=marker)
    if len(curves) > 1:
        ax.fill_between(steps, mean - sd, mean + sd, color=color, alpha=0.2, linewidth=0)


def _methods_of(summary: Mapping[str, Any], setting: str) -> list[str]:
    return [m for m in summary["methods"] if any(r["run"] == f"{setting}-{m}" for r in summary["runs"])]


def plot_curves(summary: Mapping[str, Any]) -> plt.Figure:
    """Validation perplexity vs steps, one panel per setting, seed means with bands (caption ``curves``)."""
    set_report_theme()
    palette = _palette(summary["methods"])
    fig, axes = _grid(len(summary["settings"]))
    for ax, setting in zip(axes, summary["settings"], strict=False):
        for method in _methods_of(summary, setting):
            cells = _run_cells(summary, f"{setting}-{method}")
            curves = [summary["curves"][c]["perplexity"] for c in cells]
            _band(ax, summary["curves"][cells[0]]["steps"], curves, palette[method], method, ".")
        ax.axhline(row_of(summary, f"{setting}-baseline")["final_val_perplexity"], color="black", linestyle=":",
                   linewidth=1)
        ax.set(title=setting, xlabel="step", ylabel="validation perplexity")
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """The trailing moving average over ``window`` steps (fewer at the start)."""
    data = np.asarray(values, dtype=np.float64)
    sums = np.cumsum(np.concatenate([[0.0], data]))
    ends = np.arange(1, data.size + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


def plot_grad_norm(summary: Mapping[str, Any]) -> plt.Figure:
    """Gradient norm per step, baseline vs WinQ per setting, seed means with bands (caption ``grad-norm``)."""
    set_report_theme()
    settings = [s for s in summary["settings"] if {"baseline", "winq"} <= set(_methods_of(summary, s))]
    palette = _palette(["baseline", "winq"])
    fig, axes = _grid(max(1, len(settings)))
    for ax, setting in zip(axes, settings, strict=False):
        window = max(1, row_of(summary, f"{setting}-baseline")["max_steps"] // SMOOTHING)
        for method in ("baseline", "winq"):
            cells = _run_cells(summary, f"{setting}-{method}")
            curves = [moving_average(summary["grad_norms"][c], window) for c in cells]
            _band(ax, np.arange(1, len(curves[0]) + 1), curves, palette[method],
                  f"{method} ({len(cells)} seed{'s' * (len(cells) > 1)})")
        ax.set(title=setting, xlabel="step", ylabel="gradient norm", yscale="log")
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def boundary_steps(mechanism: Mapping[str, Any]) -> tuple[list[int], list[float]]:
    """The near-boundary shares of one cell's mechanism (:func:`papers.winq.study.mechanism_summary`) as a line
    through each boundary with a next period, ``x = s_1, s_1, s_2, s_2, ...`` and ``y = before_1, after_1, before_2,
    after_2, ...``, in percent."""
    kept = [(s, b, a) for s, b, a in zip(mechanism["steps"], mechanism["near_boundary_before"],
                                          mechanism["near_boundary_after"], strict=True) if b is not None]
    return ([s for s, *_ in kept for _ in range(2)],
            [100 * share for _, before, after in kept for share in (before, after)])


def _diagnosed_settings(summary: Mapping[str, Any]) -> list[str]:
    return [s for s in summary["settings"] if any(c["setting"] == s and (c["mechanism"] or c["stagnation"])
                                                   for c in summary["cells"])]


def plot_diagnostics(summary: Mapping[str, Any]) -> plt.Figure:
    """Per setting: codes changed per period, the near-boundary share before/after each boundary and the relative
    gradient norm, each method's seed mean with a band (caption ``diagnostics``)."""
    set_report_theme()
    palette = _palette(summary["methods"])
    settings = _diagnosed_settings(summary)
    rows = max(1, len(settings))
    fig, axes = plt.subplots(rows, 3, figsize=(10.2, 2.8 * rows), squeeze=False)
    for (codes, near, stagnation), setting in zip(axes, settings, strict=False):
        for method in _methods_of(summary, setting):
            cells = [c for c in summary["cells"] if c["run"] == f"{setting}-{method}"]
            label = f"{method} ({len(cells)} seed{'s' * (len(cells) > 1)})"
            mechanisms = [c["mechanism"] for c in cells if c["mechanism"]]
            if mechanisms:
                _band(codes, mechanisms[0]["steps"], [[100 * v for v in m["codes_changed"]] for m in mechanisms],
                      palette[method], label, ".")
                lines = [boundary_steps(m) for m in mechanisms]
                _band(near, lines[0][0], [y for _, y in lines], palette[method], label, ".")
            curves = [c["stagnation"] for c in cells if c["stagnation"]]
            if curves:
                _band(stagnation, curves[0]["steps"], [c["relative_grad_norm"] for c in curves], palette[method],
                      label, ".")
        codes.set(title=f"{setting}: codes changed", xlabel="step", ylabel="codes changed in the period, %")
        near.set(title=f"{setting}: near a code boundary", xlabel="step", ylabel="within a period's travel, %")
        stagnation.set(title=f"{setting}: stagnation", xlabel="step", ylabel="||grad_W L|| / ||W||", yscale="log")
    if settings:
        axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_final(summary: Mapping[str, Any]) -> plt.Figure:
    """Test perplexity per setting and method, seed means and seeds, base model as a line (caption ``final``)."""
    set_report_theme()
    methods, settings = summary["methods"], summary["settings"]
    palette = _palette(methods)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(settings) + 2), 3.6))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        where = [j for j, s in enumerate(settings) if method in _methods_of(summary, s)]
        if not where:
            continue
        x = np.array(where) + (i - (len(methods) - 1) / 2) * width
        runs = [row_of(summary, f"{settings[j]}-{method}") for j in where]
        ax.bar(x, [r["test_perplexity"] for r in runs], width, label=method, color=palette[method], alpha=0.8)
        for xi, r in zip(x, runs, strict=True):
            values = [c["metrics"]["perplexity"] for c in summary["cells"] if c["run"] == r["run"]]
            ax.plot([xi] * len(values), values, linestyle="none", marker=".", color="black", markersize=3)
    ax.axhline(summary["base"]["perplexity"], color="black", linestyle="--", linewidth=1, label="full precision")
    ax.set_xticks(np.arange(len(settings)), settings)
    ax.set(ylabel="test perplexity", yscale="log")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    return fig


def _ritz(cells: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """All Ritz values of the Hessian rows ``cells`` (one run's seeds, pooled) and their weights
    ``tau / (total probes)`` (summing to 1)."""
    theta = np.concatenate([np.asarray(n, dtype=float) for c in cells for n in c["nodes"]])
    probes = sum(len(c["nodes"]) for c in cells)
    tau = np.concatenate([np.asarray(w, dtype=float) for c in cells for w in c["weights"]]) / probes
    return theta, tau


def spectrum_edges(groups: Sequence[Sequence[Mapping[str, Any]]], bins: int = BINS) -> np.ndarray:
    """``bins`` equal bins spanning every Ritz value of ``groups`` (a range of 1 around a single value)."""
    theta = np.concatenate([_ritz(cells)[0] for cells in groups])
    low, high = float(theta.min()), float(theta.max())
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, bins + 1)


def _spectra_axes(ax: plt.Axes, groups: Mapping[str, Sequence[Mapping[str, Any]]],
                  palette: Mapping[str, Any]) -> None:
    edges = spectrum_edges(list(groups.values()))
    for label, cells in groups.items():
        theta, tau = _ritz(cells)
        mass, _ = np.histogram(theta, bins=edges, weights=tau)
        ax.stairs(mass, edges, color=palette[label], label=label, linewidth=1.4)
    ax.set_yscale("log")
    ax.set(xlabel="eigenvalue", ylabel="spectral mass per bin")


def _spectra_of(summary: Mapping[str, Any], run: str) -> list[Mapping[str, Any]]:
    return [h for h in summary["hessian"] if h["run"] == run]


def plot_spectra(summary: Mapping[str, Any]) -> plt.Figure:
    """Spectral density of the baseline models per bit width, seeds pooled (caption ``spectra``)."""
    set_report_theme()
    groups = {}
    for setting in summary["settings"]:
        cells = _spectra_of(summary, f"{setting}-baseline")
        if cells:
            groups[f"{setting} (W{cells[0]['bits']:g}, {len(cells)} seed{'s' * (len(cells) > 1)})"] = cells
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    if groups:
        _spectra_axes(ax, groups, _palette(list(groups)))
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_spectra_methods(summary: Mapping[str, Any]) -> plt.Figure:
    """Every method's spectral density per setting with more than one (caption ``spectra-methods``)."""
    set_report_theme()
    palette = _palette(summary["methods"])
    panels = {}
    for setting in summary["settings"]:
        groups = {m: _spectra_of(summary, f"{setting}-{m}") for m in summary["methods"]}
        groups = {m: cells for m, cells in groups.items() if cells}
        if len(groups) > 1:
            panels[setting] = groups
    fig, axes = _grid(max(1, len(panels)))
    for ax, (setting, groups) in zip(axes, panels.items(), strict=False):
        _spectra_axes(ax, groups, palette)
        ax.set_title(setting)
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def plot_hessian_stats(summary: Mapping[str, Any]) -> plt.Figure:
    """Near-zero mass (absolute threshold) and largest |eigenvalue| per bit width and method, seed means with the
    seeds' range (caption ``hessian-stats``)."""
    set_report_theme()
    fig, (near, largest) = plt.subplots(1, 2, figsize=(8.4, 3.4))
    methods = [m for m in summary["methods"] if any(h["method"] == m for h in summary["hessian"])]
    palette = _palette(methods)
    for method in methods:
        for a8, marker, suffix in ((False, "o", ""), (True, "s", " A8")):
            runs = sorted({h["run"]: h["bits"] for h in summary["hessian"] if h["method"] == method
                           and (h["activation_bits"] is not None) == a8}.items(), key=lambda item: item[1])
            if not runs:
                continue
            bits = [b for _, b in runs]
            style = {"color": palette[method], "marker": marker, "linestyle": "--" if a8 else "-",
                     "label": method + suffix, "capsize": 2}
            for ax, value in ((near, lambda h: h["abs_masses"]["near_zero"]),
                              (largest, lambda h: h["largest_abs_eigenvalue"])):
                values = [[value(h) for h in _spectra_of(summary, run)] for run, _ in runs]
                mean = np.array([np.mean(v) for v in values])
                spread = np.array([[m - min(v) for m, v in zip(mean, values, strict=True)],
                                   [max(v) - m for m, v in zip(mean, values, strict=True)]])
                ax.errorbar(bits, mean, yerr=spread, **style)
    near.set(xlabel="weight bits", ylabel="near-zero spectral mass (|eigenvalue| < 1e-3)")
    largest.set(xlabel="weight bits", ylabel="largest |eigenvalue|", yscale="log")
    if methods:
        near.legend(fontsize="small")
    fig.tight_layout()
    return fig


PLOTS = {"curves": plot_curves, "grad-norm": plot_grad_norm, "diagnostics": plot_diagnostics, "final": plot_final,
         "spectra": plot_spectra, "spectra-methods": plot_spectra_methods, "hessian-stats": plot_hessian_stats}
check_figures(__name__, FIGURES, PLOTS, CAPTIONS)
