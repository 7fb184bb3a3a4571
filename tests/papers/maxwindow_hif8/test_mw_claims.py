"""The claims: every verdict follows its stated rule on a paper-like and a contrary synthetic study, and the
measured strings carry the computed numbers."""

import copy

import pytest
from mw_testing import PAPER_LIKE, build_study, contrary, paper_like, smoke_config, summarize

from papers.maxwindow_hif8.claims import (
    high_lr_forgets,
    loss_hides_saturation,
    max_window_no_recurring_saturation,
    neither_fix_alone,
    recipe_drop,
    study_claims,
)
from papers.maxwindow_hif8.study import observer_cell, row_of

IDS = ["loss_hides_saturation", "max_window_no_recurring_saturation", "high_lr_forgets", "recipe_drop",
       "neither_fix_alone"]
EVIDENCE = ["results/summary.json"]


@pytest.fixture(scope="module")
def thresholds():
    return smoke_config()["claims"]


@pytest.fixture(scope="module")
def cell():
    return observer_cell(smoke_config())


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return paper_like(tmp_path_factory.mktemp("paper"))


@pytest.fixture(scope="module")
def against(tmp_path_factory):
    return contrary(tmp_path_factory.mktemp("contrary"))


def test_thresholds_of_the_config(thresholds):
    assert thresholds == {"loss_ape_max": 0.01, "forgetting_min": 0.05, "recipe_drop_max": 0.006,
                          "standard_errors": 2.0, "min_effect": 0.005, "retention_max": 0.25}


# --- study_claims ---------------------------------------------------------------------------------------------


def test_study_claims_on_the_paper_like_study(paper, cell, thresholds):
    claims = study_claims(paper, cell, thresholds, "s.json", "c.json")
    assert [c.id for c in claims] == IDS
    assert [c.verdict for c in claims] == ["reproduced"] * 5
    assert [c.evidence for c in claims] == [("s.json",), ("s.json", "c.json"), ("s.json",), ("s.json",),
                                            ("s.json",)]


def test_study_claims_on_the_contrary_study(against, cell, thresholds):
    claims = study_claims(against, cell, thresholds, "s.json", "c.json")
    assert [c.id for c in claims] == IDS
    assert [c.verdict for c in claims] == ["partly", "partly", "partly", "not reproduced", "not reproduced"]


# --- loss hides saturation ------------------------------------------------------------------------------------


def test_loss_hides_saturation_reproduced(paper, thresholds):
    claim = loss_hides_saturation(paper, thresholds, EVIDENCE)
    assert claim.verdict == "reproduced"
    assert claim.evidence == ("results/summary.json",)
    # the six saturating low-rate runs (current never saturates), APE 2^-8 = 0.39%, worst role grad_output
    parts = claim.measured.split("; ")
    assert parts == [f"{run}: APE 0.39%, {share} of grad_output layer-steps saturate" for run, share in (
        ("most_recent-lrlow-w0", "40%"), ("most_recent-lrlow-w4", "40%"), ("exp_smooth-lrlow-w0", "60%"),
        ("exp_smooth-lrlow-w4", "60%"), ("max_window-lrlow-w0", "10%"), ("max_window-lrlow-w4", "10%"))]
    assert "<= 1.00%" in claim.rule


def test_loss_hides_saturation_large_ape_is_partly(against, thresholds):
    claim = loss_hides_saturation(against, thresholds, EVIDENCE)
    assert claim.verdict == "partly"  # saturation holds, every APE (3.12%) is above 1%
    assert "most_recent-lrlow-w0: APE 3.12%, 10% of grad_output layer-steps saturate" in claim.measured


def test_loss_hides_saturation_one_large_ape_breaks_it(tmp_path, thresholds):
    summary = paper_like(tmp_path, apes={"exp_smooth-lrlow-w0": 0.0105})
    claim = loss_hides_saturation(summary, thresholds, EVIDENCE)
    assert claim.verdict == "partly"
    assert "exp_smooth-lrlow-w0: APE 1.05%" in claim.measured


def test_loss_hides_saturation_ape_at_the_limit_holds(tmp_path, thresholds):
    summary = paper_like(tmp_path, apes={"exp_smooth-lrlow-w0": 2**-7})
    assert loss_hides_saturation(summary, {**thresholds, "loss_ape_max": 2**-7}, EVIDENCE).verdict == "reproduced"
    assert loss_hides_saturation(summary, {**thresholds, "loss_ape_max": 2**-8}, EVIDENCE).verdict == "partly"


def test_loss_hides_saturation_needs_a_saturating_run(tmp_path, thresholds):
    summary = paper_like(tmp_path, overflow=dict.fromkeys(PAPER_LIKE["overflow"], 0.0))
    claim = loss_hides_saturation(summary, thresholds, EVIDENCE)
    assert claim.verdict == "not reproduced"
    assert claim.measured == "no low-learning-rate QAT run saturates"


