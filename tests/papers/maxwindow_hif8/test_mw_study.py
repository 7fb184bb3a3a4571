"""The study's summary: loss APE, relative drops, standard errors, the evaluated metrics, the 9-row summary of a
synthetic two-seed study (hand-computed per-seed values, seed means and drops, in BF16 and in HiF8), the synthetic
observer cell and the flat run table."""

import math

import numpy as np
import pytest
from mw_testing import (
    BASE,
    BF16_LOW,
    ERROR_IN_RANGE,
    ERROR_OVERFLOW,
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
    drops,
    evaluated_metrics,
    loss_ape,
    loss_errors,
    observer_cell,
    read_losses,
    run_table,
)

METRIC_NAMES = ["pretrain_perplexity", "cloze_acc", "choice_acc_norm", "shift_perplexity"]
RUNS = ["bf16-lrlow", "bf16-lrhigh", "max_window-lrlow-w4", "most_recent-lrlow-w4", "max_window-lrlow-w0",
        "max_window-lrhigh-w4", "current-lrlow-w4", "current-lrhigh-w4", "exp_smooth-lrlow-w4",
        "max_window-lrlow-w4-coarse_scale"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def summary(study):
    return summarize(study)


@pytest.fixture(scope="module")
def cell100():
    return observer_cell(smoke_config(observer_study={"steps": 100, "seed": 0}))


def row_of(summary, run):
    (row,) = [r for r in summary["runs"] if r["run"] == run]
    return row


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
    assert study["logs"]["most_recent-lrlow-w4", 1].endswith("most_recent-lrlow-w4/seed1/train_log.csv")
    for seed, ape in ((0, 9 * 2**-11), (1, 7 * 2**-11)):  # 2^-8 times the seed factors 1.125 and 0.875
        losses = read_losses(study["logs"]["most_recent-lrlow-w4", seed])
        assert sorted(losses) == list(range(12))
        assert losses[3] == baseline_loss("low", 3) * (1 + PRE_WARMUP_ERROR)
        assert losses[4] == baseline_loss("low", 4) * (1 + ape)


def test_read_losses_of_an_empty_log(tmp_path):
    (tmp_path / "train_log.csv").write_text("step,loss\n")
    with pytest.raises(ValueError, match="has no step"):
        read_losses(tmp_path / "train_log.csv")


# --- drops ---------------------------------------------------------------------------------


def test_drops_per_metric():
    metrics = {"pretrain_perplexity": 20.0, "cloze_acc": 0.375, "choice_acc_norm": 0.625, "shift_perplexity": 12.0}
    assert drops(metrics, {**BF16_LOW, "shift_perplexity": 16.0}) == {
        "pretrain_perplexity": 0.25, "cloze_acc": 0.25, "choice_acc_norm": -0.25, "shift_perplexity": -0.25}
    assert drops(metrics, {**BF16_LOW, "cloze_acc": 0.0})["cloze_acc"] is None  # undefined against 0


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


def test_summary_rows_follow_the_study_runs(study, summary):
    assert [r["run"] for r in summary["runs"]] == run_names(study["config"]) == RUNS
    assert summary["seeds"] == [0, 1]
    assert summary["warmup_steps"] == 4
    assert summary["learning_rates"] == {"high": 1.5e-4, "low": 1.5e-5}
    assert summary["recipe"] == "max_window-lrlow-w4"
    assert all(list(r["seeds"]) == [0, 1] for r in summary["runs"])
    assert set(summary["runs"][0]) == {"run", "observer", "rate", "lr", "warmup_steps", "steps", "seeds",
                                       "final_loss", "loss_ape", "train_seconds", "metrics", "metrics_hif8",
                                       "saturation", "drop", "drop_hif8"}
    assert set(summary["runs"][0]["seeds"][0]) == {"final_loss", "loss_ape", "metrics", "metrics_hif8",
                                                   "saturation", "train_seconds"}


def test_baseline_rows(summary):
    for rate in ("high", "low"):
        row = row_of(summary, f"bf16-lr{rate}")
        assert row["observer"] is None
        assert row["loss_ape"] is None
        assert [row["seeds"][s]["loss_ape"] for s in (0, 1)] == [None, None]
        assert row["warmup_steps"] == 0
        assert row["saturation"] == {}
        assert row["drop"] == dict.fromkeys(METRIC_NAMES, 0.0)
        assert row["drop_hif8"] == dict.fromkeys(METRIC_NAMES, 2**-6)  # the checkpoint quantization alone
        assert row["steps"] == 12
        assert row["final_loss"] == baseline_loss(rate, 11)
    assert row_of(summary, "bf16-lrlow")["metrics"]["pretrain_perplexity"] == 16.0
    assert row_of(summary, "bf16-lrlow")["metrics_hif8"]["pretrain_perplexity"] == 16.25
    assert row_of(summary, "bf16-lrhigh")["metrics"]["pretrain_perplexity"] == 20.0
    assert row_of(summary, "bf16-lrhigh")["lr"] == 1.5e-4


def test_qat_row_per_seed_and_mean_by_hand(summary):
    row = row_of(summary, "most_recent-lrlow-w4")
    assert (row["observer"], row["rate"], row["lr"], row["warmup_steps"]) == ("most_recent", "low", 1.5e-5, 4)
    seed0, seed1 = row["seeds"][0], row["seeds"][1]
    # APE 2^-8 times the seed factors 1.125, 0.875 (the first 4 steps, error 0.25, skipped); the mean is 2^-8
    assert (seed0["loss_ape"], seed1["loss_ape"], row["loss_ape"]) == (9 * 2**-11, 7 * 2**-11, 2**-8)
    final = baseline_loss("low", 11)
    assert (seed0["final_loss"], seed1["final_loss"]) == (final * (1 + 9 * 2**-11), final * (1 + 7 * 2**-11))
    assert row["final_loss"] == (seed0["final_loss"] + seed1["final_loss"]) / 2
    # in BF16: drop 2^-5 times the seed factor, 9/256 and 7/256: perplexity 16 (1 + d), accuracy 0.5 (1 - d)
    assert seed0["metrics"]["pretrain_perplexity"] == 16.5625
    assert seed1["metrics"]["pretrain_perplexity"] == 16.4375
    assert (seed0["metrics"]["cloze_acc"], seed1["metrics"]["cloze_acc"]) == (0.482421875, 0.486328125)
    assert row["metrics"] == {
        "pretrain_perplexity": 16.5, "cloze_acc": 0.484375, "cloze_acc_n": EXAMPLES,
        "cloze_acc_se": (math.sqrt(0.482421875 * 0.517578125 / EXAMPLES)
                         + math.sqrt(0.486328125 * 0.513671875 / EXAMPLES)) / 2,
        "choice_acc_norm": 0.484375, "choice_acc_norm_n": EXAMPLES,
        "choice_acc_norm_se": row["metrics"]["cloze_acc_se"], "shift_perplexity": 24.75}
    assert row["drop"] == dict.fromkeys(METRIC_NAMES, 2**-5)  # of the seed means
    # in HiF8: 2^-6 more, 13/256 and 11/256: the mean drop 3/64
    assert (seed0["metrics_hif8"]["pretrain_perplexity"], seed1["metrics_hif8"]["pretrain_perplexity"]) == (
        16.8125, 16.6875)
    assert row["metrics_hif8"]["pretrain_perplexity"] == 16.75
    assert row["drop_hif8"] == dict.fromkeys(METRIC_NAMES, 3 * 2**-6)
    # saturation: most_recent 0.25 times the role factor (grad_output 2) and the seed factor; 6 layers x (2 calls x
    # 8 HiF8 steps - the cold start) delayed calls
    assert [row["seeds"][s]["saturation"]["grad_output"]["overflow_rate"] for s in (0, 1)] == [0.5625, 0.4375]
    assert row["saturation"]["grad_output"]["overflow_rate"] == 0.5
    assert row["saturation"]["input"] == {
        "calls": 90, "overflow_rate": 0.25, "mean_over_range": 0.25 / 64, "max_over_range": 0.125,
        "mean_clipped": 0.0, "overflow_rows": 22.5, "rel_error_overflow": ERROR_OVERFLOW,
        "rel_error_no_overflow": ERROR_IN_RANGE, "mean_mantissa_bits_lost": 1.0}
    assert row["train_seconds"] == (8.0 + 9.0) / 2  # the 4th run: 2 x 4 + seed
    assert (seed0["train_seconds"], seed1["train_seconds"]) == (8.0, 9.0)


def test_a_run_without_saturation_keeps_undefined_means(summary):
    current = row_of(summary, "current-lrlow-w4")["saturation"]["input"]
    assert current["overflow_rate"] == 0.0
    assert current["rel_error_overflow"] is None  # no saturating call in any seed
    assert current["mean_mantissa_bits_lost"] is None
    assert current["rel_error_no_overflow"] == ERROR_IN_RANGE


def test_three_seeds_average_exactly(tmp_path):
    summary = summarize(build_study(tmp_path, smoke_config(seeds=[0, 1, 2])))
    row = row_of(summary, "max_window-lrlow-w0")
    assert summary["seeds"] == [0, 1, 2]
    assert list(row["seeds"]) == [0, 1, 2]
    assert [row["seeds"][s]["loss_ape"] for s in (0, 1, 2)] == [9 * 2**-11, 7 * 2**-11, 2**-8]
    assert row["loss_ape"] == 2**-8
    assert row["drop"] == dict.fromkeys(METRIC_NAMES, 2**-5)
    assert row["metrics"]["pretrain_perplexity"] == 16.5


def test_loss_ape_of_a_run_without_warmup_uses_every_step(tmp_path):
    study = build_study(tmp_path, apes={"max_window-lrlow-w0": 2**-6, "max_window-lrlow-w4": 2**-4})
    summary = summarize(study)
    assert row_of(summary, "max_window-lrlow-w0")["loss_ape"] == 2**-6
    assert row_of(summary, "max_window-lrlow-w0")["seeds"][0]["loss_ape"] == 9 * 2**-9
    assert row_of(summary, "max_window-lrlow-w4")["loss_ape"] == 2**-4
    assert row_of(summary, "current-lrlow-w4")["loss_ape"] == 2**-8


def test_recipe_row_by_hand(summary):
    row = row_of(summary, summary["recipe"])
    assert row["metrics"]["pretrain_perplexity"] == 16.03125
    assert row["seeds"][0]["metrics"]["pretrain_perplexity"] == 16 * (1 + 9 * 2**-12)
    assert row["drop"] == dict.fromkeys(METRIC_NAMES, 2**-9)
    assert row["drop_hif8"] == dict.fromkeys(METRIC_NAMES, 2**-9 + 2**-6)
    assert row["saturation"]["weight"]["overflow_rate"] == 2**-5  # max_window 2^-4 x the weight factor 0.5


def test_high_rate_rows_are_against_the_high_rate_baseline(summary):
    row = row_of(summary, "max_window-lrhigh-w4")
    assert row["metrics"]["pretrain_perplexity"] == 20.0 * (1 + 2**-5)
    assert row["drop"] == dict.fromkeys(METRIC_NAMES, 2**-5)


def test_summary_losses(summary):
    assert summary["losses"]["bf16-lrlow"] == [4.0 - t / 16 for t in range(12)]
    assert summary["losses"]["max_window-lrhigh-w4"] == [
        (4.0 - t / 8) * (1 + (2**-8 if t >= 4 else PRE_WARMUP_ERROR)) for t in range(12)]  # the seed mean
    assert summary["losses"]["max_window-lrlow-w0"] == [(4.0 - t / 16) * (1 + 2**-8) for t in range(12)]
    assert list(summary["losses"]) == RUNS


def test_base_metrics(summary):
    assert summary["base"]["pretrain_perplexity"] == BASE["pretrain_perplexity"]
    assert summary["base"]["shift_perplexity"] == 48.0
    assert summary["base"]["cloze_acc_se"] == math.sqrt(0.625 * 0.375 / EXAMPLES)


def test_train_seconds_default_to_zero(study):
    seconds = {k: v for k, v in study["train_seconds"].items() if k != ("current-lrlow-w4", 1)}
    summary = summarize({**study, "train_seconds": seconds})
    assert row_of(summary, "current-lrlow-w4")["seeds"][1]["train_seconds"] == 0.0
    assert row_of(summary, "current-lrlow-w4")["train_seconds"] == 14.0 / 2  # (14 + 0) / 2
    assert row_of(summary, "bf16-lrlow")["train_seconds"] == 2.5
    assert row_of(summary, "bf16-lrhigh")["train_seconds"] == 4.5


@pytest.mark.parametrize("key", ["bf16/base/pretrain", "bf16/bf16-lrlow/seed0/shift", "hif8/bf16-lrhigh/seed1/pretrain",
                                 "hif8/max_window-lrlow-w4/seed0/shift", "bf16/exp_smooth-lrlow-w4/seed1/pretrain"])
def test_a_missing_evaluation_is_named(study, key):
    evaluations = {k: v for k, v in study["evaluations"].items() if k != key}
    with pytest.raises(ValueError, match=rf"missing evaluation\(s\): {key}$"):
        summarize({**study, "evaluations": evaluations})


@pytest.mark.parametrize(("table", "what"), [("logs", "training log"), ("saturation", "saturation summary")])
def test_a_missing_run_artifact_is_named(study, table, what):
    partial = {k: v for k, v in study[table].items() if k != ("exp_smooth-lrlow-w4", 1)}
    with pytest.raises(ValueError, match=rf"run 'exp_smooth-lrlow-w4' seed 1 has no {what}"):
        summarize({**study, table: partial})


def test_summary_of_another_warmup(tmp_path):
    config = smoke_config(bf16_warmup_steps=6)
    summary = summarize(build_study(tmp_path, config))
    assert summary["recipe"] == "max_window-lrlow-w6"
    assert row_of(summary, "max_window-lrlow-w6")["drop"]["pretrain_perplexity"] == 2**-9
    assert row_of(summary, "max_window-lrlow-w6")["loss_ape"] == 2**-8
    assert row_of(summary, "max_window-lrlow-w6")["saturation"]["input"]["calls"] == 6 * (2 * 6 - 1)


def test_summary_of_a_profile_with_two_observers(tmp_path):
    config = smoke_config(observers=["most_recent", "max_window"])
    summary = summarize(build_study(tmp_path, config))
    assert [r["run"] for r in summary["runs"]] == [*RUNS[:6], RUNS[-1]]  # and the control


# --- the flat table -------------------------------------------------------------------------------------------


def test_run_table(summary):
    table = run_table(summary)
    assert len(table) == 10  # 9 runs and the control
    assert table[0] == {"run": "bf16-lrlow", "observer": None, "rate": "low", "warmup_steps": 0,
                        "final_loss": 4.0 - 11 / 16, "loss_ape": None, **BF16_LOW,
                        **{f"drop_{m}": 0.0 for m in METRIC_NAMES}}
    recipe = next(r for r in table if r["run"] == "max_window-lrlow-w4")
    assert recipe["loss_ape"] == 2**-8
    assert recipe["pretrain_perplexity"] == 16.03125  # evaluated in BF16
    assert recipe["drop_cloze_acc"] == 2**-9
    assert recipe["input_overflow_rate"] == 2**-4
    assert recipe["weight_overflow_rate"] == 2**-5
    assert recipe["grad_output_overflow_rate"] == 2**-3
    assert not any(k.endswith(("_n", "_se")) for k in recipe)
    assert set(table[0]) == set(table[1])  # no saturation columns for a baseline
    assert bf16_high(0.25)["pretrain_perplexity"] == table[1]["pretrain_perplexity"]


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
