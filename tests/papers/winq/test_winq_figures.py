"""Figures (every plot_* draws the planted study's numbers) and the report context (the setup table, its tables, the
claims re-validated with the regime card, and a render through the shared report CLI)."""

import json

import matplotlib
import numpy as np
import pytest
import yaml
from winq_testing import (
    CONFIG,
    GRAD_NORMS,
    MECHANISM,
    PLANTED,
    STAGNATION,
    build_study,
    hessian_cell,
    planted_card,
    smoke_config,
)

matplotlib.use("Agg")

from matplotlib.figure import Figure

from common.report import claim_specs, claims_document, verify_sha256sums
from common.report.__main__ import main as report_main
from common.report.figures import save_figure
from common.uncertainty import Evidence
from papers.winq import figures
from papers.winq.claims import Study, claim_rows
from papers.winq.context import PAPER, build_context, hessian_table, run_table, setup_ours
from papers.winq.settings import FIGURES
from papers.winq.study import study_summary

FACTS = {"name": "tiny_tied", "parameters": 2_819_200, "quantized": 1_769_472, "share": 1_769_472 / 2_819_200,
         "layers": 28, "blocks": 4, "hidden": 128, "vocabulary": 8192, "tied": True}  # regime.model_facts


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("runs"), seed_factor=0.1)


@pytest.fixture(scope="module")
def summary(study):
    return study_summary(*study)


@pytest.fixture(scope="module")
def evaluations(study):
    return {cell: record for cell, record in study[3].items() if cell != "base"}


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
    w1, w2 = fig.axes[:2]
    assert [ax.get_title() for ax in (w1, w2)] == ["w1", "w2"]
    assert len(w1.lines) == 5  # four methods and the target line
    assert len(w2.lines) == 3  # baseline, winq, the target
    assert [line.get_label() for line in w1.lines[:4]] == list(PLANTED)
    np.testing.assert_array_equal(w1.lines[1].get_xdata(), [2, 4, 6, 8, 10, 12])
    np.testing.assert_allclose(w1.lines[1].get_ydata(), np.array(PLANTED["winq"][0]) * 1.05)  # seeds 0, 1: x1, x1.1
    np.testing.assert_allclose(w1.lines[4].get_ydata(), [90.0 * 1.05] * 2)  # the baseline's final value, seed mean
    assert len(w1.collections) == 4  # a band per method (two seeds)


def test_plot_grad_norm(summary, close):
    fig = figures.plot_grad_norm(summary)
    close(fig)
    w1 = fig.axes[0]
    assert w1.get_title() == "w1"
    assert [line.get_label() for line in w1.lines] == ["baseline (2 seeds)", "winq (2 seeds)"]
    assert w1.get_yscale() == "log"
    # a moving average over 12 // 40 -> 1 step: the planted norms themselves
    np.testing.assert_allclose(w1.lines[0].get_ydata(), GRAD_NORMS["baseline"])


def test_moving_average():
    np.testing.assert_allclose(figures.moving_average([1.0, 3.0, 5.0, 7.0], 2), [1.0, 2.0, 4.0, 6.0])


def test_plot_diagnostics(summary, close):
    """The planted diagnostics (``winq_testing.MECHANISM``, ``STAGNATION``), seeds 0 and 1 scaled by 1 and 1.1: the
    seed means are 1.05 x the planted values, in percent; the noise runs have no mechanism records."""
    fig = figures.plot_diagnostics(summary)
    close(fig)
    assert [ax.get_title() for ax in fig.axes] == [f"{s}: {what}" for s in ("w1", "w2") for what in (
        "codes changed", "near a code boundary", "stagnation")]
    codes, near, stagnation = fig.axes[:3]
    labels = [f"{m} (2 seeds)" for m in ("baseline", "winq", "interpolation")]
    assert [line.get_label() for line in codes.lines] == labels
    np.testing.assert_array_equal(codes.lines[0].get_xdata(), [3, 6, 9, 12])  # the boundaries K, 2K, 3K, 4K
    np.testing.assert_allclose(codes.lines[2].get_ydata(), np.array(MECHANISM["interpolation"][0]) * 100 * 1.05)
    np.testing.assert_allclose(codes.lines[0].get_ydata(), [12.5 * 1.05] * 4)
    assert [line.get_label() for line in near.lines] == labels
    np.testing.assert_array_equal(near.lines[2].get_xdata(), [3, 3, 6, 6, 9, 9])  # no next period after step 12
    np.testing.assert_allclose(near.lines[2].get_ydata(), np.array([50, 25, 37.5, 25, 37.5, 25]) * 1.05)
    np.testing.assert_allclose(near.lines[0].get_ydata(), [50 * 1.05] * 6)  # the baseline: no step at a boundary
    assert [line.get_label() for line in stagnation.lines] == [f"{m} (2 seeds)" for m in PLANTED]
    np.testing.assert_array_equal(stagnation.lines[3].get_xdata(), [2, 4, 6, 8, 10, 12])
    np.testing.assert_allclose(stagnation.lines[3].get_ydata(), np.array(STAGNATION) * 1.05)
    assert stagnation.get_yscale() == "log"
    assert len(codes.collections) == 3  # a band per method (two seeds)
    assert [line.get_label() for line in fig.axes[3].lines] == ["baseline (2 seeds)", "winq (2 seeds)"]


