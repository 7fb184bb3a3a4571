"""Figures (every plot_* draws the synthetic two-seed study's numbers: seed means, BF16 and HiF8 evaluations) and
the report context (its tables, the claims re-validated, and a render through the shared report CLI)."""

import json

import matplotlib
import numpy as np
import pandas as pd
import pytest
from mw_testing import PAPER_LIKE, ROLES, build_study, raw_config, setup_of, smoke_config, study_artifacts, summarize

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from common.report import claim_specs, claims_document, setup_rows, verify_sha256sums
from common.report.__main__ import main as report_main
from common.report.figures import save_figure
from common.uncertainty import Evidence
from papers.maxwindow_hif8 import figures
from papers.maxwindow_hif8.claims import claims as paper_claims
from papers.maxwindow_hif8.context import PAPER, build_context, drop_table, observer_table, run_table, saturation_table
from papers.maxwindow_hif8.regime import regime_card
from papers.maxwindow_hif8.settings import run_names
from papers.maxwindow_hif8.study import observer_cell

FIGURE_IDS = ["loss-curves", "saturation", "downstream", "forgetting", "observer-study"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("runs"), **PAPER_LIKE)


@pytest.fixture(scope="module")
def summary(study):
    return summarize(study)


@pytest.fixture(scope="module")
def cell():
    return observer_cell(smoke_config(observer_study={"steps": 100, "seed": 0}))


def telemetry(overflow, cold_steps=(0,), layers=2, steps=6, roles=ROLES):
    """Telemetry rows: ``overflow(step, layer, role)`` -> bool; the steps in ``cold_steps`` are cold starts."""
    return pd.DataFrame([{"step": t, "layer": f"l{i}", "role": role, "overflow": overflow(t, i, role),
                          "cold_start": t in cold_steps} for t in range(steps) for i in range(layers)
                         for role in roles])


# --- captions -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("figure_id", FIGURE_IDS)
def test_every_figure_has_a_caption(figure_id):
    text = figures.caption(figure_id)
    assert text == figures.CAPTIONS[figure_id]
    assert text.endswith(".")
    assert len(text) > 80


def test_caption_text():
    assert set(figures.CAPTIONS) == set(FIGURE_IDS)
    assert "Equal spikes recur every 20 steps (top)" in figures.caption("observer-study")
    assert figures.caption("downstream").startswith("Relative drop of every trained model vs the BF16 baseline")
    assert "the first seed only, the claims use every seed" in figures.caption("saturation")
    assert "mean over its seeds" in figures.caption("loss-curves")


# --- loss curves ----------------------------------------------------------------------------------------------


def test_plot_loss_curves(summary, close):
    fig = figures.plot_loss_curves(summary)
    close(fig)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2
    high, low = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["lr 0.00015 (high)", "lr 1.5e-05 (low)"]
    # the study's runs per learning rate (3 high, 7 low: the control too) and the warmup marker
    assert [len(ax.lines) for ax in fig.axes] == [4, 8]
    assert [line.get_linestyle() for line in low.lines].count("--") == 1  # max_window-lrlow-w0
    assert [line.get_linestyle() for line in high.lines[:-1]] == ["-"] * 3
    assert low.lines[-1].get_xdata() == [4, 4]  # the warmup marker at W = 4
    bf16 = next(line for line in low.lines if line.get_label() == "BF16")
    # rolling mean over 10 steps of 4 - t/16: 4 - t/32 up to step 9, then 4 - (t - 4.5)/16
    expected = [4 - t / 32 if t < 10 else 4 - (t - 4.5) / 16 for t in range(12)]
    np.testing.assert_allclose(bf16.get_ydata(), expected, rtol=1e-12)
    labels = [t.get_text() for t in low.get_legend().get_texts()]
    assert labels == ["BF16", "max_window, warmup 4", "most_recent, warmup 4", "max_window, warmup 0",
                      "current, warmup 4", "exp_smooth, warmup 4", "max_window, warmup 4, coarse_scale"]
    recipe = low.lines[1]  # the seed mean: 2^-8 above the baseline from the warmup step on, 0.25 before
    losses = [(4 - t / 16) * (1.25 if t < 4 else 1 + 2**-8) for t in range(12)]
    np.testing.assert_allclose(recipe.get_ydata(), pd.Series(losses).rolling(10, min_periods=1).mean(), rtol=1e-12)
    assert high.get_legend() is None


