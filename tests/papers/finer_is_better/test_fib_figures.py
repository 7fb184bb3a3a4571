"""Figures: captions by id, the MSE figure's data and shaded regions, PNG + PDF written byte-stably."""

import math

import matplotlib
import pytest
from fib_testing import GRID, THRESHOLDS, planted_cells, point_summary

matplotlib.use("Agg")

from common.uncertainty import Evidence
from papers.finer_is_better import figures
from papers.finer_is_better.numerical import summary


@pytest.fixture(scope="module")
def planted():
    return summary(planted_cells(), THRESHOLDS)


@pytest.mark.parametrize(("figure_id", "kind", "detail"), [
    ("mse-ue4m3-four_over_six", "mse", "ue4m3-four_over_six"),
    ("mse-ue5m3-hierarchical_four_over_six", "mse", "ue5m3-hierarchical_four_over_six"),
    ("brute-force-ratio-ue4m3", "brute-force-ratio", "ue4m3"),
    ("sweep-small-w", "sweep", "small-w"),
    ("sweep-smollm2-wa", "sweep", "smollm2-wa"),
])
def test_caption(figure_id, kind, detail):
    assert figures.caption(figure_id) == f"{detail}: {figures.CAPTIONS[kind]}"


def test_caption_text():
    assert figures.caption("mse-ue4m3-absmax").startswith("ue4m3-absmax: Relative MSE (MSE / sigma^2) of FP4 E2M1")
    assert figures.CAPTIONS["brute-force-ratio"].endswith("at the smallest block size; 1 is optimal.")


@pytest.mark.parametrize("figure_id", ["", "heatmap-ue4m3", "MSE-ue4m3-absmax", "gaps-small", "brute-force"])
def test_unknown_figure_id(figure_id):
    with pytest.raises(ValueError, match=rf"unknown figure id {figure_id!r}"):
        figures.caption(figure_id)


def test_plot_mse_lines_and_regions(planted):
    fig = figures.plot_mse(planted, "ue4m3", "absmax")
    try:
        ax = fig.axes[0]
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
        assert ax.get_title() == "E2M1 elements, UE4M3 scales, absmax"
        rows = [r for r in planted["rows"] if r["scale"] == "ue4m3" and r["variant"] == "absmax"]
        for line, block in zip(ax.lines[:3], (4, 8, 16), strict=True):
            expected = [r["relative_mse"] for r in rows if r["block_size"] == block]
            assert list(line.get_xdata()) == GRID
            assert list(line.get_ydata()) == expected
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            "4", "8", "16", "Region A (scale underflow)", "Region B (reversal with prevent-zero)"]
        # Region A: [1e-5, 1e-4] and [1e-3, 1e-3]; Region B: 1e-3, [1e-2, 3e-2], 3e-1; half a step (sqrt 3) wider
        step = math.sqrt(3.0)
        spans = [(p.get_x(), p.get_x() + p.get_width()) for p in ax.patches]
        expected_spans = [(1e-5, 1e-4), (1e-3, 1e-3), (1e-3, 1e-3), (1e-2, 3e-2), (3e-1, 3e-1)]
        assert len(spans) == len(expected_spans)
        for (low, high), (a, b) in zip(spans, expected_spans, strict=True):
            assert low == pytest.approx(a / step, rel=1e-12)
            assert high == pytest.approx(b * step, rel=1e-12)
    finally:
        matplotlib.pyplot.close(fig)


def test_mse_figure_writes_stable_png_and_pdf(planted, tmp_path):
    figures.mse_figure(planted, "ue4m3", "prevent_zero", tmp_path / "a.png", tmp_path / "a.pdf")
    figures.mse_figure(planted, "ue4m3", "prevent_zero", tmp_path / "b.png", tmp_path / "b.pdf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pdf", "a.png", "b.pdf", "b.png"]  # no temp files
    png, pdf = (tmp_path / "a.png").read_bytes(), (tmp_path / "a.pdf").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert pdf.startswith(b"%PDF-")
    assert b"CreationDate" not in pdf
    assert (tmp_path / "b.png").read_bytes() == png  # same data, same bytes
    assert (tmp_path / "b.pdf").read_bytes() == pdf
    assert matplotlib.pyplot.get_fignums() == []  # the figure is closed


def test_mse_figure_of_a_missing_setting_writes_nothing(planted, tmp_path):
    with pytest.raises(KeyError, match=r"no numerical cells for scale 'ue5m3', variant 'absmax'"):
        figures.mse_figure(planted, "ue5m3", "absmax", tmp_path / "a.png", tmp_path / "a.pdf")
    assert list(tmp_path.iterdir()) == []


def test_plot_sweep_draws_each_rule_with_its_interval(planted):
    points = [point_summary(f"small-c{c:g}", 0.02 * c, {("ue4m3", "absmax", 4): 0.01 * c,
                                                        ("ue4m3", "absmax", 16): 0.02}, noise=0.001, seed=i)
              for i, c in enumerate((1.0, 2.0, 4.0))]
    fig = figures.plot_sweep(planted, points, "w", Evidence(0.95, 1000, 0))
    try:
        ax = fig.axes[0]
        assert ax.get_title() == ("small sweep, weights only in E2M1\n(our extension: the authors' repository has no "
                                  "weights-only run)")
        (line,) = [ln for ln in ax.lines if ln.get_label() == "UE4M3 absmax"]
        assert list(line.get_xdata()) == pytest.approx([0.02, 0.04, 0.08])
        # ppl(4)/ppl(16) - 1 = exp(0.01 c - 0.02) - 1 up to the planted window noise
        assert list(line.get_ydata()) == pytest.approx([math.expm1(0.01 * c - 0.02) for c in (1, 2, 4)], abs=2e-3)
        assert len(ax.collections) == 1  # one interval band per rule
    finally:
        matplotlib.pyplot.close(fig)


def test_plot_sweep_marks_only_the_weights_only_run_as_our_extension(planted):
    points = [point_summary(f"small-c{c:g}", 0.02 * c, {("ue4m3", "absmax", 4): 0.01, ("ue4m3", "absmax", 16): 0.02})
              for c in (1.0, 2.0)]
    fig = figures.plot_sweep(planted, points, "wa", Evidence(0.95, 1000, 0))
    try:
        assert fig.axes[0].get_title() == "small sweep, weights and activations in E2M1"
    finally:
        matplotlib.pyplot.close(fig)