def test_boundary_steps_skip_the_last_boundary():
    mechanism = {"steps": [3, 6], "near_boundary_before": [0.5, None], "near_boundary_after": [0.25, None]}
    assert figures.boundary_steps(mechanism) == ([3, 3], [50.0, 25.0])


def test_plot_diagnostics_without_records(study, close):
    fig = figures.plot_diagnostics(study_summary(*study[:-2]))
    close(fig)
    assert len(fig.axes) == 3
    assert not any(ax.lines for ax in fig.axes)


def test_plot_final(summary, close):
    fig = figures.plot_final(summary)
    close(fig)
    ax = fig.axes[0]
    heights = [patch.get_height() for patch in ax.patches]
    # per method, seed means: baseline (w1, w2), winq (w1, w2), interpolation (w1), noise (w1)
    np.testing.assert_allclose(heights, np.array([100.0, 100.0, 92.0, 92.0, 95.0, 98.0]) * 1.05)
    assert [len(line.get_ydata()) for line in ax.lines[:-1]] == [2] * 6  # the seeds as dots
    assert list(ax.lines[-1].get_ydata()) == [50.0, 50.0]  # the base model
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w1", "w2"]


def test_plot_spectra_weights_the_ritz_values(summary, close):
    fig = figures.plot_spectra(summary)
    close(fig)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert len(ax.patches) == 2  # one histogram per baseline bit width
    w1 = ax.patches[0]
    assert w1.get_label() == "w1 (W1, 2 seeds)"
    # Ritz values -0.5, 0, 1 (w1) and -1, 0, 2 (w2) with weights 0.25, 0.5, 0.25 (near-zero mass 0.6 - 0.1 x 1): 60
    # equal bins over [-1, 2], 0.05 wide; the two seeds pooled
    values, edges, _ = w1.get_data()  # StepPatch: (values, edges, baseline)
    np.testing.assert_allclose(edges, np.linspace(-1.0, 2.0, 61))
    assert values.sum() == pytest.approx(1.0)
    assert values[20] == pytest.approx(0.5)  # [0, 0.05)
    assert values[10] == pytest.approx(0.25)  # [-0.5, -0.45)


def test_spectrum_edges_of_a_single_value():
    cell = hessian_cell(2, "baseline", near_zero=1.0, largest=0.0)
    np.testing.assert_allclose(figures.spectrum_edges([[cell]], bins=2), [-0.5, 0.0, 0.5])


def test_plot_spectra_methods_and_stats(summary, close):
    fig = figures.plot_spectra_methods(summary)
    close(fig)
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["w1"]  # w2 has the baseline's alone
    assert [p.get_label() for p in fig.axes[0].patches] == ["baseline", "interpolation", "noise"]
    fig = figures.plot_hessian_stats(summary)
    close(fig)
    near, largest = fig.axes
    baseline = near.containers[0]  # errorbar: the line of seed means, the bars the seeds' range
    assert baseline.get_label() == "baseline"
    np.testing.assert_array_equal(baseline.lines[0].get_xdata(), [1, 2])
    np.testing.assert_allclose(baseline.lines[0].get_ydata(), [0.5, 0.4])  # the absolute threshold's near-zero mass
    np.testing.assert_allclose(largest.containers[0].lines[0].get_ydata(), [1.0, 2.0])


