"""Figures: captions by id; every plot_* draws its data with the expected title and axes (tiny synthetic input)."""

import matplotlib
import pytest
from msl_testing import crossover_row, fit, gap_summary, tensor_summary, validation_result

matplotlib.use("Agg")


from papers.microscaling_limits import figures

SIGMAS = [0.0625, 0.125, 0.25]
# Normal and Laplace theory rows for blocks 4, 8, 16; totals 2^-k so MSE / sigma^2 is exact
THEORY = {"element": "e2m1", "scale": "ue4m3", "rule": "absmax", "rows": [
    {"dist": dist, "block_size": n, "sigma": s, "non_max": n * s * s / 64, "max_element": s * s / 32,
     "zero_blocks": s * s / 16 if s < 0.1 else 0.0, "total": n * s * s / 64 + (3 if s < 0.1 else 1) * s * s / 32}
    for dist in ("normal", "laplace") for n in (4, 8, 16) for s in SIGMAS]}
POINTS = [{"scale": scale, "rule": "absmax", "block_size": n, "sigma": s, "simulation": n * s * s / 32,
           "theory": n * s * s / 64} for scale in ("ue4m3", "ue5m3") for n in (4, 8) for s in SIGMAS]


@pytest.mark.parametrize(("figure_id", "expected"), [
    ("fit", figures.CAPTIONS["fit"]),
    ("crossovers", figures.CAPTIONS["crossovers"]),
    ("paper-model-ue4m3", "ue4m3: " + figures.CAPTIONS["paper-model"]),
    ("theory-vs-simulation-ue4m3", "ue4m3: " + figures.CAPTIONS["theory-vs-simulation"]),
    ("parts-ue5m3-b4", "ue5m3-b4: " + figures.CAPTIONS["parts"]),
    ("tensors-minilm", "minilm: " + figures.CAPTIONS["tensors"]),
    ("gap-smollm2", "smollm2: " + figures.CAPTIONS["gap"]),
    ("gap-small-v2", "small-v2: " + figures.CAPTIONS["gap"]),
])
def test_caption(figure_id, expected):
    assert figures.caption(figure_id) == expected


def test_caption_text():
    assert figures.caption("parts").startswith("The three contributions of the theory's MSE (non-max elements")
    assert figures.caption("tensors-x") == ("x: Every linear weight tensor: measured block MSE vs the theory's "
                                            "prediction from its fitted sigma.")


@pytest.mark.parametrize("figure_id", ["", "fits", "theory", "gaps-x", "Fit", "tensor-base", "mse-ue4m3-absmax"])
def test_unknown_figure_id(figure_id):
    with pytest.raises(ValueError, match=rf"unknown figure id {figure_id!r}"):
        figures.caption(figure_id)