# --- saturation -----------------------------------------------------------------------------------------------


def test_plot_saturation(close):
    frames = {
        # most_recent: every layer saturates at even steps (inputs), one of two layers at every step (weights)
        "most_recent": telemetry(lambda t, i, role: (role == "input" and t % 2 == 0) or (role == "weight" and i == 0)),
        # max_window: never saturates; its grad_output rows are all cold starts
        "max_window": telemetry(lambda t, i, role: False, cold_steps=()).assign(
            cold_start=lambda f: f["role"] == "grad_output"),
    }
    fig = figures.plot_saturation(frames, warmup_steps=2)
    close(fig)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3
    assert [ax.get_title() for ax in fig.axes] == list(ROLES)
    # one line per observer with rows, and the warmup marker
    assert [len(ax.lines) for ax in fig.axes] == [3, 3, 2]
    inputs, weights, grads = fig.axes
    most_recent = inputs.lines[0]
    assert most_recent.get_label() == "most_recent"
    # step 0 is a cold start: steps 1..5 with per-step means 0, 1, 0, 1, 0, then a rolling mean over 5 steps
    np.testing.assert_array_equal(most_recent.get_xdata(), [1, 2, 3, 4, 5])
    np.testing.assert_allclose(most_recent.get_ydata(), [0.0, 0.5, 1 / 3, 0.5, 0.4])
    np.testing.assert_allclose(weights.lines[0].get_ydata(), [0.5] * 5)
    np.testing.assert_array_equal(weights.lines[1].get_ydata(), [0.0] * 6)  # max_window: no cold start
    assert grads.lines[0].get_label() == "most_recent"
    assert inputs.lines[-1].get_xdata() == [2, 2]
    assert inputs.get_ylim() == (-0.02, 1.02)
    assert [t.get_text() for t in inputs.get_legend().get_texts()] == ["most_recent", "max_window"]


def test_plot_saturation_reads_numeric_flags(close):
    # as read back from telemetry.csv with 0/1 columns
    frame = telemetry(lambda t, i, role: int(t >= 3)).astype({"overflow": int, "cold_start": int})
    fig = figures.plot_saturation({"exp_smooth": frame}, warmup_steps=0)
    close(fig)
    np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), [0.0, 0.0, 1 / 3, 0.5, 0.6])


# --- downstream -----------------------------------------------------------------------------------------------


def test_plot_downstream(summary, close):
    fig = figures.plot_downstream(summary)
    close(fig)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    ax = fig.axes[0]
    mesh = ax.collections[0]
    values = np.asarray(mesh.get_array()).reshape(20, 4)  # 10 runs (the control too) x (BF16, HiF8) x 4 metrics
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[:4] == ["bf16-lrlow (BF16)", "bf16-lrlow (HiF8)", "bf16-lrhigh (BF16)", "bf16-lrhigh (HiF8)"]
    assert labels[-1] == "max_window-lrlow-w4-coarse_scale (HiF8)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["pretrain ppl", "cloze acc", "choice acc_norm",
                                                            "shift ppl"]
    np.testing.assert_array_equal(values[[0, 2]], 0.0)  # the baselines as trained
    np.testing.assert_array_equal(values[[1, 3]], 100 * 2**-6)  # the baselines after checkpoint quantization
    np.testing.assert_array_equal(values[labels.index("max_window-lrlow-w4 (BF16)")], 100 * 2**-9)
    np.testing.assert_array_equal(values[labels.index("max_window-lrlow-w4 (HiF8)")], 100 * (2**-9 + 2**-6))
    np.testing.assert_array_equal(values[labels.index("current-lrhigh-w4 (BF16)")], 100 * 2**-5)
    np.testing.assert_array_equal(values[labels.index("current-lrhigh-w4 (HiF8)")], 100 * 3 * 2**-6)
    assert mesh.get_clim() == (-4.6875, 4.6875)  # symmetric, the largest |drop| in percent
    assert len(ax.texts) == 80  # 20 rows (the control too) x 4 metrics
    assert fig.axes[1].get_ylabel() == "relative drop vs BF16 (%)"


def test_plot_downstream_colour_limit_is_at_least_one_percent(tmp_path, close):
    small = summarize(build_study(tmp_path, **{**PAPER_LIKE, "drop": 2**-9, "quant_drop": 2**-9}))
    fig = figures.plot_downstream(small)
    close(fig)
    assert fig.axes[0].collections[0].get_clim() == (-1.0, 1.0)