def test_loss_hides_saturation_ignores_the_high_rate(tmp_path, thresholds):
    apes = {f"{o}-lrhigh-w{w}": 0.5 for o in PAPER_LIKE["overflow"] for w in (0, 4)}
    assert loss_hides_saturation(paper_like(tmp_path, apes=apes), thresholds, EVIDENCE).verdict == "reproduced"


# --- max_window saturation ------------------------------------------------------------------------------------


def test_max_window_no_recurring_saturation_reproduced(paper, cell):
    claim = max_window_no_recurring_saturation(paper, cell, ["s.json", "c.json"])
    assert claim.verdict == "reproduced"
    assert claim.evidence == ("s.json", "c.json")
    assert claim.measured == (
        "synthetic spikes every 20 steps: max_window saturates at 1 of 10 spikes (0 after the first), "
        "most_recent at 10; training (low lr, warmup): saturating layer-steps max_window vs most_recent "
        "grad_output 10.0% vs 40.0%, input 5.0% vs 20.0%, weight 2.5% vs 10.0%")


def test_max_window_saturating_more_in_training_is_partly(against, cell):
    claim = max_window_no_recurring_saturation(against, cell, EVIDENCE)
    assert claim.verdict == "partly"  # the synthetic checks hold, the three training roles fail
    assert "grad_output 40.0% vs 10.0%" in claim.measured


def test_max_window_training_uses_the_warmup_runs(tmp_path, cell):
    # w0 runs are not compared: max_window-lrlow-w0 saturating more changes nothing
    study = build_study(tmp_path, **PAPER_LIKE)
    study["saturation"]["max_window-lrlow-w0"] = copy.deepcopy(study["saturation"]["exp_smooth-lrlow-w0"])
    study["saturation"]["max_window-lrlow-w0"]["input"]["overflow_rate"] = 0.9
    assert max_window_no_recurring_saturation(summarize(study), cell, EVIDENCE).verdict == "reproduced"
    study["saturation"]["max_window-lrlow-w4"]["weight"]["overflow_rate"] = 0.1000001  # most_recent's is 0.1
    assert max_window_no_recurring_saturation(summarize(study), cell, EVIDENCE).verdict == "partly"


def test_max_window_equal_saturation_holds(tmp_path, cell):
    summary = paper_like(tmp_path, overflow={**PAPER_LIKE["overflow"], "max_window": 0.2})
    assert max_window_no_recurring_saturation(summary, cell, EVIDENCE).verdict == "reproduced"


def test_max_window_synthetic_failure(against, cell):
    broken = copy.deepcopy(cell)
    for row in broken["rows"]:
        if (row["kind"], row["observer"]) == ("spikes", "max_window"):
            row["recurring_spike_saturations"], row["spike_saturations"] = 3, 4
        if (row["kind"], row["observer"]) == ("spikes", "most_recent"):
            row["spike_saturations"] = 9
    claim = max_window_no_recurring_saturation(against, broken, EVIDENCE)
    assert claim.verdict == "not reproduced"
    assert "max_window saturates at 4 of 10 spikes" in claim.measured
    assert "most_recent at 9" in claim.measured


def test_max_window_without_training_runs(tmp_path):
    # runs without max_window / most_recent: the synthetic study (every observer, always) is the only check
    config = smoke_config(observers=["exp_smooth", "current"])
    summary = summarize(build_study(tmp_path, config))
    claim = max_window_no_recurring_saturation(summary, observer_cell(config), EVIDENCE)
    assert claim.verdict == "reproduced"
    assert claim.measured == ("synthetic spikes every 20 steps: max_window saturates at 1 of 10 spikes (0 after "
                              "the first), most_recent at 10")
    no_synthetic = {"rows": [r for r in observer_cell(config)["rows"] if r["observer"] != "max_window"]}
    claim = max_window_no_recurring_saturation(summary, no_synthetic, EVIDENCE)
    assert claim.verdict == "not testable at this scale"
    assert claim.measured == "no max_window / most_recent results"


# --- forgetting -----------------------------------------------------------------------------------------------


def test_high_lr_forgets_reproduced(paper, thresholds):
    claim = high_lr_forgets(paper, thresholds, EVIDENCE)
    assert claim.verdict == "reproduced"
    # QAT rises: 20.625 / 16.5 - 1 = 25% for every run but max_window-lrhigh-w4 vs the recipe:
    # 20.625 / 16.03125 - 1 = 28.655%
    # the low rate keeps the pretraining corpus: 16 / 13 - 1 = 23.08% <= 25%
    assert claim.measured == ("BF16 pretraining-corpus perplexity 20.0 at the high vs 16.0 at the low learning "
                              "rate (+25.00%), 13.0 before continual pretraining (low: +23.08%); HiF8 runs, high vs "
                              "low: +25.00% to +28.65%")
    assert ">= 5%" in claim.rule
    assert "within +25% of the base model's" in claim.rule


