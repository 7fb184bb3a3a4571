"""The claims: the specs of config.yaml, every row computed on planted data of three seeds three ways (reproduced,
contradicted, inconclusive, the verdict following the data in both directions), the seed interval against its
formula computed here, one seed (the bootstrap alone, "1 seed"), the pairing by seed, rows that are not testable,
the implementation checks (a failed one stops the claims document) and the ``claims`` step end to end."""

import copy
import dataclasses
import json
import math

import numpy as np
import pytest
from mw_testing import (
    ERROR_IN_RANGE,
    LAYERS,
    PAPER_LIKE,
    ROLES,
    WINDOW_TOKENS,
    WINDOWS,
    build_study,
    correct_list,
    perplexity_group,
    raw_config,
    smoke_config,
    study_artifacts,
    telemetry_rows,
    write_telemetry,
)
from scipy import stats

from common.quantizers import saturation_summary
from common.report import Claim, ImplementationCheckFailed, claim_specs, claims_document
from common.report.claims import SPEC_FIELDS, apply_controls, apply_regime
from common.uncertainty import Evidence
from papers.maxwindow_hif8.__main__ import main
from papers.maxwindow_hif8.claims import (
    Artifact,
    Study,
    accuracy_drop,
    claim_rows,
    claims,
    error_ratio,
    evaluation_key,
    jitter_sums,
    observer_checks,
    pairing_checks,
    saturation_sums,
    step_sums,
    study_checks,
    telemetry_check,
    telemetry_runs,
    unit_score_check,
)
from papers.maxwindow_hif8.regime import regime_card
from papers.maxwindow_hif8.settings import profile_config, run_names
from papers.maxwindow_hif8.study import observer_cell

SETTINGS = Evidence(0.95, 1000, 0)
OBSERVERS = Artifact("cell.json", observer_cell(smoke_config()))  # the synthetic study: the checks read it, no row
SPECS = claim_specs(raw_config()["claims"])
SEEDS = (0, 1, 2)  # the default profile's
W = 4  # the smoke profile's warmup
RECIPE, MOST_RECENT = f"max_window-lrlow-w{W}", f"most_recent-lrlow-w{W}"
CURRENT, EXP_SMOOTH = f"current-lrlow-w{W}", f"exp_smooth-lrlow-w{W}"
CONTROL = f"max_window-lrlow-w{W}-coarse_scale"  # the negative control of the near-lossless bounds
PERPLEXITY_ROWS = {  # id: (treated, reference, corpus), models as "<precision>/<run>"
    "recipe_pretrain_perplexity": (f"bf16/{RECIPE}", "bf16/bf16-lrlow", "pretrain"),
    "recipe_shift_perplexity": (f"bf16/{RECIPE}", "bf16/bf16-lrlow", "shift"),
    "recipe_pretrain_perplexity_hif8": (f"hif8/{RECIPE}", "bf16/bf16-lrlow", "pretrain"),
    "forgets_bf16": ("bf16/bf16-lrhigh", "bf16/bf16-lrlow", "pretrain"),
    "forgets_current": (f"bf16/current-lrhigh-w{W}", f"bf16/{CURRENT}", "pretrain"),
    "ablation_high_lr": (f"bf16/max_window-lrhigh-w{W}", f"bf16/{RECIPE}", "pretrain"),
    "ablation_most_recent": (f"bf16/{MOST_RECENT}", f"bf16/{RECIPE}", "pretrain"),
    "ablation_no_warmup": ("bf16/max_window-lrlow-w0", f"bf16/{RECIPE}", "pretrain"),
    "cts_hurts": (f"bf16/{CURRENT}", f"bf16/{RECIPE}", "pretrain"),
    "control_pretrain_perplexity": (f"bf16/{CONTROL}", "bf16/bf16-lrlow", "pretrain"),
    "control_shift_perplexity": (f"bf16/{CONTROL}", "bf16/bf16-lrlow", "shift"),
    "control_pretrain_perplexity_hif8": (f"hif8/{CONTROL}", "bf16/bf16-lrlow", "pretrain"),
    "control_ablation_pretrain": (f"bf16/{CONTROL}", f"bf16/{RECIPE}", "pretrain"),
}
ACCURACY_ROWS = {  # id: (treated, reference, task)
    "recipe_cloze_acc": (f"bf16/{RECIPE}", "bf16/bf16-lrlow", "cloze"),
    "recipe_choice_acc_norm": (f"bf16/{RECIPE}", "bf16/bf16-lrlow", "choice"),
    "forgets_bf16_cloze": ("bf16/bf16-lrhigh", "bf16/bf16-lrlow", "cloze"),
    "forgets_bf16_choice": ("bf16/bf16-lrhigh", "bf16/bf16-lrlow", "choice"),
    "control_cloze_acc": (f"bf16/{CONTROL}", "bf16/bf16-lrlow", "cloze"),
    "control_choice_acc_norm": (f"bf16/{CONTROL}", "bf16/bf16-lrlow", "choice"),
}
APE_ROWS = {"saturating_loss_ape": (MOST_RECENT, "bf16-lrlow"), "recipe_loss_ape": (RECIPE, "bf16-lrlow"),
            "control_loss_ape": (CONTROL, "bf16-lrlow"), "control_loss_ape_saturating": (CONTROL, "bf16-lrlow")}
SATURATION_ROWS = {"most_recent_saturates": MOST_RECENT}
ROLE_SATURATION_ROWS = {"recipe_saturates_rarely_input": (RECIPE, "input"),  # id: (run, the one role counted)
                        "recipe_saturates_on_weight_drift": (RECIPE, "weight"),
                        "control_most_recent_saturates_input": (MOST_RECENT, "input")}
LOSS_CHANGE_ROWS = {"forgetting_hidden_in_loss": ("bf16-lrhigh", "bf16-lrlow")}  # id: (run, reference)
DIFFERENCE_ROWS = {  # id: (run, reference, roles counted)
    **{f"max_window_saturates_less_{role}": (RECIPE, MOST_RECENT, (role,)) for role in ROLES},
    "exp_smooth_saturates": (EXP_SMOOTH, RECIPE, ROLES)}
ERROR_ROWS = {"saturation_raises_error": (MOST_RECENT, "input")}
JITTER_ROWS = {"cts_jitter": (CURRENT, RECIPE)}
FORGETTING_ROWS = ("forgets_bf16", "forgets_current", "forgets_bf16_cloze", "forgets_bf16_choice")
LOW, BASE = "bf16/bf16-lrlow", "bf16/base"  # the regime the forgetting rows rest on
RETAINED = 0.13  # planted: bf16-lrlow's pretraining perplexity 13% above the base model's
OUTCOMES = ("up", "down", "straddle")  # the planted statistic well above, well below, or at the threshold
T_METHOD = "t-interval over 3 seeds"
SHARED = ("t-interval over 3 seeds (paired by seed), widened by the evaluation sampling the seeds share (paired "
          "bootstrap over {} (1000 resamples, seed 0, percentile))")
ONE_SEED = "; 1 seed: no seed-to-seed variation"


def expected(direction, outcome):
    if outcome == "straddle":
        return "inconclusive"
    return "reproduced" if (outcome == "up") == (direction == "above") else "contradicted"


def grid(max_steps=12, seeds=SEEDS, **changes):
    """The smoke profile (warmup 4, 2 micro-batches per step) with every observer (9 runs), ``seeds`` and
    ``max_steps`` steps."""
    config = smoke_config(seeds=list(seeds), **changes)
    return {**config, "train": {**config["train"], "max_steps": max_steps}}


def key(model, seed, role):
    """The evaluation key of ``"<precision>/<run>"`` at ``seed`` (the base model has no seed level)."""
    return f"{model}/{role}" if model == BASE else f"{model}/seed{seed}/{role}"


def artifacts(config=None, *, evaluations=None, losses=None, telemetry=None):
    """A :class:`Study` holding just the planted artifacts (path = ``<kind>:<key>``; losses and telemetry by
    ``(run, seed)``) and the synthetic observer study."""
    telemetry = telemetry or {}
    return Study(
        grid() if config is None else config,
        {k: Artifact(f"eval:{k}", v) for k, v in (evaluations or {}).items()},
        {k: Artifact(f"log:{k[0]}/seed{k[1]}", v) for k, v in (losses or {}).items()},
        {k: Artifact(f"telemetry:{k[0]}/seed{k[1]}", v) for k, v in telemetry.items()},
        {k: Artifact(f"saturation:{k[0]}/seed{k[1]}", saturation_summary(v)) for k, v in telemetry.items()},
        OBSERVERS)


def standardized(rng, n):
    """``n`` normal draws with mean exactly 0 and standard deviation exactly 1."""
    z = rng.standard_normal(n)
    return (z - z.mean()) / z.std()


def spread(seeds, width):
    """Per-seed offsets ``width * (i - (n - 1) / 2)``: mean 0, one step ``width`` apart (0 for one seed)."""
    n = len(seeds)
    return [width * (i - (n - 1) / 2) for i in range(n)]