# --- forgetting -----------------------------------------------------------------------------------------------


def test_plot_forgetting(summary, close):
    fig = figures.plot_forgetting(summary)
    close(fig)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert len(ax.collections) == 2  # the runs and the base model
    points = np.asarray(ax.collections[0].get_offsets())
    assert points.shape == (10, 2)
    expected = [(r["metrics"]["shift_perplexity"], r["metrics"]["pretrain_perplexity"]) for r in summary["runs"]]
    np.testing.assert_array_equal(points, expected)  # seed means, in BF16
    np.testing.assert_array_equal(points[:3], [(24.0, 16.0), (20.0, 20.0), (24 * (1 + 2**-9), 16 * (1 + 2**-9))])
    np.testing.assert_array_equal(ax.collections[1].get_offsets(), [(48.0, 13.0)])
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[-1] == "base model"
    assert {"BF16", "most_recent", "exp_smooth", "max_window", "current", "high", "low"} <= set(labels)


# --- observer study -------------------------------------------------------------------------------------------


def test_plot_observer_study(cell, close):
    fig = figures.plot_observer_study(cell)
    close(fig)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3
    assert [ax.get_title() for ax in fig.axes] == ["spikes", "oscillation", "drift"]
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "linear", "linear"]
    assert [len(ax.lines) for ax in fig.axes] == [5, 5, 5]  # the trace and 4 observers
    spikes = fig.axes[0]
    np.testing.assert_array_equal(spikes.lines[0].get_ydata(), cell["traces"]["spikes"]["amax"])
    np.testing.assert_array_equal(spikes.lines[3].get_ydata(), cell["traces"]["spikes"]["prediction"]["max_window"])
    assert spikes.lines[4].get_label() == "current"
    assert spikes.lines[4].get_linestyle() == ":"
    assert [t.get_text() for t in spikes.get_legend().get_texts()] == ["amax", "most_recent", "exp_smooth",
                                                                       "max_window", "current"]
    assert fig.axes[-1].get_xlabel() == "step"


def test_plot_observer_study_other_kinds(cell, close):
    fig = figures.plot_observer_study(cell, kinds=("steady", "step_change"))
    close(fig)
    assert [ax.get_title() for ax in fig.axes] == ["steady", "step_change"]
    np.testing.assert_array_equal(fig.axes[1].lines[0].get_ydata(), cell["traces"]["step_change"]["amax"])


def test_plot_observer_study_one_kind(cell, close):
    fig = figures.plot_observer_study(cell, kinds=("spikes",))
    close(fig)
    assert len(fig.axes) == 1


# --- the report context ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claims(study):
    """The claims document of the paper-like study."""
    artifacts = study_artifacts(study)
    rows, checks = paper_claims(claim_specs(raw_config()["claims"]), artifacts, Evidence(0.95, 1000, 0))
    return claims_document(rows, checks, regime_card(artifacts))


@pytest.fixture(scope="module")
def setup(study, claims):
    """Our side of the setup table of the paper-like study."""
    return setup_of(study, claims["regime"])


def test_run_table(summary):
    table = run_table(summary)
    assert table["columns"] == ["run", "evaluated", "loss APE", "pretrain ppl", "cloze acc", "choice acc_norm",
                                "shift ppl"]
    assert table["caption"].startswith("Every run, means over seeds 0, 1: ")
    assert len(table["rows"]) == 10 * 2 + 1
    assert table["rows"][0] == ["bf16-lrlow", "BF16", "", "16", "0.5", "0.5", "24"]
    # after the checkpoint quantization: 2^-6 worse, 16.25, 0.4921875, 24.375
    assert table["rows"][1] == ["bf16-lrlow", "HiF8", "", "16.25", "0.4922", "0.4922", "24.38"]
    recipe = [r for r in table["rows"] if r[0] == "max_window-lrlow-w4"]
    # APE 2^-8 = 0.391%; in BF16 16 (1 + 2^-9) = 16.03, 0.5 (1 - 2^-9) = 0.499, 24 (1 + 2^-9) = 24.05; in HiF8
    # 2^-6 more: 16 (1 + 9 / 512) = 16.28
    assert recipe == [["max_window-lrlow-w4", "BF16", "0.391%", "16.03", "0.499", "0.499", "24.05"],
                      ["max_window-lrlow-w4", "HiF8", "0.391%", "16.28", "0.4912", "0.4912", "24.42"]]
    assert table["rows"][-1] == ["base model (before continual pretraining)", "BF16", "", "13", "0.625", "0.625",
                                 "48"]