def test_plot_theory_vs_simulation(close):
    fig = figures.plot_theory_vs_simulation(THEORY, validation_result(points=POINTS))
    close(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "E2M1 with UE4M3 scales: theory (lines) vs simulation (points)"
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert (ax.get_xlabel(), ax.get_ylabel()) == (r"$\sigma$", r"MSE / $\sigma^2$")
    # Normal theory only, and only the simulated block sizes (4, 8; not 16)
    assert [line.get_label() for line in ax.lines] == ["theory, n=4", "theory, n=8"]
    for line, n in zip(ax.lines, (4, 8), strict=True):
        assert list(line.get_xdata()) == SIGMAS
        assert list(line.get_ydata()) == [n / 64 + (3 if s < 0.1 else 1) / 32 for s in SIGMAS]
    assert len(ax.collections) == 2  # one scatter per block size, UE4M3 points only
    for points, n in zip(ax.collections, (4, 8), strict=True):
        assert points.get_offsets().tolist() == [[s, n / 32] for s in SIGMAS]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["theory, n=4", "theory, n=8"]


def test_plot_parts(close):
    fig = figures.plot_parts(THEORY, 8)
    close(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "Where the error comes from: UE4M3, block 8"
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert ax.get_ylabel() == r"contribution / $\sigma^2$"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["non_max", "max_element", "zero_blocks"]
    curves = {tuple(line.get_ydata()) for line in ax.lines if len(line.get_xdata())}
    # the zero-block part vanishes at the two larger sigmas: a gap on the log axis, one point left
    assert curves == {(0.125, 0.125, 0.125), (1 / 32, 1 / 32, 1 / 32), (1 / 16,)}


def test_plot_fit(close):
    fits = {"ue4m3": fit(max_relative_error=0.25, chi2=3.125e-8), "ue5m3": fit(max_relative_error=0.015, chi2=1e-9)}
    fig = figures.plot_fit(validation_result(fits=fits, points=POINTS))
    close(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "UE4M3: chi2 3.1e-08, max |err| 25.00%; UE5M3: chi2 1.0e-09, max |err| 1.50%"
    assert (ax.get_xscale(), ax.get_xlabel(), ax.get_ylabel()) == ("log", r"$\sigma$", "theory / simulation - 1")
    [points] = ax.collections
    assert points.get_offsets()[:, 1].tolist() == [-0.5] * len(POINTS)  # theory / (2 theory) - 1
    assert [list(line.get_ydata()) for line in ax.lines if len(line.get_ydata())] == [[0, 0]]  # the zero line


def test_plot_crossovers(close):
    crossovers = [crossover_row("ue4m3", 4, 0.024), crossover_row("ue4m3", 8, 0.019),
                  crossover_row("ue5m3", 4, 9.4e-5), crossover_row("ue5m3", 8, None)]
    tensors = [tensor_summary("base", [("a", "ue4m3", 0.004, True, True), ("b", "ue4m3", 0.03, False, False)]),
               tensor_summary("minilm", [("c", "ue4m3", 0.05, False, False)])]
    fig = figures.plot_crossovers(validation_result(crossovers=crossovers), tensors)
    close(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "Where finer stops being better"
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert ax.get_xlabel() == "block size n"
    data = sorted((tuple(line.get_xdata()), tuple(line.get_ydata())) for line in ax.lines if len(line.get_xdata()))
    assert data == [((4,), (9.4e-5,)), ((4, 8), (0.024, 0.019))]  # the None crossover is left out
    spans = [p for p in ax.patches if p.get_label().endswith("weight sigmas")]
    assert [p.get_label() for p in spans] == ["base weight sigmas", "minilm weight sigmas"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[-2:] == ["base weight sigmas", "minilm weight sigmas"]


def test_plot_crossovers_without_any_crossover(close):
    fig = figures.plot_crossovers(validation_result(crossovers=[crossover_row("ue4m3", 4, None)]),
                                  [tensor_summary("base", [("a", "ue4m3", 0.004, True, True)])])
    close(fig)
    ax = fig.axes[0]
    assert [line for line in ax.lines if len(line.get_xdata())] == []
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["base weight sigmas"]


def comparison_data():
    """A ``paper_model/comparison.json`` of blocks 8 and 16 at sigmas 1e-4 (left out), 0.25 and 0.5; exact binary
    fractions."""
    points = [{"scale": scale, "block_size": n, "sigma": s, "simulation": s * s / n, "relative_se": 0.0078125,
               "exact": s * s / n, "exact_error": 0.0, "paper": 1.25 * s * s / n, "paper_error": 0.25}
              for scale in ("ue4m3", "ue5m3") for n in (8, 16) for s in (1e-4, 0.25, 0.5)]
    return {"points": points}


def test_plot_paper_model(close):
    fig = figures.plot_paper_model(comparison_data(), "ue4m3", [8, 16])
    close(fig)
    assert len(fig.axes) == 4
    top, bottom = fig.axes[0], fig.axes[2]  # block 8
    assert [ax.get_title() for ax in fig.axes[:2]] == ["UE4M3, n = 8", "UE4M3, n = 16"]
    assert (top.get_yscale(), top.get_ylabel(), bottom.get_ylabel()) == ("log", r"MSE / $\sigma^2$",
                                                                       "model / simulation - 1")
    assert bottom.get_xlabel() == r"$\sigma$"
    models = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()), line.get_linestyle())
              for line in top.lines if line.get_label() in ("our model (exact)", "the paper's model")}
    assert models == {"our model (exact)": ([0.25, 0.5], [0.125, 0.125], "-"),
                      "the paper's model": ([0.25, 0.5], [0.15625, 0.15625], "--")}
    errors = {line.get_label(): list(line.get_ydata()) for line in bottom.lines
              if line.get_label() in ("our model (exact)", "the paper's model")}
    assert errors == {"our model (exact)": [0.0, 0.0], "the paper's model": [0.25, 0.25]}
    (band,) = bottom.collections  # the simulation's 95% band: +-1.96 relative standard errors
    assert band.get_paths()[0].vertices[:, 1].max() == pytest.approx(1.96 * 0.0078125)
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["our model (exact)", "the paper's model",
                                                                    "simulation"]


def test_plot_tensors(close):
    cell = tensor_summary("base", [("a", "ue4m3", 2**-8, True, True), ("a", "ue5m3", 2**-8, False, False),
                                   ("b", "ue4m3", 2**-5, False, False)])
    fig = figures.plot_tensors(cell)
    close(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "base: weight tensors, measured vs predicted"
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("theory (Normal with the tensor's sigma)", "measured MSE")
    [points] = ax.collections
    assert sorted(map(tuple, points.get_offsets().tolist())) == sorted(
        (r["predicted_mse"], r["mse"]) for r in cell["rows"])
    [diagonal] = [line for line in ax.lines if len(line.get_xdata())]  # the rest are legend handles
    low = min(min(r["mse"], r["predicted_mse"]) for r in cell["rows"])
    high = max(max(r["mse"], r["predicted_mse"]) for r in cell["rows"])
    assert list(diagonal.get_xdata()) == list(diagonal.get_ydata()) == [low, high]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["block_size", "8", "16", "scale", "ue4m3", "ue5m3"]


def test_plot_gap(close):
    summary = gap_summary("base", {"ue4m3": {4: 0.5, 8: 0.25, 16: 0.375}, "ue4m3s": {4: 0.25, 8: 0.25, 16: 0.375},
                                   "ue5m3": {4: 0.125, 8: 0.25, 16: 0.375}}, perplexity=12.3456)
    fig = figures.plot_gap(summary)
    close(fig)
    ax = fig.axes[0]
    assert ax.get_title() == "base: W+A FP4 (E2M1), unquantized ppl 12.35"
    assert (ax.get_xscale(), ax.get_xlabel(), ax.get_ylabel()) == ("log", "block size", "perplexity gap")
    lines = [line for line in ax.lines if len(line.get_xdata()) == 3]
    assert [(list(line.get_xdata()), list(line.get_ydata())) for line in lines] == [
        ([4, 8, 16], [0.5, 0.25, 0.375]), ([4, 8, 16], [0.25, 0.25, 0.375]), ([4, 8, 16], [0.125, 0.25, 0.375])]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ue4m3", "ue4m3s", "ue5m3"]


def sweep_summary_data():
    """A ``sweep.sweep_summary`` result of two points (sigma 0.04 and 0.01) with exact binary-fraction values."""
    points = [{"model": "m-c1", "factor": 1.0, "sigma": 0.04}, {"model": "m-c0.25", "factor": 0.25, "sigma": 0.01}]
    ratios = [{"model": p["model"], "sigma": p["sigma"], "variant": v, "value": value, "low": value - 0.125,
               "high": value + 0.25} for p, values in zip(points, ((-0.25, -0.25), (0.5, -0.25)), strict=True)
              for v, value in zip(("ue4m3", "ue5m3"), values, strict=True)]
    cells = [{"model": p["model"], "sigma": p["sigma"], "variant": v, "block_size": b, "activations": a, "gap": gap}
             for p, gap in zip(points, (0.25, 1.0), strict=True) for v in ("ue4m3", "ue5m3") for b in (16, 32)
             for a in (False, True)]
    return {"pair": [16, 32], "points": points, "ratios": ratios, "cells": cells,
            "crossover": {"ue4m3": 0.016, "ue5m3": 6.3e-5}, "crossover_paper": {"ue4m3": 0.015625, "ue5m3": None}}


def test_plot_sweep(close):
    fig = figures.plot_sweep(sweep_summary_data())
    close(fig)
    left, right = fig.axes
    assert (left.get_title(), left.get_xscale(), left.get_ylabel()) == ("Block 16 vs 32, weights in FP4", "log",
                                                                      "ppl(b16) / ppl(b32) - 1")
    series = {bars.get_label(): (list(bars.lines[0].get_xdata()), list(bars.lines[0].get_ydata()))
              for bars in left.containers}
    assert series["ue4m3"] == ([0.01, 0.04], [0.5, -0.25])
    assert series["ue5m3"] == ([0.01, 0.04], [-0.25, -0.25])
    labels = [t.get_text() for t in left.get_legend().get_texts()]
    # UE5M3's 6.3e-5 lies far outside the sweep: no line
    assert labels == [r"$\sigma^*$ ue4m3 (the paper's model)", r"$\sigma^*$ ue4m3 (our exact model)", "ue4m3",
                      "ue5m3"]
    stars = {line.get_label(): (line.get_xdata()[0], line.get_linestyle()) for line in left.lines
             if line.get_label().startswith("$")}
    assert stars == {r"$\sigma^*$ ue4m3 (the paper's model)": (0.015625, "--"),
                     r"$\sigma^*$ ue4m3 (our exact model)": (0.016, ":")}
    assert (right.get_yscale(), right.get_title()) == ("symlog", "Block 16")
    gaps = {line.get_label(): list(line.get_ydata()) for line in right.lines}
    assert gaps == {"ue4m3 W": [1.0, 0.25], "ue4m3 W+A": [1.0, 0.25], "ue5m3 W": [1.0, 0.25],
                    "ue5m3 W+A": [1.0, 0.25]}
    assert [line.get_linestyle() for line in right.lines] == ["-", "--", "-", "--"]