# --- the specs ------------------------------------------------------------------------------------------------


def test_every_spec_has_its_computation_and_every_row_is_tested():
    tested = {*PERPLEXITY_ROWS, *ACCURACY_ROWS, *APE_ROWS, *SATURATION_ROWS, *DIFFERENCE_ROWS, *ERROR_ROWS,
              *JITTER_ROWS, *ROLE_SATURATION_ROWS, *LOSS_CHANGE_ROWS}
    assert set(SPECS) == set(claim_rows(grid())) == tested
    assert len(SPECS) == 34
    assert "low_lr_keeps_pretraining" not in SPECS  # its threshold was set after the result: no claim


def test_specs_state_their_source_and_the_paper():
    for spec in SPECS.values():
        assert spec.prediction.source.startswith(("paper:", "reason:")), spec.id
        assert spec.paper
        assert spec.group
    assert set(raw_config()["claims"]["forgets_bf16"]) == {*SPEC_FIELDS, "requires", "kind", "quote", "where"}
    assert "the textbook EMA" in SPECS["exp_smooth_saturates"].paper  # says which exp_smooth it tests
    # the authors' own results beside "Neither fix alone suffices": no most_recent evaluation, no order at lr 1e-4
    assert "evaluate no most_recent model" in SPECS["ablation_most_recent"].paper
    assert "differ by at most 0.6 points in no consistent order" in SPECS["ablation_high_lr"].paper
    assert "no lr-1e-5 run without the warmup" in SPECS["ablation_no_warmup"].paper


def test_kinds_quotes_controls_and_the_coverage_table():
    entries, coverage = raw_config()["claims"], raw_config()["coverage"]
    kinds = {cid: entry["kind"] for cid, entry in entries.items()}
    # identities of the observers' definitions on any noisy amax trace: implementation checks (issue 36)
    assert {cid for cid, kind in kinds.items() if kind == "check"} == {
        "most_recent_saturates", "max_window_saturates_less_input", "max_window_saturates_less_grad_output",
        "cts_jitter", "exp_smooth_saturates"}
    for cid, entry in entries.items():
        assert ("quote" in entry and "where" in entry) == (entry["kind"] == "paper"), cid
        if entry["kind"] == "control":
            assert entry["direction"] == "above", cid  # each control breaks a bound from above
    controlled = {cid: entry["control"] for cid, entry in entries.items() if "control" in entry}
    assert set(controlled.values()) == {cid for cid, kind in kinds.items() if kind == "control"}
    for cid, control in controlled.items():
        assert kinds[control] == "control"
        if entries[cid]["direction"] == "below":  # a bound: its control predicts it broken, at the same threshold
            assert entries[control]["threshold"] == entries[cid]["threshold"], cid
    assert {c for c in kinds if c.startswith("recipe_") and entries[c]["direction"] == "below"} <= set(controlled)
    assert "ablation_no_warmup" in controlled
    assert "saturating_loss_ape" in controlled
    listed = [row for entry in coverage for row in entry.get("rows", [])]
    assert set(listed) == {cid for cid, kind in kinds.items() if kind == "paper"}  # every paper row, only those
    assert all(("rows" in entry) != ("not_tested" in entry) for entry in coverage)
    # the forgetting rows say the learning rates were picked on seed 0, which they include
    for cid in ("forgets_bf16", "forgets_current", "forgets_bf16_cloze", "forgets_bf16_choice", "ablation_high_lr",
                "forgetting_hidden_in_loss"):
        assert "picked on seed 0" in entries[cid]["source"], cid


def test_the_paper_numbers_are_the_thresholds():
    recipe = [c for c in SPECS if c.startswith("recipe_") and c != "recipe_loss_ape"
              and not c.startswith("recipe_saturates")]
    assert len(recipe) == 5
    assert {SPECS[c].prediction.threshold for c in recipe} == {0.006}  # <= 0.6% relative drop
    assert {SPECS[c].prediction.direction for c in recipe} == {"below"}
    assert SPECS["recipe_loss_ape"].prediction.threshold == 0.0011  # APE 0.11%
    assert SPECS["recipe_loss_ape"].prediction.source == "paper: training-loss APE 0.11%"
    assert SPECS["saturating_loss_ape"].prediction.threshold == 0.011  # times 10 for our scale, stated


def test_the_groups_in_report_order():
    groups = list(dict.fromkeys(spec.group for spec in SPECS.values()))
    assert groups == ["The training loss hides amax saturation", "max_window removes the saturation most_recent has",
                      "How often the recipe saturates in training",
                      "The recipe is near-lossless vs BF16 at the same learning rate",
                      "A high learning rate forgets, with or without quantization", "Neither fix alone suffices",
                      "The other amax algorithms", "Negative controls of the bounds"]


def test_evaluation_keys_of_paths():
    assert evaluation_key("r/eval/hif8/max_window-lrlow-w4/seed2/pretrain.json") == \
        "hif8/max_window-lrlow-w4/seed2/pretrain"
    assert evaluation_key("r/eval/bf16/base/shift.json") == "bf16/base/shift"


def test_telemetry_runs_are_the_recipe_settings_of_every_observer():
    assert telemetry_runs(grid()) == [MOST_RECENT, RECIPE, CURRENT, EXP_SMOOTH]
    assert telemetry_runs(profile_config(raw_config(), "smoke")) == [MOST_RECENT, RECIPE]


# --- perplexity rows: seeds, widened by the paired bootstrap over windows ----------------------------------------


def perplexity_record(window_log_perplexity):
    return {"metrics": {"perplexity": perplexity_group(window_log_perplexity)}}


def planted_perplexities(threshold, outcome, seeds=SEEDS, seed=0):
    """Per seed, per-window log-perplexities ``(treated, reference)``: the reference is the same for every seed
    (window difficulty); the treated model's relative change ``P_a / P_b - 1`` is the threshold shifted by about
    +-5% with per-seed offsets 0.002 apart and window noise 0.01 (``up`` / ``down``), or the threshold with offsets
    0.02 apart and window noise 0.1 (``straddle``)."""
    rng = np.random.default_rng(seed)
    reference = 3.0 + 0.5 * rng.standard_normal(WINDOWS)
    shift = {"up": 0.05, "down": -0.05, "straddle": 0.0}[outcome]
    offsets = spread(seeds, 0.02 if outcome == "straddle" else 0.002)
    noise = 0.1 if outcome == "straddle" else 0.01
    return [(reference + math.log1p(threshold) + shift + offset + noise * standardized(rng, WINDOWS), reference)
            for offset in offsets]


def perplexity_evaluations(treated, reference, corpus, planted, seeds=SEEDS):
    out = {}
    for seed, (a, b) in zip(seeds, planted, strict=True):
        out[key(treated, seed, corpus)] = perplexity_record(a)
        out[key(reference, seed, corpus)] = perplexity_record(b)
    return out


def with_regime(claim_id, evaluations, seeds=SEEDS):
    """``evaluations`` and, for a forgetting row, the regime it rests on: bf16-lrlow scored on the pretraining
    corpus's windows at every seed (its planted records', else every window at log-perplexity 3) and the base model
    there, ``RETAINED`` below seed 0's in every window."""
    if claim_id not in FORGETTING_ROWS:
        return evaluations
    out = copy.deepcopy(evaluations)
    for seed in seeds:
        metrics = out.setdefault(key(LOW, seed, "pretrain"), {"metrics": {}})["metrics"]
        metrics.setdefault("perplexity", perplexity_group([3.0] * WINDOWS))
    group = out[key(LOW, seeds[0], "pretrain")]["metrics"]["perplexity"]
    window_log_perplexity = np.asarray(group["window_nll"]) / np.asarray(group["window_tokens"])
    out[key(BASE, None, "pretrain")] = perplexity_record(window_log_perplexity - math.log1p(RETAINED))
    return out


def comparison(claim):
    """The row's detail before the regime a forgetting row appends."""
    return claim.detail.split("; regime the forgetting comparison rests on: ")[0]


def regime_evidence(claim_id, evidence, seeds=SEEDS):
    """``evidence`` and, for a forgetting row, the records of its regime (each path once)."""
    if claim_id not in FORGETTING_ROWS:
        return tuple(evidence)
    regime = [f"eval:{key(model, seed, 'pretrain')}" for seed in seeds for model in (LOW, BASE)]
    return tuple(dict.fromkeys([*evidence, *regime]))


def label(model):
    precision, run = model.split("/")
    return f"{run} ({'HiF8' if precision == 'hif8' else 'BF16'})"