def test_saturation_table(summary):
    table = saturation_table(summary)
    assert table["columns"][-3:] == ["rel. error, saturating", "rel. error, other", "mantissa bits lost"]
    assert len(table["rows"]) == 8 * 3  # QAT runs (the control too) x roles; the baselines have none
    # the recipe (max_window 2^-4, seed means), input: 6 layers x (2 calls x 8 steps - 1) delayed calls
    assert table["rows"][0] == ["max_window-lrlow-w4", "input", "90", "6.25%", "9.77e-04", "1.25e-01", "0.0625",
                                "0.0312", "1.00"]
    assert table["rows"][5] == ["most_recent-lrlow-w4", "grad_output", "90", "50.00%", "7.81e-03", "1.25e-01",
                                "0.0625", "0.0312", "1.00"]
    current = [r for r in table["rows"] if r[0].startswith("current-")]
    assert len(current) == 6
    assert {r[3] for r in current} == {"0.00%"}
    assert {r[5] for r in current} == {"0.00e+00"}
    assert {(r[6], r[8]) for r in current} == {("", "")}  # no saturating call: no conditional mean


def test_drop_table(summary):
    table = drop_table(summary)
    assert table["columns"] == ["run", "evaluated", "pretrain ppl", "cloze acc", "choice acc_norm", "shift ppl"]
    assert len(table["rows"]) == 10 * 2
    assert table["rows"][:2] == [["bf16-lrlow", "BF16", "+0.00%", "+0.00%", "+0.00%", "+0.00%"],
                                 ["bf16-lrlow", "HiF8", "+1.56%", "+1.56%", "+1.56%", "+1.56%"]]  # 2^-6
    recipe = [r for r in table["rows"] if r[0] == "max_window-lrlow-w4"]
    assert recipe == [["max_window-lrlow-w4", "BF16", "+0.20%", "+0.20%", "+0.20%", "+0.20%"],  # 2^-9
                      ["max_window-lrlow-w4", "HiF8", "+1.76%", "+1.76%", "+1.76%", "+1.76%"]]  # 2^-9 + 2^-6


def test_observer_table(cell):
    table = observer_table(cell)
    assert len(table["rows"]) == 6 * 4
    assert table["caption"].startswith("Synthetic observer study (100 steps, seed 0):")
    spikes = {r[1]: r for r in table["rows"] if r[0] == "spikes"}
    assert spikes["most_recent"][5:] == ["5", "5", "4"]
    assert spikes["max_window"][5:] == ["5", "1", "0"]
    assert spikes["current"][2:5] == [0, "1.00", "0.00"]
    steady = next(r for r in table["rows"] if r[:2] == ["steady", "current"])
    assert steady[5:] == ["", "", ""]


def test_build_context(summary, cell, claims, setup):
    figures_in = [{"id": f, "caption": figures.caption(f), "png": f"results/figures/{f}.png",
                   "pdf": f"results/figures/{f}.pdf"} for f in FIGURE_IDS]
    context = build_context(config=smoke_config(), profile="smoke", summary=summary, cell=cell, claims=claims,
                            setup=setup, figures=figures_in,
                            artifacts=["results/summary.json", "results/observer_study.json"],
                            rerun_examples=["results/maxwindow_hif8/eval/hif8/max_window-lrlow-w4/seed0/pretrain.json"],
                            seeds={"training data order": 0, "observer study": 0}, stage_seconds={"run": 1.0})
    assert context["paper"] == PAPER
    runs = len(run_names(smoke_config()))
    assert runs == 10
    assert [len(t["rows"]) for t in context["tables"]] == [2 * runs + 1, 2 * runs, 8 * 3, 24]
    assert [c["id"] for c in context["claims"]] == list(raw_config()["claims"])
    assert context["claims"] == claims["claims"]
    assert context["checks"] == claims["checks"]
    assert context["counts"] == claims["counts"]
    assert context["regime"] == claims["regime"]
    assert context["setup"] == setup_rows(raw_config()["paper_setup"], setup)
    assert [row["aspect"] for row in context["setup"]] == ["Model and size", "Data", "Tokens", "Steps",
                                                           "Learning rates", "Seeds", "Layers quantized", "Evaluation"]
    assert "t-interval over the seeds" in context["paper"]["method"]
    assert "circular block bootstrap over training steps" in context["paper"]["method"]
    assert len(context["artifacts"]) == 2 + 2 * 5
    assert context["artifacts"][0] == "results/figures/downstream.pdf"
    assert context["rerun"][0] == {"cell": "the whole report", "command": "snakemake --profile "
                                   "workflow/profiles/smoke reports/smoke/maxwindow_hif8.html"}  # the profile's paths
    assert context["rerun"][1]["cell"] == "pretrain.json"
    assert context["rerun"][-1]["command"] == "sha256sum -c reports/smoke/maxwindow_hif8.SHA256SUMS"
    assert context["sums"] == "reports/smoke/maxwindow_hif8.SHA256SUMS"
    assert context["provenance"]["seeds"] == {"training data order": 0, "observer study": 0}
    assert context["provenance"]["stage_seconds"] == {"run": 1.0}