def test_high_lr_forgets_needs_the_low_rate_to_keep_the_pretraining_corpus(paper, thresholds):
    claim = high_lr_forgets(paper, {**thresholds, "retention_max": 0.2}, EVIDENCE)
    assert claim.verdict == "partly"  # +23.08% over the base model forgets by a 20% bar


def test_high_lr_forgets_without_forgetting(against, thresholds):
    claim = high_lr_forgets(against, thresholds, EVIDENCE)
    assert claim.verdict == "partly"  # only the retention check holds: nothing forgets
    # max_window-lrhigh-w4 (16.5) vs the lossy recipe (18): -8.33%
    assert claim.measured.endswith("(+0.00%), 13.0 before continual pretraining (low: +23.08%); HiF8 runs, high vs "
                                   "low: -8.33% to +0.00%")


def test_high_lr_forgets_one_run_below_the_minimum(tmp_path, thresholds):
    # most_recent-lrhigh-w0 at 16 (1 - 1/8) -> 20 * 0.875 / 16.5 - 1 = 6.06%; at 0.8125 -> -1.5%
    assert high_lr_forgets(paper_like(tmp_path / "a", drops={"most_recent-lrhigh-w0": -0.125}), thresholds,
                           EVIDENCE).verdict == "reproduced"
    claim = high_lr_forgets(paper_like(tmp_path / "b", drops={"most_recent-lrhigh-w0": -0.1875}), thresholds,
                            EVIDENCE)
    assert claim.verdict == "partly"
    assert "HiF8 runs, high vs low: -1.52% to +28.65%" in claim.measured


def test_high_lr_forgets_only_in_quantized_runs_is_partly(tmp_path, thresholds):
    summary = paper_like(tmp_path, forgetting=0.0, drop=2**-5,
                         drops={f"{o}-lrhigh-w{w}": 0.25 for o in PAPER_LIKE["overflow"] for w in (0, 4)})
    claim = high_lr_forgets(summary, thresholds, EVIDENCE)
    assert claim.verdict == "partly"  # BF16 does not forget, every HiF8 run does
    assert "(+0.00%)," in claim.measured


# --- the recipe's drop ----------------------------------------------------------------------------------------


def test_recipe_drop_reproduced(paper, thresholds):
    claim = recipe_drop(paper, thresholds, EVIDENCE)
    assert claim.verdict == "reproduced"
    assert claim.statement.startswith("The recipe (max_window-lrlow-w4: max_window, BF16 warmup, low learning rate)")
    # drop 2^-9 = +0.20%; accuracy 0.5 (1 - 2^-9) = 0.499; difference 2^-10 over ~0.0221 SE
    assert claim.measured == ("pretraining-corpus perplexity +0.20%; cloze_acc 0.499 vs 0.500 (drop +0.20%, "
                              "+0.0 SE); choice_acc_norm 0.499 vs 0.500 (drop +0.20%, +0.0 SE)")
    assert "<= 0.6%" in claim.rule
    assert "within 2 standard errors" in claim.rule


def test_recipe_drop_contrary(against, thresholds):
    claim = recipe_drop(against, thresholds, EVIDENCE)
    assert claim.verdict == "not reproduced"
    # accuracy 0.4375 vs 0.5: difference 1/16 over sqrt((1/64)^2 + 0.4375 * 0.5625 / 1024) = 2.84 SE > 2
    se = ((1 / 64) ** 2 + 0.4375 * 0.5625 / 1024) ** 0.5
    assert f"{(1 / 16) / se:+.1f}" == "+2.8"
    assert claim.measured == ("pretraining-corpus perplexity +12.50%; cloze_acc 0.438 vs 0.500 (drop +12.50%, "
                              "+2.8 SE); choice_acc_norm 0.438 vs 0.500 (drop +12.50%, +2.8 SE)")


def recipe_with_accuracy(directory, accuracy, examples=1024):
    """A paper-like summary whose recipe has ``accuracy`` on both zero-shot tasks (perplexities unchanged)."""
    study = build_study(directory, **PAPER_LIKE, examples=examples)
    metrics = study["evaluations"]["hif8/max_window-lrlow-w4/pretrain"]["metrics"]
    metrics["cloze"]["acc"] = accuracy
    metrics["choice"]["acc_norm"] = accuracy
    return summarize(study)


def test_recipe_drop_standard_error_escape(tmp_path, thresholds):
    # accuracy 0.484375 vs 0.5: drop 3.12% > 0.6%, but the difference 1/64 is 0.71 standard errors
    summary = recipe_with_accuracy(tmp_path, 0.484375)
    claim = recipe_drop(summary, thresholds, EVIDENCE)
    assert claim.verdict == "reproduced"
    assert "cloze_acc 0.484 vs 0.500 (drop +3.12%, +0.7 SE)" in claim.measured


