"""The study's summary: loss APE, relative drops, standard errors, the evaluated metrics, the 18-row summary of a
synthetic study (hand-computed drops), the synthetic observer cell and the flat run table."""

import math

import numpy as np
import pytest
from mw_testing import (
    BASE,
    BF16_LOW,
    EXAMPLES,
    PRE_WARMUP_ERROR,
    baseline_loss,
    bf16_high,
    build_study,
    evaluation,
    smoke_config,
    summarize,
)

from common.analysis.observer_study import TRACE_KINDS, amax_trace, observer_study
from papers.maxwindow_hif8.settings import run_names
from papers.maxwindow_hif8.study import (
    all_rows,
    drops,
    evaluated_metrics,
    loss_ape,
    loss_errors,
    observer_cell,
    read_losses,
    recipe_row,
    row_of,
    run_table,
)

METRIC_NAMES = ["pretrain_perplexity", "cloze_acc", "choice_acc_norm", "shift_perplexity"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def summary(study):
    return summarize(study)


@pytest.fixture(scope="module")
def cell100():
    return observer_cell(smoke_config(observer_study={"steps": 100, "seed": 0}))


# --- loss APE -------------------------------------------------------------------------------------------------


def test_loss_ape_is_the_mean_relative_error_over_common_steps():
    losses = {0: 2.0, 1: 3.0, 2: 5.0}
    reference = {0: 4.0, 1: 2.0, 2: 4.0, 3: 1.0}
    # |2-4|/4 = 0.5, |3-2|/2 = 0.5, |5-4|/4 = 0.25
    assert loss_ape(losses, reference) == 1.25 / 3
    assert loss_ape(losses, reference, start=1) == 0.375
    assert loss_ape(losses, reference, start=2) == 0.25


def test_loss_ape_skips_steps_only_one_log_has():
    assert loss_ape({0: 1.5, 5: 3.0, 7: 9.0}, {0: 1.0, 7: 8.0, 9: 1.0}) == (0.5 + 0.125) / 2
    # the per-step errors the claims bootstrap: the common steps, ascending
    errors = loss_errors({7: 9.0, 0: 1.5, 5: 3.0}, {9: 1.0, 7: 8.0, 0: 1.0})
    assert list(errors.items()) == [(0, 0.5), (7, 0.125)]


def test_loss_ape_without_a_common_step():
    with pytest.raises(ValueError, match=r"no common training step at or after step 3"):
        loss_ape({0: 2.0, 1: 3.0, 2: 5.0}, {0: 4.0, 1: 2.0, 2: 4.0, 3: 1.0}, start=3)
    with pytest.raises(ValueError, match=r"no common training step at or after step 0"):
        loss_ape({0: 1.0}, {1: 1.0})


def test_read_losses(study):
    losses = read_losses(study["logs"]["most_recent-lrhigh-w4"])
    assert sorted(losses) == list(range(12))
    assert losses[3] == baseline_loss("high", 3) * (1 + PRE_WARMUP_ERROR)
    assert losses[4] == baseline_loss("high", 4) * (1 + 2**-8)


# --- drops ---------------------------------------------------------------------------------


def test_drops_per_metric():
    metrics = {"pretrain_perplexity": 20.0, "cloze_acc": 0.375, "choice_acc_norm": 0.625, "shift_perplexity": 12.0}
    assert drops(metrics, {**BF16_LOW, "shift_perplexity": 16.0}) == {
        "pretrain_perplexity": 0.25, "cloze_acc": 0.25, "choice_acc_norm": -0.25, "shift_perplexity": -0.25}


# --- evaluated metrics ----------------------------------------------------------------------------------------


def test_evaluated_metrics():
    pretrain = evaluation("models/x", {**BF16_LOW, "cloze_acc": 0.25}, "pretrain", examples=3)
    shift = evaluation("models/x", BF16_LOW, "shift")
    assert evaluated_metrics(pretrain, shift) == {
        "pretrain_perplexity": 16.0, "cloze_acc": 0.25, "cloze_acc_n": 3, "cloze_acc_se": 0.25,
        "choice_acc_norm": 0.5, "choice_acc_norm_n": 3, "choice_acc_norm_se": math.sqrt(0.25 / 3),
        "shift_perplexity": 24.0}


def test_evaluated_metrics_uses_acc_norm_of_the_choice_task():
    pretrain = evaluation("models/x", BF16_LOW, "pretrain")
    assert pretrain["metrics"]["choice"]["acc"] == 0.25  # the plain accuracy differs: must not be read
    assert evaluated_metrics(pretrain, evaluation("models/x", BF16_LOW, "shift"))["choice_acc_norm"] == 0.5


@pytest.mark.parametrize(("corpus", "group"), [("pretrain", "cloze"), ("pretrain", "choice"),
                                               ("pretrain", "perplexity"), ("shift", "perplexity")])
def test_evaluated_metrics_names_a_missing_group(corpus, group):
    records = {role: evaluation(f"models/{role}", BF16_LOW, role) for role in ("pretrain", "shift")}
    del records[corpus]["metrics"][group]
    with pytest.raises(ValueError, match=rf"the {corpus} evaluation of 'models/{corpus}' has no '{group}' metric"):
        evaluated_metrics(records["pretrain"], records["shift"])


# --- the study summary ----------------------------------------------------------------------------------------


def test_summary_rows_follow_the_grid(study, summary):
    assert [r["run"] for r in summary["runs"]] == run_names(study["config"])
    assert len(summary["runs"]) == 18
    assert summary["warmup_steps"] == 4
    assert summary["learning_rates"] == {"high": 3.0e-3, "low": 1.5e-5}
    assert summary["recipe"] == "max_window-lrlow-w4"
    assert recipe_row(summary)["run"] == "max_window-lrlow-w4"
    assert [r["precision"] for r in summary["runs"]] == ["bf16"] * 2 + ["hif8"] * 16


def test_baseline_rows(summary):
    for rate in ("high", "low"):
        row = row_of(summary, f"bf16-lr{rate}")
        assert row["observer"] is None
        assert row["loss_ape"] is None
        assert row["warmup_steps"] == 0
        assert row["saturation"] == {}
        assert row["drop"] == dict.fromkeys(METRIC_NAMES, 0.0)
        assert row["steps"] == 12
        assert row["final_loss"] == baseline_loss(rate, 11)
    assert row_of(summary, "bf16-lrlow")["metrics"]["pretrain_perplexity"] == 16.0
    assert row_of(summary, "bf16-lrhigh")["metrics"]["pretrain_perplexity"] == 20.0
    # the high-rate baseline against the low-rate one: forgets (+25%), learns the shift (-1/6 perplexity)
    assert row_of(summary, "bf16-lrhigh")["drop_vs_low_rate_bf16"] == {
        "pretrain_perplexity": 0.25, "cloze_acc": 0.25, "choice_acc_norm": 0.25, "shift_perplexity": -1 / 6}


def test_qat_row_by_hand(summary):
    row = row_of(summary, "most_recent-lrhigh-w4")
    assert (row["observer"], row["rate"], row["lr"], row["warmup_steps"]) == ("most_recent", "high", 3.0e-3, 4)
    # from the warmup step on the loss is the baseline's times (1 + 2^-8); the first 4 steps (error 0.25) are skipped
    assert row["loss_ape"] == 2**-8
    assert row["final_loss"] == 2.625 * (1 + 2**-8)
    assert row["metrics"] == {
        "pretrain_perplexity": 20.625, "cloze_acc": 0.36328125, "cloze_acc_n": EXAMPLES,
        "cloze_acc_se": math.sqrt(0.36328125 * 0.63671875 / EXAMPLES), "choice_acc_norm": 0.36328125,
        "choice_acc_norm_n": EXAMPLES, "choice_acc_norm_se": math.sqrt(0.36328125 * 0.63671875 / EXAMPLES),
        "shift_perplexity": 20.625}
    assert row["drop"] == dict.fromkeys(METRIC_NAMES, 2**-5)
    # against the low-rate BF16 baseline (16, 0.5, 0.5, 24)
    assert row["drop_vs_low_rate_bf16"] == {"pretrain_perplexity": 4.625 / 16, "cloze_acc": 0.13671875 / 0.5,
                                            "choice_acc_norm": 0.13671875 / 0.5, "shift_perplexity": -3.375 / 24}
    assert row["drop_vs_low_rate_bf16"]["pretrain_perplexity"] == 0.2890625
    assert row["saturation"]["grad_output"]["overflow_rate"] == 0.4
    assert row["saturation"]["input"]["calls"] == 6 * (12 - 4 - 1)


def test_loss_ape_of_a_run_without_warmup_uses_every_step(tmp_path):
    study = build_study(tmp_path, apes={"max_window-lrlow-w0": 2**-6, "max_window-lrlow-w4": 2**-4})
    summary = summarize(study)
    assert row_of(summary, "max_window-lrlow-w0")["loss_ape"] == 2**-6
    assert row_of(summary, "max_window-lrlow-w4")["loss_ape"] == 2**-4
    assert row_of(summary, "current-lrlow-w4")["loss_ape"] == 2**-8


def test_recipe_row_by_hand(summary):
    row = recipe_row(summary)
    assert row["metrics"]["pretrain_perplexity"] == 16.03125
    assert row["drop"] == dict.fromkeys(METRIC_NAMES, 2**-9)
    assert row["drop_vs_low_rate_bf16"] == row["drop"]


def test_summary_losses(summary):
    assert summary["losses"]["bf16-lrlow"] == [4.0 - t / 16 for t in range(12)]
    assert summary["losses"]["exp_smooth-lrhigh-w0"] == [(4.0 - t / 8) * (1 + 2**-8) for t in range(12)]
    assert len(summary["losses"]) == 18


def test_ptq_rows(summary):
    assert [(p["run"], p["rate"]) for p in summary["ptq"]] == [("bf16-lrhigh", "high"), ("bf16-lrlow", "low")]
    low = summary["ptq"][1]
    assert low["metrics"]["pretrain_perplexity"] == 16.25
    assert low["metrics"]["cloze_acc"] == 0.4921875
    assert low["drop"] == dict.fromkeys(METRIC_NAMES, 2**-6)
    assert summary["ptq"][0]["metrics"]["pretrain_perplexity"] == 20.3125


def test_base_metrics(summary):
    assert summary["base"]["pretrain_perplexity"] == BASE["pretrain_perplexity"]
    assert summary["base"]["shift_perplexity"] == 48.0
    assert summary["base"]["cloze_acc_se"] == math.sqrt(0.625 * 0.375 / EXAMPLES)


def test_train_seconds_default_to_zero(study):
    seconds = {k: v for k, v in study["train_seconds"].items() if k != "current-lrlow-w0"}
    summary = summarize({**study, "train_seconds": seconds})
    assert row_of(summary, "current-lrlow-w0")["train_seconds"] == 0.0
    assert row_of(summary, "bf16-lrhigh")["train_seconds"] == 2.0
    assert row_of(summary, "bf16-lrlow")["train_seconds"] == 4.0


@pytest.mark.parametrize("key", ["bf16/base/pretrain", "bf16/bf16-lrlow/shift", "hif8/bf16-lrhigh/pretrain",
                                 "hif8/max_window-lrlow-w4/shift", "hif8/most_recent-lrhigh-w0/pretrain"])
def test_a_missing_evaluation_is_named(study, key):
    evaluations = {k: v for k, v in study["evaluations"].items() if k != key}
    with pytest.raises(ValueError, match=rf"missing evaluation\(s\): {key}$"):
        summarize({**study, "evaluations": evaluations})


@pytest.mark.parametrize(("table", "what"), [("logs", "training log"), ("saturation", "saturation summary")])
def test_a_missing_run_artifact_is_named(study, table, what):
    partial = {k: v for k, v in study[table].items() if k != "exp_smooth-lrlow-w4"}
    with pytest.raises(ValueError, match=rf"run 'exp_smooth-lrlow-w4' has no {what}"):
        summarize({**study, table: partial})


def test_summary_of_another_warmup(tmp_path):
    config = smoke_config(bf16_warmup_steps=6)
    summary = summarize(build_study(tmp_path, config))
    assert summary["recipe"] == "max_window-lrlow-w6"
    assert recipe_row(summary)["drop"]["pretrain_perplexity"] == 2**-9
    assert row_of(summary, "max_window-lrlow-w6")["loss_ape"] == 2**-8


# --- rows and the flat table ----------------------------------------------------------------------------------


def test_row_of_names_a_missing_run(summary):
    with pytest.raises(ValueError, match=r"run 'max_window-lrlow-w40' is not in the summary; runs: bf16-lrhigh, "
                                         r"bf16-lrlow, most_recent-lrhigh-w0,"):
        row_of(summary, "max_window-lrlow-w40")


def test_all_rows(summary):
    assert [r["run"] for r in all_rows(summary, rate="low", warmup_steps=4)] == [
        "most_recent-lrlow-w4", "exp_smooth-lrlow-w4", "max_window-lrlow-w4", "current-lrlow-w4"]
    assert len(all_rows(summary, rate="high")) == 9
    assert [r["run"] for r in all_rows(summary, observer=None)] == ["bf16-lrhigh", "bf16-lrlow"]
    assert len(all_rows(summary)) == 18


def test_run_table(summary):
    table = run_table(summary)
    assert len(table) == 18
    assert table[1] == {"run": "bf16-lrlow", "observer": None, "rate": "low", "warmup_steps": 0, "precision": "bf16",
                        "final_loss": 4.0 - 11 / 16, "loss_ape": None, **BF16_LOW,
                        **{f"drop_{m}": 0.0 for m in METRIC_NAMES}}
    recipe = next(r for r in table if r["run"] == "max_window-lrlow-w4")
    assert recipe["loss_ape"] == 2**-8
    assert recipe["pretrain_perplexity"] == 16.03125
    assert recipe["drop_cloze_acc"] == 2**-9
    assert recipe["input_overflow_rate"] == 0.05
    assert recipe["weight_overflow_rate"] == 0.025
    assert recipe["grad_output_overflow_rate"] == 0.1
    assert not any(k.endswith(("_n", "_se")) for k in recipe)
    assert set(table[0]) == set(table[1])  # no saturation columns for a baseline
    assert bf16_high(0.25)["pretrain_perplexity"] == table[0]["pretrain_perplexity"]


# --- the synthetic observer cell ------------------------------------------------------------------------------


def test_observer_cell_rows(cell100):
    assert (cell100["steps"], cell100["seed"]) == (100, 0)
    assert cell100["observer_options"] == {"exp_smooth": {"alpha": 0.1}, "max_window": {"window": 64}}
    rows = cell100["rows"]
    assert len(rows) == 6 * 4
    assert [(r["kind"], r["observer"]) for r in rows[:4]] == [
        ("steady", "most_recent"), ("steady", "exp_smooth"), ("steady", "max_window"), ("steady", "current")]
    assert rows == observer_study(TRACE_KINDS, ["most_recent", "exp_smooth", "max_window", "current"], steps=100,
                                  seed=0, observer_options=cell100["observer_options"])
    spikes = {r["observer"]: r for r in rows if r["kind"] == "spikes"}
    assert spikes["most_recent"]["spike_count"] == 5  # steps 10, 30, 50, 70, 90
    assert spikes["most_recent"]["spike_saturations"] == 5
    assert spikes["max_window"]["spike_saturations"] == 1
    assert spikes["max_window"]["recurring_spike_saturations"] == 0
    assert spikes["current"]["saturation_events"] == 0
    assert all(r["spike_count"] is None for r in rows if r["kind"] in ("steady", "drift", "oscillation"))


def test_observer_cell_traces(cell100):
    traces = cell100["traces"]
    assert list(traces) == list(TRACE_KINDS)
    for kind, trace in traces.items():
        assert len(trace["amax"]) == 100
        assert trace["amax"] == amax_trace(kind, 100, seed=0).tolist()
        assert list(trace["prediction"]) == ["most_recent", "exp_smooth", "max_window", "current"]
        assert all(len(p) == 100 for p in trace["prediction"].values())
        assert trace["prediction"]["current"] == trace["amax"]
        assert trace["prediction"]["most_recent"] == trace["amax"][:1] + trace["amax"][:-1]
    assert traces["spikes"]["spikes"] == [10, 30, 50, 70, 90]
    assert traces["steady"]["spikes"] == []
    assert traces["drift"]["spikes"] == []
    assert all(0 <= t < 100 for t in traces["random_spikes"]["spikes"])
    assert all(traces["random_spikes"]["amax"][t] == 10.0 for t in traces["random_spikes"]["spikes"])


def test_observer_cell_max_window_and_exp_smooth_predictions(cell100):
    amax = cell100["traces"]["spikes"]["amax"]
    window = cell100["traces"]["spikes"]["prediction"]["max_window"]
    assert window[0] == amax[0]
    for t in range(1, 100):
        assert window[t] == max(amax[max(0, t - 64):t])
        assert window[t] >= amax[t - 1]
    assert window[10] < amax[10]  # the first spike saturates
    assert all(window[t] == 10.0 for t in range(11, 100))  # every later step remembers a spike within 64 steps
    drift = cell100["traces"]["drift"]
    smooth = drift["prediction"]["exp_smooth"]
    expected = [drift["amax"][0], drift["amax"][0]]
    for t in range(2, 100):
        expected.append(0.1 * drift["amax"][t - 1] + 0.9 * expected[-1])
    assert smooth == pytest.approx(expected, rel=1e-12)
    assert all(s < a for s, a in zip(smooth[1:], drift["amax"][1:], strict=True))  # lags a monotone rise


def test_observer_cell_shows_at_most_160_steps():
    cell = observer_cell(smoke_config())  # 200 steps
    assert cell["steps"] == 200
    assert len(cell["rows"]) == 24
    spikes = cell["traces"]["spikes"]
    assert len(spikes["amax"]) == 160
    assert spikes["spikes"] == list(range(10, 160, 20))
    assert all(len(p) == 160 for p in spikes["prediction"].values())
    assert spikes["amax"] == amax_trace("spikes", 200, seed=0)[:160].tolist()
    # the rows score every step, not the shown ones: 10 spikes in 200 steps
    assert next(r for r in cell["rows"] if (r["kind"], r["observer"]) == ("spikes", "most_recent"))[
        "spike_count"] == 10


def test_observer_cell_passes_observer_options_and_seed():
    config = smoke_config(observer_study={"steps": 100, "seed": 3}, observers=["max_window"],
                          observer_options={"max_window": {"window": 4}})
    cell = observer_cell(config)
    assert len(cell["rows"]) == 6 * 4  # every observer, whichever the runs train with
    assert cell["seed"] == 3
    assert cell["traces"]["steady"]["amax"] == amax_trace("steady", 100, seed=3).tolist()
    spikes = next(r for r in cell["rows"] if (r["kind"], r["observer"]) == ("spikes", "max_window"))
    # a window of 4 < the spike period 20: every spike saturates again
    assert spikes["spike_saturations"] == spikes["spike_count"] == 5
    prediction = np.array(cell["traces"]["spikes"]["prediction"]["max_window"])
    amax = np.array(cell["traces"]["spikes"]["amax"])
    assert prediction[35] == amax[31:35].max()
    assert prediction[35] < 10.0
    assert list(cell["traces"]["spikes"]["prediction"]) == ["max_window", "most_recent", "exp_smooth", "current"]