def test_build_context_refuses_a_typed_verdict(summary, cell, claims, setup):
    bad = {**claims, "claims": [*claims["claims"][:-1], {**claims["claims"][-1], "verdict": "confirmed"}]}
    last = claims["claims"][-1]["id"]  # control_most_recent_saturates_input
    with pytest.raises(ValueError, match=rf"claim '{last}': verdict 'confirmed' is not one of"):
        build_context(config=smoke_config(), profile="smoke", summary=summary, cell=cell, claims=bad, setup=setup,
                      figures=[], artifacts=[], rerun_examples=[], seeds={}, stage_seconds={})


def test_build_context_refuses_a_setup_of_other_aspects(summary, cell, claims, setup):
    with pytest.raises(ValueError, match=r"ours lacks \['Seeds'\], the paper's lacks nothing"):
        build_context(config=smoke_config(), profile="smoke", summary=summary, cell=cell, claims=claims,
                      setup={k: v for k, v in setup.items() if k != "Seeds"}, figures=[], artifacts=[],
                      rerun_examples=[], seeds={}, stage_seconds={})


def test_context_renders_with_the_shared_cli(study, summary, cell, claims, setup, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    (results / "figures").mkdir(parents=True)
    (results / "summary.json").write_text(json.dumps(summary))
    (results / "observer_study.json").write_text(json.dumps(cell))
    (results / "claims.json").write_text(json.dumps(claims))
    frames = {"most_recent": telemetry(lambda t, i, role: t % 2 == 0), "max_window": telemetry(lambda t, i, r: False)}
    drawn = {"loss-curves": figures.plot_loss_curves(summary), "saturation": figures.plot_saturation(frames, 4),
             "downstream": figures.plot_downstream(summary), "forgetting": figures.plot_forgetting(summary),
             "observer-study": figures.plot_observer_study(cell)}
    entries = []
    for figure_id, fig in drawn.items():
        png, pdf = f"results/figures/{figure_id}.png", f"results/figures/{figure_id}.pdf"
        save_figure(fig, png, pdf)
        plt.close(fig)
        entries.append({"id": figure_id, "caption": figures.caption(figure_id), "png": png, "pdf": pdf})
    context = build_context(config=study["config"], profile="smoke", summary=summary, cell=cell, claims=claims,
                            setup=setup, figures=entries,
                            artifacts=["results/summary.json", "results/observer_study.json", "results/claims.json"],
                            rerun_examples=[], seeds={"workflow": 0}, stage_seconds={})
    (tmp_path / "context.json").write_text(json.dumps(context))
    assert report_main(["render", "--context", "context.json", "--html", "r.html", "--tex", "r.tex",
                        "--sums", "r.SHA256SUMS"]) == 0
    html = (tmp_path / "r.html").read_text()
    assert html.count('class="verdict verdict-reproduced"') == sum(counts["reproduced"]
                                                                   for counts in claims["counts_by_kind"].values())
    assert html.count('class="verdict verdict-contradicted"') == sum(counts["contradicted"]
                                                                     for counts in claims["counts_by_kind"].values())
    assert "Max-Window scale estimation for near-lossless HiF8 W8A8 QAT" in html
    assert "<th>Model and size</th><td>OpenPangu-Embedded-1B (Huawei, pretrained)" in html
    assert 'id="regime-quantized_share"' in html
    assert html.count("data:image/png;base64,") == 5
    assert verify_sha256sums("r.SHA256SUMS") == []
    assert "results/claims.json" in (tmp_path / "r.SHA256SUMS").read_text()
