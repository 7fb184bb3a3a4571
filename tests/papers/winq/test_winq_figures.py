"""Figures (every plot_* draws the planted study's numbers) and the report context (its tables, the claims
re-validated, and a render through the shared report CLI)."""

import json

import matplotlib
import numpy as np
import pytest
import yaml
from winq_testing import CONFIG, PLANTED, build_study, hessian_cell

matplotlib.use("Agg")

from matplotlib.figure import Figure

from common.report import claim_specs, claims_document, verify_sha256sums
from common.report.__main__ import main as report_main
from common.report.figures import save_figure
from common.uncertainty import Evidence
from papers.winq import figures
from papers.winq.claims import Study, study_claims
from papers.winq.context import PAPER, build_context, hessian_table, run_table
from papers.winq.settings import FIGURES
from papers.winq.study import study_summary


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def summary(study):
    return study_summary(*study)


@pytest.fixture(scope="module")
def evaluations(study):
    return {run: record for run, record in study[2].items() if run != "base"}


@pytest.mark.parametrize("figure_id", FIGURES)
def test_every_figure_has_a_caption_and_a_plot(figure_id):
    assert figures.caption(figure_id).endswith(".")
    assert len(figures.caption(figure_id)) > 80
    assert callable(figures.PLOTS[figure_id])


def test_unknown_caption_is_named():
    with pytest.raises(ValueError, match="unknown figure id 'loss'"):
        figures.caption("loss")


def test_plot_curves(summary, close):
    fig = figures.plot_curves(summary)
    close(fig)
    assert isinstance(fig, Figure)
    w2, w4 = fig.axes[:2]
    assert [ax.get_title() for ax in (w2, w4)] == ["w2", "w4"]
    assert len(w2.lines) == 5  # four methods and the target line
    assert [line.get_label() for line in w2.lines[:4]] == list(PLANTED)
    np.testing.assert_array_equal(w2.lines[1].get_xdata(), [4, 8, 12])
    np.testing.assert_array_equal(w2.lines[1].get_ydata(), PLANTED["winq"][0])
    np.testing.assert_array_equal(w2.lines[4].get_ydata(), [90.0, 90.0])  # the baseline's final value


def test_plot_final(summary, close):
    fig = figures.plot_final(summary)
    close(fig)
    ax = fig.axes[0]
    heights = [patch.get_height() for patch in ax.patches]
    assert heights == [100.0, 100.0, 92.0, 92.0, 95.0, 95.0, 98.0, 98.0]  # per method, w2 then w4
    assert list(ax.lines[0].get_ydata()) == [50.0, 50.0]  # the base model
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w2", "w4"]


def test_plot_spectra_weights_the_ritz_values(summary, close):
    fig = figures.plot_spectra(summary)
    close(fig)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert len(ax.patches) == 2  # one histogram per baseline bit width
    w2 = ax.patches[0]
    assert w2.get_label() == "w2 (W2)"
    # Ritz values -1, 0, 2 (w2) and -2, 0, 4 (w4) with weights 0.3, 0.4, 0.3 (near-zero mass 0.6 - 0.1 x 2): 60 equal
    # bins over [-2, 4], 0.1 wide
    values, edges, _ = w2.get_data()  # StepPatch: (values, edges, baseline)
    np.testing.assert_allclose(edges, np.linspace(-2.0, 4.0, 61))
    assert values.sum() == pytest.approx(1.0)
    assert values[20] == pytest.approx(0.4)  # [0, 0.1)
    assert values[10] == pytest.approx(0.3)  # [-1, -0.9)
    assert values[40] == pytest.approx(0.3)  # [2, 2.1)


def test_spectrum_edges_of_a_single_value():
    cell = hessian_cell(2, "baseline", near_zero=1.0, largest=0.0)
    np.testing.assert_allclose(figures.spectrum_edges([cell], bins=2), [-0.5, 0.0, 0.5])


def test_plot_spectra_winq_and_stats(summary, close):
    fig = figures.plot_spectra_winq(summary)
    close(fig)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["w2", "w4"]
    assert [p.get_label() for p in fig.axes[0].patches] == ["baseline", "winq"]
    fig = figures.plot_hessian_stats(summary)
    close(fig)
    near, largest = fig.axes
    baseline = near.lines[0]
    assert baseline.get_label() == "baseline"
    np.testing.assert_array_equal(baseline.get_xdata(), [2, 4])
    np.testing.assert_allclose(baseline.get_ydata(), [0.4, 0.2])
    np.testing.assert_array_equal(largest.lines[1].get_ydata(), [4.0, 8.0])  # WinQ: twice the baseline's


def test_context_and_render(summary, evaluations, tmp_path):
    study = Study(summary, evaluations, {}, "summary.json", {run: f"{run}.json" for run in evaluations})
    config = yaml.safe_load(CONFIG.read_text())["winq"]
    claims = claims_document(study_claims(claim_specs(config["claims"]), study, Evidence(0.95, 1000, 0),
                                          list(config["settings"])), [])
    pngs = []
    for figure_id in FIGURES:
        png = tmp_path / f"{figure_id}.png"
        save_figure(figures.PLOTS[figure_id](summary), png, png.with_suffix(".pdf"))  # closes it
        pngs.append(str(png))
    cited = tmp_path / "summary.json"
    cited.write_text(json.dumps(summary))
    context = build_context(config={"x": 1}, profile="smoke", summary=summary, claims=claims,
                            figures=[{"id": p.rsplit("/", 1)[-1][:-4], "caption": figures.caption(
                                p.rsplit("/", 1)[-1][:-4]), "png": p, "pdf": p[:-4] + ".pdf"} for p in pngs],
                            artifacts=[str(cited)], rerun_examples=["results/models/trained/winq/w2-winq"],
                            seeds={"workflow": 0}, stage_seconds={"QAT": 1.0})
    assert context["paper"] == PAPER
    assert [t["caption"][:10] for t in context["tables"]] == [run_table(summary)["caption"][:10],
                                                               hessian_table(summary)["caption"][:10]]
    runs = context["tables"][0]
    assert runs["rows"][1][:5] == ["w2-winq", "0.0002", "80.00", 8, "1.50x"]
    assert runs["rows"][-1][0] == "base model (full precision)"
    assert context["tables"][1]["rows"][0][:2] == ["w2-baseline", "40.0%"]
    path = tmp_path / "context.json"
    path.write_text(json.dumps(context))
    html, tex, sums = tmp_path / "winq.html", tmp_path / "winq.tex", tmp_path / "winq.SHA256SUMS"
    assert report_main(["render", "--context", str(path), "--html", str(html), "--tex", str(tex),
                        "--sums", str(sums)]) == 0
    text = html.read_text()
    assert "WinQ: accelerating QAT" in text
    assert "Both components matter" in text
    assert verify_sha256sums(sums, "/") == []