def test_context_and_render(summary, evaluations, tmp_path):
    config = yaml.safe_load(CONFIG.read_text())["winq"]
    study = Study(summary, evaluations, {}, "summary.json", {cell: f"{cell}.json" for cell in evaluations},
                  list(config["settings"]))
    specs = claim_specs(config["claims"])
    claims = claims_document(claim_rows(specs, study, Evidence(0.95, 1000, 0)), [],
                             planted_card(travel_w1=0.1))
    pngs = []
    for figure_id in FIGURES:
        png = tmp_path / f"{figure_id}.png"
        save_figure(figures.PLOTS[figure_id](summary), png, png.with_suffix(".pdf"))  # closes it
        pngs.append(str(png))
    cited = tmp_path / "summary.json"
    cited.write_text(json.dumps(summary))
    context = build_context(config=smoke_config(), profile="smoke", summary=summary, claims=claims, model=FACTS,
                            corpus="sotu",
                            figures=[{"id": p.rsplit("/", 1)[-1][:-4], "caption": figures.caption(
                                p.rsplit("/", 1)[-1][:-4]), "png": p, "pdf": p[:-4] + ".pdf"} for p in pngs],
                            artifacts=[str(cited)], rerun_examples=["results/models/trained/winq/w2-winq/seed1"],
                            seeds={"workflow": 0}, stage_seconds={"QAT": 1.0})
    assert context["paper"] == PAPER
    assert [row["aspect"] for row in context["setup"]] == list(config["paper_setup"])
    assert context["setup"][0] == {"aspect": "Model", "paper": config["paper_setup"]["Model"],
                                   "ours": setup_ours(smoke_config(), FACTS, "sotu")["Model"]}
    assert [row["id"] for row in context["regime"]] == list(config["regime"])
    assert context["outside_regime"] == 16  # the rows that require travel_w1
    assert [t["caption"][:10] for t in context["tables"]] == [run_table(summary)["caption"][:10],
                                                               hessian_table(summary)["caption"][:10],
                                                               "The baseli"]  # the recorded pilot (pilot.record)
    assert context["tables"][2]["caption"].endswith("the method rows are not testable where its premise fails")
    runs = context["tables"][0]
    assert runs["rows"][1][:6] == ["w1-winq", "0, 1", "0.004", 3, "84.00 +- 5.66", "2.00x"]
    assert runs["rows"][-1][0] == "base model (full precision)"
    assert context["tables"][1]["rows"][0][:4] == ["w1-baseline/seed0", "50.0%", "50.0%", "50.0%"]
    path = tmp_path / "context.json"
    path.write_text(json.dumps(context))
    html, tex, sums = tmp_path / "winq.html", tmp_path / "winq.tex", tmp_path / "winq.SHA256SUMS"
    assert report_main(["render", "--context", str(path), "--html", str(html), "--tex", str(tex),
                        "--sums", str(sums)]) == 0
    text = html.read_text()
    assert "WinQ: accelerating QAT" in text
    assert "Each component alone improves on the baseline" in text
    assert 'id="regime-travel_w1"' in text
    assert "<th>Model</th><td>LLaMA-3.2-1B" in text
    assert verify_sha256sums(sums, "/") == []


def test_the_context_step_reads_the_base_models_config(summary, evaluations, tmp_path):
    from common.models import get_architecture
    from papers.winq.__main__ import main

    config = smoke_config()
    study = Study(summary, evaluations, {}, "summary.json", {cell: f"{cell}.json" for cell in evaluations},
                  list(config["settings"]))
    specs = claim_specs(config["claims"])
    claims = claims_document(claim_rows(specs, study, Evidence(0.95, 1000, 0)), [],
                             planted_card())
    paths = {name: tmp_path / f"{name}.json" for name in ("summary", "claims")}
    paths["summary"].write_text(json.dumps(summary))
    paths["claims"].write_text(json.dumps(claims))
    base = tmp_path / "models" / "tiny_tied"
    get_architecture("tiny_tied").config(8192).save_pretrained(base)  # config.json: what the setup table reads
    out = tmp_path / "context.json"
    assert main(["context", "--config-json", json.dumps(config), "--profile", "smoke", "--seed", "0", "--summary",
                 str(paths["summary"]), "--claims", str(paths["claims"]), "--figures", str(tmp_path / "curves.png"),
                 "--base-model", str(base), "--corpus", "sotu", "--out", str(out)]) == 0
    context = json.loads(out.read_text())
    assert {row["aspect"]: row["ours"] for row in context["setup"]} == setup_ours(config, FACTS, "sotu")
    assert context["outside_regime"] == 0