def test_recipe_drop_escape_needs_few_enough_examples(tmp_path, thresholds):
    # the same difference over 2^20 examples: 2^-6 / sqrt(2^-22 + 0.484375 * 0.515625 / 2^20) = 22.6 standard
    # errors, both accuracy checks fail
    summary = recipe_with_accuracy(tmp_path, 0.484375, examples=2**20)
    claim = recipe_drop(summary, thresholds, EVIDENCE)
    assert claim.verdict == "partly"
    assert "(drop +3.12%, +22.6 SE)" in claim.measured


def test_recipe_drop_escape_counts_k(tmp_path, thresholds):
    summary = recipe_with_accuracy(tmp_path, 0.484375)
    assert recipe_drop(summary, {**thresholds, "standard_errors": 0.75}, EVIDENCE).verdict == "reproduced"
    assert recipe_drop(summary, {**thresholds, "standard_errors": 0.5}, EVIDENCE).verdict == "partly"


def test_recipe_drop_better_accuracy_holds(tmp_path, thresholds):
    claim = recipe_drop(recipe_with_accuracy(tmp_path, 0.75, examples=2**20), thresholds, EVIDENCE)
    assert claim.verdict == "reproduced"
    assert "cloze_acc 0.750 vs 0.500 (drop -50.00%" in claim.measured


def test_recipe_drop_perplexity_alone_fails(tmp_path, thresholds):
    # pretraining perplexity drop 1/128 = 0.78% > 0.6%, accuracies within the limit
    study = build_study(tmp_path, **PAPER_LIKE)
    study["evaluations"]["hif8/max_window-lrlow-w4/pretrain"]["metrics"]["perplexity"]["perplexity"] = 16.125
    claim = recipe_drop(summarize(study), thresholds, EVIDENCE)
    assert claim.verdict == "partly"
    assert claim.measured.startswith("pretraining-corpus perplexity +0.78%;")


# --- neither fix alone ----------------------------------------------------------------------------------------


def test_neither_fix_alone_reproduced(paper, thresholds):
    claim = neither_fix_alone(paper, thresholds, EVIDENCE)
    assert claim.verdict == "reproduced"
    # max_window-lrhigh-w4: (20.625 - 16) / 16 = 28.91%; the low-rate ablations 2^-5 = 3.12%
    assert claim.measured == (
        "pretraining-corpus perplexity vs low-lr BF16: recipe +0.20%; without the low learning rate "
        "(max_window-lrhigh-w4) +28.91%; without max_window (most_recent-lrlow-w4) +3.12%; without the BF16 warmup "
        "(max_window-lrlow-w0) +3.12%")
    assert "exceeds the recipe's by >= 0.5%" in claim.rule


def test_neither_fix_alone_contrary(against, thresholds):
    claim = neither_fix_alone(against, thresholds, EVIDENCE)
    assert claim.verdict == "not reproduced"
    assert claim.measured.startswith("pretraining-corpus perplexity vs low-lr BF16: recipe +12.50%;")


def test_neither_fix_alone_one_ablation_better(tmp_path, thresholds):
    summary = paper_like(tmp_path, drops={"max_window-lrlow-w0": -2**-9})  # no warmup is better than the recipe
    claim = neither_fix_alone(summary, thresholds, EVIDENCE)
    assert claim.verdict == "partly"
    assert "without the BF16 warmup (max_window-lrlow-w0) -0.20%" in claim.measured


def test_neither_fix_alone_a_tie_is_no_effect(tmp_path, thresholds):
    tie = paper_like(tmp_path, drops={"most_recent-lrlow-w4": 2**-9})
    assert neither_fix_alone(tie, thresholds, EVIDENCE).verdict == "partly"


def test_neither_fix_alone_margin(tmp_path, thresholds):
    # most_recent-lrlow-w4 worse than the recipe by exactly 2^-7 (5 / 512 vs 1 / 512)
    summary = paper_like(tmp_path, drops={"most_recent-lrlow-w4": 5 * 2**-9})
    assert row_of(summary, "most_recent-lrlow-w4")["drop_vs_low_rate_bf16"]["pretrain_perplexity"] == 5 * 2**-9
    assert neither_fix_alone(summary, {**thresholds, "min_effect": 2**-7}, EVIDENCE).verdict == "reproduced"
    assert neither_fix_alone(summary, {**thresholds, "min_effect": 2**-7 + 2**-20}, EVIDENCE).verdict == "partly"
    assert neither_fix_alone(summary, thresholds, EVIDENCE).verdict == "reproduced"  # 0.78% >= 0.5%