def independent_interval(planted, level=0.95, resamples=1000, seed=0):
    """:func:`common.uncertainty.seed_interval` of the perplexity change, computed here: per seed
    ``d_s = exp(mean_j a_sj - mean_j b_sj) - 1`` (every window ``WINDOW_TOKENS`` tokens); the paired bootstrap of
    the seed mean over the windows (``rng.integers(0, n, (resamples, n))`` of ``default_rng(seed)``, the same
    windows for every model and seed, percentile interval), its half-width over ``z_(1+level)/2`` the shared
    standard error; ``mean d +- t_(1+level)/2, n-1 sqrt(sd^2 / n + se^2)``. One seed: the bootstrap interval."""
    n = len(planted[0][1])
    counts = np.zeros((resamples, n))
    for r, draw in enumerate(np.random.default_rng(seed).integers(0, n, (resamples, n))):
        counts[r] = np.bincount(draw, minlength=n)
    tokens = counts.sum(axis=1) * WINDOW_TOKENS

    def log_ppl(x):
        return counts @ (WINDOW_TOKENS * np.asarray(x)) / tokens

    changes = np.array([math.expm1(np.mean(a) - np.mean(b)) for a, b in planted])
    replicates = np.mean([np.expm1(log_ppl(a) - log_ppl(b)) for a, b in planted], axis=0)
    low, high = np.quantile(replicates, [(1 - level) / 2, (1 + level) / 2])
    if len(planted) == 1:
        return changes[0], low, high
    shared = (high - low) / (2 * stats.norm.ppf((1 + level) / 2))
    half = stats.t.ppf((1 + level) / 2, len(planted) - 1) * math.sqrt(changes.var(ddof=1) / len(planted)
                                                                      + shared**2)
    return changes.mean(), changes.mean() - half, changes.mean() + half


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", PERPLEXITY_ROWS)
def test_perplexity_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    treated, reference, corpus = PERPLEXITY_ROWS[claim_id]
    planted = planted_perplexities(spec.prediction.threshold, outcome)
    study = artifacts(evaluations=with_regime(claim_id, perplexity_evaluations(treated, reference, corpus,
                                                                               planted)))
    claim = claim_rows(study.config)[claim_id](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    changes = [math.expm1(np.mean(a) - np.mean(b)) for a, b in planted]
    assert claim.estimate.value == pytest.approx(np.mean(changes), rel=1e-9)
    assert claim.estimate.method == SHARED.format("64 evaluation windows")
    assert claim.evidence == regime_evidence(claim_id, [f"eval:{key(m, s, corpus)}" for s in SEEDS
                                                        for m in (treated, reference)])
    ppl = [(math.exp(np.mean(a)), math.exp(np.mean(b))) for a, b in planted]
    assert comparison(claim) == (
        f"perplexity on the {corpus} corpus's test split per seed [0, 1, 2]: "
        + "; ".join(f"{pa:.4g} vs {pb:.4g}" for pa, pb in ppl)
        + f" ({label(treated)} vs {label(reference)}; 64 windows, 4096 tokens); change per seed "
        + ", ".join(f"{pa / pb - 1:+.3%}" for pa, pb in ppl))


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_the_seed_interval_is_its_formula(outcome):
    """t over 3 seeds of the per-seed changes, widened by the shared bootstrap: computed here independently."""
    planted = planted_perplexities(0.0, outcome, seed=5)
    treated, reference, corpus = PERPLEXITY_ROWS["ablation_most_recent"]
    study = artifacts(evaluations=perplexity_evaluations(treated, reference, corpus, planted))
    claim = claim_rows(study.config)["ablation_most_recent"](SPECS["ablation_most_recent"], study, SETTINGS)
    value, low, high = independent_interval(planted)
    assert claim.estimate.value == pytest.approx(value, rel=1e-12)
    assert claim.estimate.low == pytest.approx(low, rel=1e-9)
    assert claim.estimate.high == pytest.approx(high, rel=1e-9)
    assert claim.estimate.level == 0.95


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_one_seed_gives_the_bootstrap_over_windows(outcome):
    spec = SPECS["recipe_pretrain_perplexity"]
    treated, reference, corpus = PERPLEXITY_ROWS["recipe_pretrain_perplexity"]
    planted = planted_perplexities(spec.prediction.threshold, outcome, seeds=(0,))
    study = artifacts(grid(seeds=(0,)), evaluations=perplexity_evaluations(treated, reference, corpus, planted,
                                                                           seeds=(0,)))
    claim = claim_rows(study.config)["recipe_pretrain_perplexity"](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    value, low, high = independent_interval(planted)
    assert (claim.estimate.value, claim.estimate.low, claim.estimate.high) == pytest.approx((value, low, high),
                                                                                             rel=1e-9)
    assert claim.estimate.method == ("paired bootstrap over 64 evaluation windows (1000 resamples, seed 0, "
                                     "percentile)" + ONE_SEED)
    assert claim.evidence == (f"eval:{key(treated, 0, corpus)}", f"eval:{key(reference, 0, corpus)}")
    assert comparison(claim).startswith("perplexity on the pretrain corpus's test split per seed [0]: ")


def test_pairing_is_by_seed():
    """Seeds differ a lot (seed k's models are 0.5 k harder), the treated model is 2% worse than the reference of
    its own seed: paired, the change is +2% with a tight interval; pairing seed k with another seed's reference
    gives another estimate."""
    rng = np.random.default_rng(3)
    difficulty = 3.0 + 0.5 * rng.standard_normal(WINDOWS)
    reference = {k: difficulty + 0.5 * k for k in SEEDS}
    treated = {k: reference[k] + math.log1p(0.02) + 0.01 * standardized(rng, WINDOWS) for k in SEEDS}
    spec = SPECS["ablation_most_recent"]
    a, b, corpus = PERPLEXITY_ROWS["ablation_most_recent"]

    def claim_of(partner):
        planted = [(treated[k], reference[partner[k]]) for k in SEEDS]
        study = artifacts(evaluations=perplexity_evaluations(a, b, corpus, planted))
        return claim_rows(study.config)["ablation_most_recent"](spec, study, SETTINGS), planted

    paired, planted = claim_of({0: 0, 1: 1, 2: 2})
    assert paired.estimate.value == pytest.approx(0.02, rel=1e-9)
    assert paired.verdict == "reproduced"
    assert paired.estimate.high - paired.estimate.low < 0.01
    assert (paired.estimate.low, paired.estimate.high) == pytest.approx(independent_interval(planted)[1:], rel=1e-9)
    shuffled, crossed = claim_of({0: 1, 1: 2, 2: 0})
    value = np.mean([math.expm1(np.mean(x) - np.mean(y)) for x, y in crossed])
    assert shuffled.estimate.value == pytest.approx(value, rel=1e-9)
    assert shuffled.estimate.value == pytest.approx(np.mean([math.expm1(math.log1p(0.02) + d) for d in
                                                             (-0.5, -0.5, 1.0)]), rel=1e-9)
    assert abs(shuffled.estimate.value - paired.estimate.value) > 0.2
    assert shuffled.verdict == "inconclusive"
    assert independent_interval(crossed)[1] == pytest.approx(shuffled.estimate.low, rel=1e-9)


def test_perplexity_rows_need_the_same_windows():
    planted = planted_perplexities(0.0, "up")
    evaluations = perplexity_evaluations("bf16/bf16-lrhigh", LOW, "pretrain", planted)
    evaluations[key(LOW, 1, "pretrain")] = perplexity_record(planted[1][1][:-1])
    study = artifacts(evaluations=evaluations)
    with pytest.raises(ValueError, match=r"bf16-lrlow \(BF16\)@1 and bf16-lrlow \(BF16\): perplexities scored "
                                         r"on different windows \(63 vs 64 windows"):
        claim_rows(study.config)["forgets_bf16"](SPECS["forgets_bf16"], study, SETTINGS)


@pytest.mark.parametrize("claim_id", FORGETTING_ROWS)
def test_forgetting_rows_show_the_regime_they_rest_on(claim_id):
    treated, reference, unit = (PERPLEXITY_ROWS | ACCURACY_ROWS)[claim_id]
    if unit == "pretrain":
        planted = perplexity_evaluations(treated, reference, "pretrain", planted_perplexities(0.0, "up"))
    else:
        planted = accuracy_evaluations(treated, reference, unit, planted_accuracies(0.0, "up"))
    study = artifacts(evaluations=with_regime(claim_id, planted))
    claim = claim_rows(study.config)[claim_id](SPECS[claim_id], study, SETTINGS)
    assert claim.verdict == "reproduced"  # the regime is shown, never judged
    assert claim.detail == (
        f"{comparison(claim)}; regime the forgetting comparison rests on: the low learning rate keeps the "
        "pretraining corpus, bf16-lrlow (BF16) vs the base model on its test split, P_low / P_base - 1 = +13.0% "
        f"(95% interval [+13.0%, +13.0%], {SHARED.format('64 evaluation windows')})")
    assert claim.evidence == regime_evidence(claim_id, [f"eval:{key(m, s, 'pretrain')}" for s in SEEDS
                                                        for m in (treated, reference)])
    assert f"eval:{key(BASE, None, 'pretrain')}" in claim.evidence
    assert len(set(claim.evidence)) == len(claim.evidence)


def test_a_forgetting_row_needs_the_base_model():
    planted = perplexity_evaluations("bf16/bf16-lrhigh", LOW, "pretrain", planted_perplexities(0.0, "up"))
    study = artifacts(evaluations=planted)
    with pytest.raises(ValueError, match=r"run 'base' has no evaluation \('bf16/base/pretrain'"):
        claim_rows(study.config)["forgets_bf16"](SPECS["forgets_bf16"], study, SETTINGS)


@pytest.mark.parametrize(("claim_id", "run"), [("forgets_current", f"current-lrhigh-w{W}"), ("cts_jitter", CURRENT),
                                               ("cts_hurts", CURRENT), ("exp_smooth_saturates", EXP_SMOOTH)])
def test_a_run_the_profile_does_not_train_is_not_testable(claim_id, run):
    smoke = profile_config(raw_config(), "smoke")  # observers most_recent and max_window only
    claim = claim_rows(smoke)[claim_id](SPECS[claim_id], artifacts(smoke), SETTINGS)
    assert claim.verdict == "not testable at this scale"
    assert claim.estimate is None
    assert claim.reason == (f"this profile trains no run {run!r} (observers: most_recent, max_window; control "
                            "variants: coarse_scale)")
    assert claim.evidence == ()


def test_a_missing_artifact_of_a_trained_run_is_an_error():
    with pytest.raises(ValueError, match=r"run 'bf16-lrhigh' has no evaluation \('bf16/bf16-lrhigh/seed0/pretrain'"):
        claim_rows(grid())["forgets_bf16"](SPECS["forgets_bf16"], artifacts(), SETTINGS)
    with pytest.raises(ValueError, match=r"run 'most_recent-lrlow-w4' has no training log \(\('most_recent-lrlow-w4'"
                                         r", 0\)"):
        claim_rows(grid())["saturating_loss_ape"](SPECS["saturating_loss_ape"], artifacts(), SETTINGS)


# --- accuracy rows: seeds, widened by the paired bootstrap over examples -------------------------------------


def flipped(reference, lose, gain, seed=0):
    """``reference`` with ``lose`` correct answers made wrong and ``gain`` wrong ones made right (random ones)."""
    rng = np.random.default_rng(seed)
    out = np.array(reference)
    right, wrong = np.flatnonzero(out == 1), np.flatnonzero(out == 0)
    out[rng.choice(right, lose, replace=False)] = 0
    out[rng.choice(wrong, gain, replace=False)] = 1
    return out.tolist()


def planted_accuracies(threshold, outcome, examples=1024, seeds=SEEDS):
    """Per seed ``(treated, reference)`` correctness: the reference answers half (the same for every seed); the
    treated model loses about 12% of them more than the threshold (``up``), gains 60 (``down``), or is at the
    threshold with 30 flips each way (``straddle``), other examples flipped at each seed."""
    reference = np.random.default_rng(1).permutation(correct_list(0.5, examples)).tolist()
    at = round(threshold * examples / 2)
    lose, gain = {"up": (at + 60, 0), "down": (0, 60), "straddle": (at + 30, 30)}[outcome]
    return [(flipped(reference, lose, gain, seed=seed), reference) for seed in seeds]


def accuracy_record(task, correct):
    field = "example_correct" if task == "cloze" else "example_correct_norm"
    return {"metrics": {task: {field: correct}}}


def accuracy_evaluations(treated, reference, task, planted, seeds=SEEDS):
    out = {}
    for seed, (a, b) in zip(seeds, planted, strict=True):
        out[key(treated, seed, "pretrain")] = accuracy_record(task, a)
        out[key(reference, seed, "pretrain")] = accuracy_record(task, b)
    return out


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", ACCURACY_ROWS)
def test_accuracy_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    treated, reference, task = ACCURACY_ROWS[claim_id]
    planted = planted_accuracies(spec.prediction.threshold, outcome)
    study = artifacts(evaluations=with_regime(claim_id, accuracy_evaluations(treated, reference, task, planted)))
    claim = claim_rows(study.config)[claim_id](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(np.mean([1 - sum(a) / sum(b) for a, b in planted]), rel=1e-12)
    assert claim.estimate.method == SHARED.format("1024 examples")
    assert claim.evidence == regime_evidence(claim_id, [f"eval:{key(m, s, 'pretrain')}" for s in SEEDS
                                                        for m in (treated, reference)])
    metric = "acc" if task == "cloze" else "acc_norm"
    assert comparison(claim) == (f"{task} {metric} correct per seed [0, 1, 2]: "
                                 + "; ".join(f"{sum(a)} vs 512 of 1024" for a, _ in planted)
                                 + f" ({label(treated)} vs {label(reference)})")


def test_one_seed_accuracy_is_the_bootstrap_over_examples():
    treated, reference, task = ACCURACY_ROWS["recipe_cloze_acc"]
    planted = planted_accuracies(0.006, "up", seeds=(0,))
    study = artifacts(grid(seeds=(0,)), evaluations=accuracy_evaluations(treated, reference, task, planted, (0,)))
    claim = claim_rows(study.config)["recipe_cloze_acc"](SPECS["recipe_cloze_acc"], study, SETTINGS)
    assert claim.verdict == "contradicted"
    assert claim.estimate.value == 1 - sum(planted[0][0]) / 512
    assert claim.estimate.method == ("paired bootstrap over 1024 examples (1000 resamples, seed 0, percentile)"
                                     + ONE_SEED)


def test_accuracy_drop_of_a_reference_that_answers_almost_nothing_is_not_testable():
    reference = [1] + [0] * 63  # one correct answer: about a third of the resamples miss it
    evaluations = accuracy_evaluations(f"bf16/{RECIPE}", LOW, "cloze", [([0] * 64, reference)] * 3)
    study = artifacts(evaluations=evaluations)
    claim = claim_rows(study.config)["recipe_cloze_acc"](SPECS["recipe_cloze_acc"], study, SETTINGS)
    assert claim.verdict == "not testable at this scale"
    assert claim.reason.startswith("the reference answers 1 of 64 examples correctly and some bootstrap resamples")
    assert claim.evidence == tuple(f"eval:{key(m, s, 'pretrain')}" for s in SEEDS for m in (f"bf16/{RECIPE}", LOW))


def test_accuracy_rows_need_per_example_scores():
    evaluations = accuracy_evaluations(f"bf16/{RECIPE}", LOW, "cloze", [([1, 0], [1, 0])] * 3)
    evaluations[key(f"bf16/{RECIPE}", 2, "pretrain")] = {"metrics": {"perplexity": {}}}
    study = artifacts(evaluations=evaluations)
    with pytest.raises(ValueError, match=rf"evaluation of '{RECIPE} \(BF16\)' has no cloze example_correct "
                                         r"\(metric groups: perplexity\)"):
        claim_rows(study.config)["recipe_cloze_acc"](SPECS["recipe_cloze_acc"], study, SETTINGS)


def test_accuracy_drop_needs_the_same_examples():
    with pytest.raises(ValueError, match=r"accuracies on different examples: \(3,\) vs \(4,\)"):
        accuracy_drop([([1] * 4, [1] * 4), ([1] * 3, [1] * 4)], SETTINGS)


# --- training-loss APE: t over seeds; one seed: circular block bootstrap over steps -------------------------


def planted_losses(threshold, outcome, seeds=SEEDS, max_steps=12, warmup=W, seed=2):
    """Per seed ``(run, reference)`` losses ``{step: loss}`` and the run's relative gaps: from the warmup step on
    the gap is five times the threshold (``up``) or a fifth of it (``down``), per-seed factors 2% apart, or the
    threshold with per-seed factors 50% apart (``straddle``), each with 10% noise along the steps (30% for one
    seed's ``straddle``); before the warmup it is 0.25, which an APE that counted those steps would show."""
    rng = np.random.default_rng(seed)
    steps = max_steps - warmup
    scale = {"up": 5.0, "down": 0.2, "straddle": 1.0}[outcome]
    noise = 0.3 if outcome == "straddle" and len(seeds) == 1 else 0.1
    reference = {t: 4.0 - t / 64 for t in range(max_steps)}
    out = []
    for offset in spread(seeds, 0.5 if outcome == "straddle" else 0.02):
        gaps = threshold * scale * (1 + offset) * (1 + noise * standardized(rng, steps))
        assert (gaps > 0).all()
        run = {t: reference[t] * (1.25 if t < warmup else 1 + gaps[t - warmup] * (-1) ** t) for t in range(max_steps)}
        out.append((run, reference, gaps))
    return out


def loss_tables(run, reference, planted, seeds=SEEDS):
    out = {}
    for seed, (losses, base, _) in zip(seeds, planted, strict=True):
        out[run, seed], out[reference, seed] = losses, base
    return out


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", APE_ROWS)
def test_loss_ape_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    run, reference = APE_ROWS[claim_id]
    planted = planted_losses(spec.prediction.threshold, outcome)
    study = artifacts(losses=loss_tables(run, reference, planted))
    claim = claim_rows(study.config)[claim_id](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    apes = [gaps.mean() for *_, gaps in planted]  # steps 4..11, the warmup excluded
    assert claim.estimate.value == pytest.approx(np.mean(apes), rel=1e-9)
    half = stats.t.ppf(0.975, 2) * np.std(apes, ddof=1) / math.sqrt(3)
    assert (claim.estimate.low, claim.estimate.high) == pytest.approx((np.mean(apes) - half, np.mean(apes) + half),
                                                                      rel=1e-9)
    assert claim.estimate.method == T_METHOD
    assert claim.evidence == tuple(f"log:{r}/seed{s}" for s in SEEDS for r in (run, reference))
    assert claim.detail == (f"training loss of {run} vs {reference} at steps 4..11; APE per seed [0, 1, 2]: "
                            + ", ".join(f"{a:.3%}" for a in apes))


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_one_seed_loss_ape_is_the_block_bootstrap_over_steps(outcome):
    spec = SPECS["recipe_loss_ape"]
    planted = planted_losses(spec.prediction.threshold, outcome, seeds=(0,), max_steps=65)
    study = artifacts(grid(max_steps=65, seeds=(0,)), losses=loss_tables(RECIPE, "bf16-lrlow", planted, (0,)))
    claim = claim_rows(study.config)["recipe_loss_ape"](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(planted[0][2].mean(), rel=1e-9)
    assert claim.estimate.method == (
        "circular block bootstrap over 61 consecutive training steps (blocks of 4 = ceil(n^(1/3)) training steps, "
        "1000 resamples, seed 0, percentile)" + ONE_SEED)


# --- saturation rows: t over seeds; one seed: circular block bootstrap over steps ------------------------------


def exact_saturation(config, run, rates, seed=0):
    """Telemetry of ``run`` where exactly ``round(rate * n)`` of each role's ``n`` calls with a delayed scale
    saturate (random ones); ``rates``: role -> rate."""
    rng = np.random.default_rng(seed)
    rows = telemetry_rows(config, run, lambda *_: False)
    for role, rate in rates.items():
        mine = [r for r in rows if r["role"] == role and not r["cold_start"]]
        for index in rng.choice(len(mine), round(rate * len(mine)), replace=False):
            mine[index].update(overflow=True, rel_error=2 * ERROR_IN_RANGE, mantissa_bits_lost=1.0)
    return rows


CALLS = LAYERS * (2 * (12 - W) - 1)  # per role: 6 layers x 2 calls x 8 HiF8 steps, less the cold start


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_most_recent_saturates(outcome):
    spec = SPECS["most_recent_saturates"]
    rates = {"up": (0.25, 0.3, 0.35), "down": (0.0, 0.0, 0.0), "straddle": (0.0, 0.05, 0.1)}[outcome]
    config = grid()
    telemetry = {(MOST_RECENT, s): exact_saturation(config, MOST_RECENT, dict.fromkeys(ROLES, rate), seed=s)
                 for s, rate in zip(SEEDS, rates, strict=True)}
    claim = claim_rows(config)["most_recent_saturates"](spec, artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    counts = [3 * round(rate * CALLS) for rate in rates]
    fractions = [c / (3 * CALLS) for c in counts]
    assert claim.estimate.value == pytest.approx(np.mean(fractions), abs=1e-15)
    assert claim.estimate.method == T_METHOD
    assert claim.detail == (f"{MOST_RECENT}: saturating layer-calls per seed [0, 1, 2]: "
                            + "; ".join(f"{c} of {3 * CALLS}" for c in counts)
                            + " (steps 4..11, roles input, weight, grad_output)")  # step 4's second call counts
    assert claim.evidence == tuple(f"telemetry:{MOST_RECENT}/seed{s}" for s in SEEDS)


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", ROLE_SATURATION_ROWS)
def test_recipe_saturation_of_one_role(claim_id, outcome):
    spec = SPECS[claim_id]
    run, role = ROLE_SATURATION_ROWS[claim_id]
    t = spec.prediction.threshold
    rates = {"up": (t + 0.09, t + 0.1, t + 0.11), "down": (0.0, 0.0, 0.01), "straddle": (t - 0.05, t, t + 0.05)}
    config = grid()
    others = [r for r in ROLES if r != role]  # the other roles saturate far more: not counted
    telemetry = {(run, s): exact_saturation(config, run, {role: rate, **dict.fromkeys(others, 0.9)}, seed=s)
                 for s, rate in zip(SEEDS, rates[outcome], strict=True)}
    claim = claim_rows(config)[claim_id](spec, artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    counts = [round(rate * CALLS) for rate in rates[outcome]]
    assert claim.estimate.value == pytest.approx(np.mean([c / CALLS for c in counts]), abs=1e-15)
    assert claim.detail.endswith(f"(steps 4..11, roles {role})")
    assert claim.evidence == tuple(f"telemetry:{run}/seed{s}" for s in SEEDS)


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", LOSS_CHANGE_ROWS)
def test_loss_change_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    run, reference = LOSS_CHANGE_ROWS[claim_id]
    change = {"up": (0.02, 0.03, 0.04), "down": (-0.04, -0.03, -0.02), "straddle": (-0.02, 0.0, 0.02)}[outcome]
    losses = {}
    for seed, c in zip(SEEDS, change, strict=True):
        base = {t: 4 - t / 16 for t in range(12)}
        losses[reference, seed] = base
        losses[run, seed] = {t: v * (1 + c) for t, v in base.items()}
    evaluations = with_regime("forgets_bf16", {})  # a forgetting row: the regime it rests on in its detail
    study = artifacts(evaluations=evaluations, losses=losses)
    claim = claim_rows(study.config)[claim_id](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(np.mean(change), abs=1e-12)
    assert claim.estimate.method == T_METHOD
    assert comparison(claim).startswith(f"training loss of {run} vs {reference} at steps 0..11: mean change per seed")
    assert f"P_low / P_base - 1 = {RETAINED:+.1%} " in claim.detail
    assert claim.evidence[:2] == (f"log:{run}/seed0", f"log:{reference}/seed0")


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", DIFFERENCE_ROWS)
def test_saturation_differences(claim_id, outcome):
    spec = SPECS[claim_id]
    run, reference, roles = DIFFERENCE_ROWS[claim_id]
    mine = {"up": (0.4, 0.42, 0.44), "down": (0.05, 0.05, 0.05), "straddle": (0.3, 0.2, 0.1)}[outcome]
    theirs = {"up": 0.05, "down": 0.4, "straddle": 0.2}[outcome]
    others = [r for r in ROLES if r not in roles]  # the other roles saturate the other way round: not counted
    config = grid()
    telemetry = {}
    for s, rate in zip(SEEDS, mine, strict=True):
        telemetry[run, s] = exact_saturation(config, run, {**dict.fromkeys(roles, rate),
                                                           **dict.fromkeys(others, theirs)}, seed=s)
        telemetry[reference, s] = exact_saturation(config, reference, {**dict.fromkeys(roles, theirs),
                                                                       **dict.fromkeys(others, rate)}, seed=10 + s)
    claim = claim_rows(config)[claim_id](spec, artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    n = len(roles) * CALLS
    a = [len(roles) * round(rate * CALLS) for rate in mine]
    b = len(roles) * round(theirs * CALLS)
    assert claim.estimate.value == pytest.approx(np.mean([(x - b) / n for x in a]), abs=1e-15)
    assert claim.estimate.method == T_METHOD
    assert claim.detail == (f"saturating {'/'.join(roles)} layer-calls per seed [0, 1, 2]: "
                            + "; ".join(f"{x} vs {b} of {n}" for x in a) + f" ({run} vs {reference})")
    assert claim.evidence == tuple(f"telemetry:{r}/seed{s}" for s in SEEDS for r in (run, reference))


def test_one_seed_saturation_is_the_block_bootstrap_over_steps():
    config = grid(max_steps=65, seeds=(0,))
    telemetry = {(MOST_RECENT, 0): exact_saturation(config, MOST_RECENT, dict.fromkeys(ROLES, 0.3)),
                 (RECIPE, 0): exact_saturation(config, RECIPE, dict.fromkeys(ROLES, 0.05), seed=1)}
    study = artifacts(config, telemetry=telemetry)
    saturating = claim_rows(config)["most_recent_saturates"](SPECS["most_recent_saturates"], study, SETTINGS)
    calls = 3 * LAYERS * (2 * 61 - 1)
    assert saturating.estimate.value == pytest.approx(3 * round(0.3 * calls / 3) / calls)
    assert saturating.verdict == "reproduced"
    assert saturating.estimate.method == ("circular block bootstrap over 61 consecutive HiF8 steps (blocks of 4 = "
                                          "ceil(n^(1/3)) HiF8 steps, 1000 resamples, seed 0, percentile)" + ONE_SEED)
    less = claim_rows(config)["max_window_saturates_less_input"](SPECS["max_window_saturates_less_input"], study,
                                                                 SETTINGS)
    assert less.verdict == "reproduced"
    assert less.estimate.method.endswith(ONE_SEED)


def test_saturation_difference_needs_the_same_steps():
    config = grid()
    shorter = [r for r in exact_saturation(config, MOST_RECENT, {}) if r["step"] < 11]
    telemetry = {(c, s): exact_saturation(config, c, {}) for c in (RECIPE, MOST_RECENT) for s in SEEDS}
    study = artifacts(config, telemetry={**telemetry, (MOST_RECENT, 1): shorter})
    spec = SPECS["max_window_saturates_less_input"]
    with pytest.raises(ValueError, match=r"trajectories on different steps \(\[4, 5, .*, 11\] vs \[4, .*, 10\]\)"):
        claim_rows(config)[spec.id](spec, study, SETTINGS)


def test_step_sums_skip_cold_starts_and_other_roles():
    config = grid(max_steps=8)
    rows = telemetry_rows(config, RECIPE, lambda step, call, layer, role: role == "weight" or step == 5)
    sums = step_sums(rows, saturation_sums, ["input"])
    assert sums.steps.tolist() == [4, 5, 6, 7]
    assert sums.columns["c"].tolist() == [LAYERS, 2 * LAYERS, 2 * LAYERS, 2 * LAYERS]  # step 4: the 2nd call only
    assert sums.columns["o"].tolist() == [0, 2 * LAYERS, 0, 0]
    assert step_sums(rows, saturation_sums).columns["o"].tolist() == [LAYERS, 6 * LAYERS, 2 * LAYERS, 2 * LAYERS]
    with pytest.raises(ValueError, match="no telemetry row of roles"):
        step_sums([r for r in rows if r["cold_start"]], saturation_sums)
    per_step = telemetry_rows({**config, "history_unit": "step"}, RECIPE, lambda *_: False)
    assert step_sums(per_step, saturation_sums).steps.tolist() == [5, 6, 7]  # every call of step 4 is cold


# --- the quantization error of saturating calls ---------------------------------------------------------------


def error_telemetry(config, ratio, seed, noise=0.0):
    """most_recent's telemetry, 30% of the calls saturating, every input call's error ``ERROR_IN_RANGE`` (times
    ``1 + noise u``, ``u`` uniform in [-1, 1]) and a saturating one's ``1 + ratio`` times that."""
    rng = np.random.default_rng(seed)
    rows = exact_saturation(config, MOST_RECENT, dict.fromkeys(ROLES, 0.3), seed=seed)
    for row in rows:
        error = ERROR_IN_RANGE * (1 + noise * rng.uniform(-1, 1))
        row["rel_error"] = error * (1 + ratio) if row["overflow"] else error
    return rows


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_saturation_raises_error(outcome):
    spec = SPECS["saturation_raises_error"]
    ratios = {"up": (0.95, 1.0, 1.05), "down": (-0.55, -0.5, -0.45), "straddle": (-0.5, 0.0, 0.5)}[outcome]
    config = grid()
    telemetry = {(MOST_RECENT, s): error_telemetry(config, r, s) for s, r in zip(SEEDS, ratios, strict=True)}
    claim = claim_rows(config)["saturation_raises_error"](spec, artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(np.mean(ratios), abs=1e-12)
    assert claim.estimate.method == T_METHOD
    saturating = round(0.3 * CALLS)
    assert claim.detail == (
        f"{MOST_RECENT}, input: mean relative error per seed [0, 1, 2]: "
        + "; ".join(f"{ERROR_IN_RANGE * (1 + r):.3g} on {saturating} saturating vs {ERROR_IN_RANGE:.3g} on "
                    f"{CALLS - saturating} other calls" for r in ratios)
        + "; the over-range values of a saturating call lose 1.00, 1.00, 1.00 mantissa bits on average")
    assert claim.evidence == tuple(f"telemetry:{MOST_RECENT}/seed{s}" for s in SEEDS)


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_one_seed_error_ratio_is_the_block_bootstrap(outcome):
    config = grid(max_steps=65, seeds=(0,))
    ratio = {"up": 1.0, "down": -0.5, "straddle": 0.0}[outcome]
    rows = error_telemetry(config, ratio, 0, noise=0.5)
    claim = claim_rows(config)["saturation_raises_error"](SPECS["saturation_raises_error"],
                                                          artifacts(config, telemetry={(MOST_RECENT, 0): rows}),
                                                          SETTINGS)
    assert claim.verdict == expected("above", outcome)
    inputs = [r for r in rows if r["role"] == "input" and not r["cold_start"]]
    mean = {flag: np.mean([r["rel_error"] for r in inputs if r["overflow"] == flag]) for flag in (True, False)}
    assert claim.estimate.value == pytest.approx(mean[True] / mean[False] - 1, rel=1e-9)
    assert claim.estimate.method.startswith("circular block bootstrap over 61 consecutive HiF8 steps")
    assert claim.estimate.method.endswith(ONE_SEED)


def test_error_ratio_without_a_saturating_call_is_not_testable():
    config = grid()
    telemetry = {(MOST_RECENT, s): error_telemetry(config, 1.0, s) for s in SEEDS}
    telemetry[MOST_RECENT, 1] = exact_saturation(config, MOST_RECENT, {})  # seed 1 never saturates
    claim = claim_rows(config)["saturation_raises_error"](SPECS["saturation_raises_error"],
                                                          artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == "not testable at this scale"
    assert claim.reason.startswith("the statistic is undefined on some seed ([1.0, nan, 1.0")
    assert claim.evidence == tuple(f"telemetry:{MOST_RECENT}/seed{s}" for s in SEEDS)


def test_error_ratio_by_hand():
    sums = {"eo": np.array(3.0), "no": np.array(2.0), "en": np.array(1.0), "nn": np.array(4.0)}
    assert error_ratio(sums) == (3 / 2) / (1 / 4) - 1


# --- scale jitter ---------------------------------------------------------------------------------------------


def alternating(amplitude):
    """A scale of ``15 * 2^(amplitude (c mod 2))`` at call ``c`` of the run: every consecutive call jitters by
    ``amplitude`` in log2."""
    def scale(step, call, layer, role):
        return 15.0 * 2 ** (amplitude * ((2 * step + call) % 2))

    return scale


def jitter_telemetry(config, run, amplitude, noise=0.0, seed=0):
    rows = telemetry_rows(config, run, lambda *_: False, scale=alternating(amplitude))
    rng = np.random.default_rng(seed)
    for row in rows:
        row["scale"] *= 2 ** (noise * rng.uniform(-1, 1))
    return rows


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_cts_jitter(outcome):
    spec = SPECS["cts_jitter"]
    mine = {"up": (0.49, 0.5, 0.51), "down": (0.0, 0.0, 0.0), "straddle": (0.4, 0.5, 0.6)}[outcome]
    theirs = {"up": 0.0, "down": 0.5, "straddle": 0.5}[outcome]
    config = grid()
    telemetry = {}
    for s, amplitude in zip(SEEDS, mine, strict=True):
        telemetry[CURRENT, s] = jitter_telemetry(config, CURRENT, amplitude)
        telemetry[RECIPE, s] = jitter_telemetry(config, RECIPE, theirs)
    claim = claim_rows(config)["cts_jitter"](spec, artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(np.mean(mine) - theirs, abs=1e-12)
    assert claim.estimate.method == T_METHOD
    assert claim.detail == ("mean |delta log2 scale| per call, per seed [0, 1, 2]: "
                            + "; ".join(f"{a:.3g} vs {theirs:.3g}" for a in mine) + f" ({CURRENT} vs {RECIPE})")
    assert claim.evidence == tuple(f"telemetry:{r}/seed{s}" for s in SEEDS for r in (CURRENT, RECIPE))


def test_one_seed_jitter_is_the_block_bootstrap():
    config = grid(max_steps=65, seeds=(0,))
    telemetry = {(CURRENT, 0): jitter_telemetry(config, CURRENT, 0.5, noise=0.2, seed=1),
                 (RECIPE, 0): jitter_telemetry(config, RECIPE, 0.0, noise=0.2, seed=2)}
    claim = claim_rows(config)["cts_jitter"](SPECS["cts_jitter"], artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == "reproduced"
    assert claim.estimate.method.startswith("circular block bootstrap over 61 consecutive HiF8 steps")
    assert claim.estimate.method.endswith(ONE_SEED)


def test_jitter_sums_follow_each_layer_and_role_from_its_cold_start():
    def row(layer, scale, cold=False):
        return {"layer": layer, "role": "input", "scale": scale, "cold_start": cold, "step": 0}

    rows = [row("a", 4.0, cold=True), row("b", 1.0, cold=True), row("a", 8.0), row("b", 4.0), row("a", 2.0),
            row("a", 0.0), row("a", 1.0)]
    assert [(r["layer"], r["jitter"]) for r in jitter_sums(rows)] == [("a", 1.0), ("b", 2.0), ("a", 2.0)]
    assert jitter_sums([row("a", 2.0), row("a", 4.0)]) == [{**row("a", 4.0), "jitter": 1.0}]  # no cold start
    # a second cold start (the observers reset) starts over
    assert jitter_sums([row("a", 2.0, cold=True), row("a", 8.0, cold=True), row("a", 4.0)])[0]["jitter"] == 1.0


# --- the whole table ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """The paper-like study of the smoke profile with every observer, seeds 0 and 1."""
    return study_artifacts(build_study(tmp_path_factory.mktemp("paper"), **PAPER_LIKE))


def test_claims_in_the_report_order(paper):
    # the config reaches the step as key-sorted JSON: the order is the code's, and the config lists the same
    assert list(claim_rows(paper.config)) == list(SPECS)
    shuffled = dict(sorted(SPECS.items()))
    rows, checks = claims(shuffled, paper, SETTINGS)
    assert [c.id for c in rows] == list(SPECS)
    assert all(c.estimate is not None for c in rows)  # every observer: every run is there
    assert {c.estimate.method for c in rows if c.id in PERPLEXITY_ROWS} == {
        SHARED.format("64 evaluation windows").replace("3 seeds", "2 seeds")}
    by_id = {c.id: c for c in rows}
    t = stats.t.ppf(0.975, 1)
    # forgetting +25% (20 vs 16) at both seeds: no spread
    assert by_id["forgets_bf16"].estimate.value == pytest.approx(0.25)
    assert by_id["forgets_bf16"].verdict == "reproduced"
    # the recipe in BF16: 2^-9 times 1.125 and 0.875; two seeds: mean +- t_(0.975, 1) |d_0 - d_1| / 2
    recipe = by_id["recipe_pretrain_perplexity"].estimate
    assert recipe.value == pytest.approx(2**-9, rel=1e-9)
    assert (recipe.low, recipe.high) == pytest.approx((2**-9 - t * 2**-11 / 2, 2**-9 + t * 2**-11 / 2), rel=1e-6)
    assert by_id["recipe_pretrain_perplexity"].verdict == "reproduced"
    # in HiF8 the checkpoint quantization adds 2^-6: above the paper's 0.6%
    assert by_id["recipe_pretrain_perplexity_hif8"].estimate.value == pytest.approx(2**-9 + 2**-6, rel=1e-9)
    assert by_id["recipe_pretrain_perplexity_hif8"].verdict == "contradicted"
    # APE 2^-8 (9 and 7 x 2^-11): two seeds leave it open against the paper's 0.11%
    ape = by_id["recipe_loss_ape"].estimate
    assert ape.value == pytest.approx(2**-8, rel=1e-12)
    assert (ape.low, ape.high) == pytest.approx((2**-8 - t * 2**-11, 2**-8 + t * 2**-11), rel=1e-9)
    assert ape.method == "t-interval over 2 seeds"
    assert by_id["recipe_loss_ape"].verdict == "inconclusive"
    # the regime the forgetting rows rest on, no row of its own: bf16-lrlow 16 vs the base model 13
    assert f"P_low / P_base - 1 = {16 / 13 - 1:+.1%} " in by_id["forgets_bf16"].detail
    # saturating calls quantize worse: 2^-4 vs 2^-5 planted, the ratio exactly 1
    assert by_id["saturation_raises_error"].estimate.value == pytest.approx(1.0)
    assert by_id["cts_jitter"].estimate.value == 0.0  # constant planted scales
    document = claims_document(rows, checks, regime_card(paper))
    assert sum(document["counts"].values()) == 17  # the paper's rows; 34 in all
    assert sum(sum(counts.values()) for counts in document["counts_by_kind"].values()) == 34
    assert document["outside_regime"] == 0  # the smoke profile and the planted records: every quantity inside
    judged = apply_controls(apply_regime(rows, regime_card(paper)))
    assert [Claim.from_dict(row) for row in document["claims"]] == judged


def test_claims_refuses_specs_that_do_not_match(paper):
    extra = claim_specs({**raw_config()["claims"], "new_claim": raw_config()["claims"]["forgets_bf16"]})
    with pytest.raises(ValueError, match=r"no computation for \['new_claim'\], no spec for nothing"):
        claims(extra, paper, SETTINGS)
    fewer = {k: v for k, v in SPECS.items() if k != "forgets_bf16"}
    with pytest.raises(ValueError, match=r"no computation for nothing, no spec for \['forgets_bf16'\]"):
        claims(fewer, paper, SETTINGS)


# --- implementation checks ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cell():
    return observer_cell(smoke_config())


def test_every_check_holds_on_the_paper_like_study(paper, cell):
    checks = study_checks(dataclasses.replace(paper, observers=Artifact("cell.json", cell)))
    telemetry = [f"telemetry_accounts_{run.replace('-', '_')}_seed{s}" for run in telemetry_runs(paper.config)
                 for s in (0, 1)]
    assert [c.id for c in checks] == [
        "synthetic_most_recent_every_spike", "synthetic_max_window_no_recurring_saturation",
        "synthetic_current_never_saturates", *telemetry, "same_windows_pretrain", "same_windows_shift",
        "same_examples_cloze", "same_examples_choice", "unit_scores_make_the_metrics"]
    assert len(telemetry) == 8
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert checks[0].measured == "10 of 10 spikes"
    assert checks[1].measured == "0 of 9 spikes after the first"
    assert checks[3].measured == ("288 rows = 6 layers x 3 roles x 2 calls x steps 4..11 (expected 4..11); cold "
                                  "starts at steps [4]; saturation.json agrees")
    assert checks[3].evidence == ("results/maxwindow_hif8/runs/most_recent-lrlow-w4/seed0/telemetry.csv.gz",
                                  "results/maxwindow_hif8/runs/most_recent-lrlow-w4/seed0/saturation.json")


def test_observer_checks_fail_on_a_broken_observer(cell):
    broken = copy.deepcopy(cell)
    for row in broken["rows"]:
        if (row["kind"], row["observer"]) == ("spikes", "max_window"):
            row["recurring_spike_saturations"] = 3
        if (row["kind"], row["observer"]) == ("spikes", "most_recent"):
            row["spike_saturations"] = 9
        if (row["kind"], row["observer"]) == ("drift", "current"):
            row["saturation_events"] = 1
    checks = observer_checks(broken, "cell.json")
    assert [c.passed for c in checks] == [False, False, False]
    assert checks[0].measured == "9 of 10 spikes"
    assert checks[1].measured == "3 of 9 spikes after the first"
    assert "drift 1" in checks[2].measured
    assert checks[0].evidence == ("cell.json",)


def test_observer_checks_skip_the_guarantee_without_its_premise():
    cell = observer_cell(smoke_config(observer_options={"max_window": {"window": 10}}))  # spikes every 20 steps
    assert [c.id for c in observer_checks(cell, "c.json")] == ["synthetic_most_recent_every_spike",
                                                               "synthetic_current_never_saturates"]


def telemetry_artifacts(rows, saturation=None):
    return Artifact("t.csv", rows), Artifact("s.json", saturation_summary(rows) if saturation is None else saturation)


def accounted_rows(grad_accum=2, history_unit="call"):
    config = {**grid(), "history_unit": history_unit}
    config["train"] = {**config["train"], "grad_accum": grad_accum}
    return telemetry_rows(config, RECIPE, lambda step, call, layer, role: (step + call) % 2 == 0)


@pytest.mark.parametrize(("calls", "history_unit"), [(1, "call"), (2, "call"), (3, "call"), (2, "step")])
def test_telemetry_check_accounts_for_every_layer_role_step_and_call(calls, history_unit):
    rows = accounted_rows(calls, history_unit)
    check = telemetry_check((RECIPE, 1), *telemetry_artifacts(rows), W, 12, calls)
    assert check.passed, check.measured
    assert check.id == "telemetry_accounts_max_window_lrlow_w4_seed1"
    assert check.statement.startswith(f"{RECIPE} (seed 1)'s telemetry has every layer and role {calls} times per "
                                      "HiF8 step")
    assert check.measured == (f"{8 * calls * 18} rows = 6 layers x 3 roles x {calls} calls x steps 4..11 (expected "
                              "4..11); cold starts at steps [4]; saturation.json agrees")
    assert check.evidence == ("t.csv", "s.json")


def test_telemetry_check_needs_the_calls_per_step_of_the_config():
    assert not telemetry_check((RECIPE, 0), *telemetry_artifacts(accounted_rows(2)), W, 12, 1).passed
    assert not telemetry_check((RECIPE, 0), *telemetry_artifacts(accounted_rows(1)), W, 12, 2).passed


def test_telemetry_check_of_current_scaling_expects_no_cold_start():
    """Current scaling predicts from the call's own amax: no cold start at the warmup step, and one is a failure."""
    delayed = accounted_rows()
    current = [{**row, "cold_start": False} for row in delayed]
    check = telemetry_check(("current-lrlow-w4", 0), *telemetry_artifacts(current), W, 12, 2, delayed=False)
    assert check.passed, check.measured
    assert "no cold start (current scaling)" in check.statement
    assert "cold starts at steps []" in check.measured
    assert not telemetry_check(("current-lrlow-w4", 0), *telemetry_artifacts(delayed), W, 12, 2, delayed=False).passed
    assert not telemetry_check((RECIPE, 0), *telemetry_artifacts(current), W, 12, 2).passed


@pytest.mark.parametrize("damage", ["missing call", "duplicate row", "extra call", "late cold start", "summary",
                                    "last step", "missing role"])
def test_telemetry_check_fails_on_damaged_telemetry(damage):
    rows = accounted_rows()
    saturation = None
    if damage == "missing call":  # one of the two calls of step 7 of one layer and role
        rows.remove(next(r for r in rows if r["step"] == 7 and (r["layer"], r["role"]) == ("l2", "weight")))
    elif damage == "duplicate row":
        rows = [*rows, rows[-1]]
    elif damage == "extra call":  # a third call at step 9, every layer and role
        rows = [*rows, *[{**r} for r in rows if r["step"] == 9][:18]]
    elif damage == "late cold start":
        rows[-1] = {**rows[-1], "cold_start": True}
    elif damage == "summary":
        saturation = saturation_summary(rows)
        saturation = {**saturation, "input": {**saturation["input"], "calls": 1}}
    elif damage == "last step":
        rows = [r for r in rows if r["step"] < 11]
    else:
        rows = [r for r in rows if r["role"] != "grad_output"]
    check = telemetry_check((RECIPE, 0), *telemetry_artifacts(rows, saturation), W, 12, 2)
    assert not check.passed, damage
    if damage == "summary":
        assert check.measured.endswith("saturation.json disagrees")


def test_pairing_checks_fail_on_other_windows_or_examples(paper):
    evaluations = dict(paper.evaluations)
    assert all(c.passed for c in pairing_checks(evaluations))
    bad_key = f"hif8/{RECIPE}/seed1/pretrain"
    record = copy.deepcopy(evaluations[bad_key].data)
    record["metrics"]["perplexity"]["window_tokens"][0] = 63
    record["metrics"]["cloze"]["example_correct"].append(1)
    evaluations[bad_key] = Artifact("bad.json", record)
    checks = {c.id: c for c in pairing_checks(evaluations)}
    records = 1 + 10 * 2 * 2  # the base model, every run (the control too) in BF16 and HiF8 at both seeds
    assert not checks["same_windows_pretrain"].passed
    assert checks["same_windows_pretrain"].measured == (f"{records} records, 2 distinct window lists (64 windows, 64 "
                                                        "windows)")
    assert checks["same_windows_shift"].passed
    assert not checks["same_examples_cloze"].passed
    assert checks["same_examples_cloze"].measured == f"{records} records, example counts [1024, 1025]"
    assert checks["same_examples_choice"].passed


def test_unit_score_check_fails_when_the_windows_do_not_make_the_metric(paper):
    evaluations = dict(paper.evaluations)
    assert unit_score_check(evaluations).passed
    record = copy.deepcopy(evaluations["bf16/base/shift"].data)
    record["metrics"]["perplexity"]["perplexity"] *= 1.001
    evaluations["bf16/base/shift"] = Artifact("bad.json", record)
    check = unit_score_check(evaluations)
    assert not check.passed
    assert check.measured == "bf16/base/shift: perplexity 48.048 vs 48 from 4096 window tokens (recorded 4096)"


def test_a_failed_check_stops_the_claims_document(paper, cell):
    broken = copy.deepcopy(cell)
    next(r for r in broken["rows"] if (r["kind"], r["observer"]) == ("spikes", "max_window"))[
        "recurring_spike_saturations"] = 2
    rows, checks = claims(SPECS, dataclasses.replace(paper, observers=Artifact("cell.json", broken)), SETTINGS)
    with pytest.raises(ImplementationCheckFailed, match="synthetic_max_window_no_recurring_saturation"):
        claims_document(rows, checks, regime_card(paper))


# --- the claims step ------------------------------------------------------------------------------------------


def write_inputs(directory, cell):
    """Every input of ``python -m papers.maxwindow_hif8 claims`` for the paper-like study under ``directory``
    (telemetry of every run, the baselines' header-only files included: the step reads the ones it needs)."""
    study = build_study(directory / "runs", **PAPER_LIKE)
    config = study["config"]
    evaluations = []
    for name, record in study["evaluations"].items():
        path = directory / "eval" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
        evaluations.append(str(path))
    telemetry = [write_telemetry(directory / "runs" / run / f"seed{seed}",
                                 telemetry_rows(config, run, lambda s, c, i, r: i == s % 6)
                                 if run in telemetry_runs(config) else [])
                 for run, seed in study["logs"]]
    (directory / "observer_study.json").write_text(json.dumps(cell))
    return ["claims", "--config-json", json.dumps(config, sort_keys=True),
            "--evidence-json", json.dumps({"level": 0.95, "resamples": 1000, "seed": 0}),
            "--evaluations", *evaluations, "--logs", *study["logs"].values(), "--telemetry", *telemetry,
            "--observer-study", str(directory / "observer_study.json"), "--out", str(directory / "claims.json")]


def test_study_artifacts_read_from_their_paths(tmp_path, cell):
    argv = write_inputs(tmp_path, cell)
    config = json.loads(argv[argv.index("--config-json") + 1])
    evaluations = argv[argv.index("--evaluations") + 1:argv.index("--logs")]
    logs = argv[argv.index("--logs") + 1:argv.index("--telemetry")]
    telemetry = argv[argv.index("--telemetry") + 1:argv.index("--observer-study")]
    study = Study.read(config, evaluations, logs, telemetry, str(tmp_path / "observer_study.json"))
    assert len(study.evaluations) == 2 + 10 * 2 * 2 * 2
    assert f"hif8/{RECIPE}/seed1/shift" in study.evaluations
    assert sorted(study.losses) == sorted((run, s) for run in run_names(config) for s in (0, 1))
    assert sorted(study.telemetry) == sorted((run, s) for run in telemetry_runs(config) for s in (0, 1))
    assert study.saturation[RECIPE, 1].path == str(tmp_path / f"runs/{RECIPE}/seed1/saturation.json")
    assert study.saturation[RECIPE, 1].data == saturation_summary(study.telemetry[RECIPE, 1].data)
    assert study.losses["bf16-lrlow", 0].data[3] == 4.0 - 3 / 16
    assert study.seeds == [0, 1]
    assert study.observers == Artifact(str(tmp_path / "observer_study.json"), cell)


def test_claims_step_writes_the_document(tmp_path, cell):
    assert main(write_inputs(tmp_path, cell)) == 0
    document = json.loads((tmp_path / "claims.json").read_text())
    assert set(document) == {"rule", "claims", "checks", "counts", "counts_by_kind", "not_counted", "outside_regime",
                             "regime", "coverage"}
    assert [c["id"] for c in document["claims"]] == list(SPECS)
    assert all(c["passed"] for c in document["checks"])
    assert sum(document["counts"].values()) == 17  # the paper's rows; 34 in all
    # the regime card of the smoke profile and the planted records: every quantity inside its bounds
    assert [(r["id"], r["ours"], r["inside"]) for r in document["regime"]] == [
        ("lr_ratio", pytest.approx(10.0), True), ("warmup_share", 4 / 12, True), ("window_steps", 32.0, True),
        ("quantized_share", 0.5, True)]
    assert document["outside_regime"] == 0
    assert next(c for c in document["claims"] if c["id"] == "forgets_bf16")["requires"] == dict(
        SPECS["forgets_bf16"].requires)
    recipe = next(c for c in document["claims"] if c["id"] == "recipe_pretrain_perplexity_hif8")
    assert recipe["evidence"] == [str(tmp_path / f"eval/{m}/seed{s}/pretrain.json") for s in (0, 1)
                                  for m in (f"hif8/{RECIPE}", "bf16/bf16-lrlow")]
    saturating = next(c for c in document["claims"] if c["id"] == "most_recent_saturates")
    # layer i saturates at the steps s with s % 6 == i, both calls: per layer and role 15 of 90 delayed calls
    assert saturating["estimate"]["value"] == pytest.approx(1 / 6)
    assert saturating["evidence"] == [str(tmp_path / f"runs/{MOST_RECENT}/seed{s}/telemetry.csv.gz") for s in (0, 1)]


def test_claims_step_writes_nothing_when_a_check_fails(tmp_path, cell):
    broken = copy.deepcopy(cell)
    next(r for r in broken["rows"] if (r["kind"], r["observer"]) == ("spikes", "most_recent"))[
        "spike_saturations"] = 0
    with pytest.raises(ImplementationCheckFailed, match="synthetic_most_recent_every_spike"):
        main(write_inputs(tmp_path, broken))
    assert not (tmp_path / "claims.json").exists()


def test_claims_step_names_bad_evidence_settings(tmp_path, cell, capsys):
    argv = write_inputs(tmp_path, cell)
    argv[argv.index("--evidence-json") + 1] = json.dumps({"level": 0.95, "resamples": 10, "seed": 0})
    assert main(argv) == 2
    assert "evidence resamples must be an integer >= 1000, got 10" in capsys.readouterr().err
