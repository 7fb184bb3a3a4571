"""The claims: the specs of config.yaml, every row computed on planted data three ways (reproduced, contradicted,
inconclusive, the verdict following the data in both directions), rows that are not testable, the implementation
checks (a failed one stops the claims document) and the ``claims`` step end to end."""

import copy
import json
import math

import numpy as np
import pytest
from mw_testing import (
    LAYERS,
    PAPER_LIKE,
    ROLES,
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

from common.report import Claim, ImplementationCheckFailed, claim_specs, claims_document
from common.report.claims import SPEC_FIELDS
from common.uncertainty import Evidence
from papers.maxwindow_hif8.__main__ import main
from papers.maxwindow_hif8.claims import (
    Artifact,
    StudyArtifacts,
    accuracy_drop,
    claim_rows,
    observer_checks,
    pairing_checks,
    step_counts,
    study_checks,
    study_claims,
    telemetry_check,
    telemetry_runs,
    unit_score_check,
)
from papers.maxwindow_hif8.run import saturation_summary
from papers.maxwindow_hif8.settings import profile_config
from papers.maxwindow_hif8.study import observer_cell

SETTINGS = Evidence(0.95, 1000, 0)
SPECS = claim_specs(raw_config()["claims"])
RECIPE, MOST_RECENT = "max_window-lrlow-w4", "most_recent-lrlow-w4"  # the smoke profile's warmup is 4 steps
PERPLEXITY_ROWS = {  # id: (treated, reference, corpus)
    "recipe_pretrain_perplexity": (f"hif8/{RECIPE}", "bf16/bf16-lrlow", "pretrain"),
    "recipe_shift_perplexity": (f"hif8/{RECIPE}", "bf16/bf16-lrlow", "shift"),
    "forgets_bf16": ("bf16/bf16-lrhigh", "bf16/bf16-lrlow", "pretrain"),
    "forgets_current": ("hif8/current-lrhigh-w4", "hif8/current-lrlow-w4", "pretrain"),
    "ablation_high_lr": ("hif8/max_window-lrhigh-w4", f"hif8/{RECIPE}", "pretrain"),
    "ablation_most_recent": (f"hif8/{MOST_RECENT}", f"hif8/{RECIPE}", "pretrain"),
    "ablation_no_warmup": ("hif8/max_window-lrlow-w0", f"hif8/{RECIPE}", "pretrain"),
}
ACCURACY_ROWS = {  # id: (treated, reference, task)
    "recipe_cloze_acc": (f"hif8/{RECIPE}", "bf16/bf16-lrlow", "cloze"),
    "recipe_choice_acc_norm": (f"hif8/{RECIPE}", "bf16/bf16-lrlow", "choice"),
    "forgets_bf16_cloze": ("bf16/bf16-lrhigh", "bf16/bf16-lrlow", "cloze"),
    "forgets_bf16_choice": ("bf16/bf16-lrhigh", "bf16/bf16-lrlow", "choice"),
}
APE_ROWS = {"saturating_loss_ape": (MOST_RECENT, "bf16-lrlow"), "recipe_loss_ape": (RECIPE, "bf16-lrlow")}
SATURATION_ROWS = {"most_recent_saturates": MOST_RECENT}
DIFFERENCE_ROWS = {f"max_window_saturates_less_{role}": role for role in ROLES}  # max_window minus most_recent
FORGETTING_ROWS = ("forgets_bf16", "forgets_current", "forgets_bf16_cloze", "forgets_bf16_choice")
LOW, BASE = "bf16/bf16-lrlow/pretrain", "bf16/base/pretrain"  # the regime the forgetting rows rest on
RETAINED = 0.13  # planted: bf16-lrlow's pretraining perplexity 13% above the base model's
OUTCOMES = ("up", "down", "straddle")  # the planted statistic well above, well below, or at the threshold


def expected(direction, outcome):
    if outcome == "straddle":
        return "inconclusive"
    return "reproduced" if (outcome == "up") == (direction == "above") else "contradicted"


def grid(max_steps=65):
    """The 18-run grid of the smoke profile (warmup 4) with ``max_steps`` steps (60 after the cold start)."""
    config = smoke_config()
    return {**config, "train": {**config["train"], "max_steps": max_steps}}


def artifacts(config=None, *, evaluations=None, losses=None, telemetry=None):
    """A :class:`StudyArtifacts` holding just the planted artifacts (path = ``<kind>:<key>``)."""
    telemetry = telemetry or {}
    return StudyArtifacts(
        grid() if config is None else config,
        {k: Artifact(f"eval:{k}", v) for k, v in (evaluations or {}).items()},
        {k: Artifact(f"log:{k}", v) for k, v in (losses or {}).items()},
        {k: Artifact(f"telemetry:{k}", v) for k, v in telemetry.items()},
        {k: Artifact(f"saturation:{k}", saturation_summary(v)) for k, v in telemetry.items()})


def standardized(rng, n):
    """``n`` normal draws with mean exactly 0 and standard deviation exactly 1."""
    z = rng.standard_normal(n)
    return (z - z.mean()) / z.std()


# --- the specs ------------------------------------------------------------------------------------------------


def test_every_spec_has_its_computation_and_every_row_is_tested():
    tested = {*PERPLEXITY_ROWS, *ACCURACY_ROWS, *APE_ROWS, *SATURATION_ROWS, *DIFFERENCE_ROWS}
    assert set(SPECS) == set(claim_rows(4)) == tested
    assert len(SPECS) == 17
    assert "low_lr_keeps_pretraining" not in SPECS  # its threshold was set after the result: no claim


def test_specs_state_their_source_and_the_paper():
    for spec in SPECS.values():
        assert spec.prediction.source.startswith(("paper:", "reason:")), spec.id
        assert spec.paper
        assert spec.group
    assert set(raw_config()["claims"]["forgets_bf16"]) == set(SPEC_FIELDS)


def test_the_paper_numbers_are_the_thresholds():
    recipe = [c for c in SPECS if c.startswith("recipe_") and c != "recipe_loss_ape"]
    assert {SPECS[c].prediction.threshold for c in recipe} == {0.006}  # <= 0.6% relative drop
    assert {SPECS[c].prediction.direction for c in recipe} == {"below"}
    assert SPECS["recipe_loss_ape"].prediction.threshold == 0.0011  # APE 0.11%
    assert SPECS["recipe_loss_ape"].prediction.source == "paper: training-loss APE 0.11%"


def with_regime(claim_id, evaluations):
    """``evaluations`` and, for a forgetting row, the regime it rests on: bf16-lrlow scored on the pretraining
    corpus's windows (its planted record's, else every window at log-perplexity 3) and the base model there,
    ``RETAINED`` below it in every window."""
    if claim_id not in FORGETTING_ROWS:
        return evaluations
    out = copy.deepcopy(evaluations)
    low = out.setdefault(LOW, {"metrics": {}})["metrics"]
    group = low.setdefault("perplexity", perplexity_group([3.0] * WINDOWS))
    window_log_perplexity = np.asarray(group["window_nll"]) / np.asarray(group["window_tokens"])
    out[BASE] = perplexity_record(window_log_perplexity - math.log1p(RETAINED))
    return out


def comparison(claim):
    """The row's detail before the regime a forgetting row appends."""
    return claim.detail.split("; regime the forgetting comparison rests on: ")[0]


def regime_evidence(claim_id, evidence):
    """``evidence`` and, for a forgetting row, the records of its regime."""
    return tuple(dict.fromkeys([*evidence, f"eval:{LOW}", f"eval:{BASE}"])) if claim_id in FORGETTING_ROWS else evidence


def test_the_groups_in_report_order():
    groups = list(dict.fromkeys(spec.group for spec in SPECS.values()))
    assert groups == ["The training loss hides amax saturation", "max_window removes the saturation most_recent has",
                      "The recipe is near-lossless vs BF16 at the same learning rate",
                      "A high learning rate forgets, with or without quantization", "Neither fix alone suffices"]


# --- perplexity rows: paired bootstrap over windows -----------------------------------------------------------


def planted_perplexities(threshold, outcome, seed=0):
    """Per-window log-perplexities ``(treated, reference)``: the relative change ``P_a / P_b - 1`` is the
    threshold shifted by about +-5% (``up`` / ``down``: per-window noise 0.01) or exactly the threshold with noise
    0.1 (``straddle``)."""
    rng = np.random.default_rng(seed)
    reference = 3.0 + 0.5 * rng.standard_normal(WINDOWS)  # window difficulty, shared by both models
    shift = {"up": 0.05, "down": -0.05, "straddle": 0.0}[outcome]
    noise = (0.1 if outcome == "straddle" else 0.01) * standardized(rng, WINDOWS)
    return reference + math.log1p(threshold) + shift + noise, reference


def perplexity_record(window_log_perplexity):
    return {"metrics": {"perplexity": perplexity_group(window_log_perplexity)}}


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", PERPLEXITY_ROWS)
def test_perplexity_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    treated, reference, corpus = PERPLEXITY_ROWS[claim_id]
    a, b = planted_perplexities(spec.prediction.threshold, outcome)
    study = artifacts(evaluations=with_regime(claim_id, {f"{treated}/{corpus}": perplexity_record(a),
                                                         f"{reference}/{corpus}": perplexity_record(b)}))
    claim = claim_rows(4)[claim_id](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(math.expm1(np.mean(a) - np.mean(b)), rel=1e-9)
    assert claim.estimate.method == ("paired bootstrap over 64 evaluation windows (1000 resamples, seed 0, "
                                     "percentile); one training seed per model: evaluation sampling only, not "
                                     "seed-to-seed variation")
    assert claim.evidence == regime_evidence(claim_id, (f"eval:{treated}/{corpus}", f"eval:{reference}/{corpus}"))
    assert comparison(claim).endswith(f"on the {corpus} corpus's test split (64 windows, 4096 tokens)")


def test_perplexity_detail_names_the_models():
    a, b = planted_perplexities(0.0, "up")
    study = artifacts(evaluations=with_regime("forgets_bf16", {"bf16/bf16-lrhigh/pretrain": perplexity_record(a),
                                                               "bf16/bf16-lrlow/pretrain": perplexity_record(b)}))
    claim = claim_rows(4)["forgets_bf16"](SPECS["forgets_bf16"], study, SETTINGS)
    pa, pb = (perplexity_group(x)["perplexity"] for x in (a, b))
    assert claim.detail.startswith(f"perplexity {pa:.4g} for bf16-lrhigh (BF16) vs {pb:.4g} for bf16-lrlow (BF16)")


def test_perplexity_rows_need_the_same_windows():
    a, b = planted_perplexities(0.0, "up")
    shorter = perplexity_record(b[:-1])
    study = artifacts(evaluations={"bf16/bf16-lrhigh/pretrain": perplexity_record(a),
                                   "bf16/bf16-lrlow/pretrain": shorter})
    with pytest.raises(ValueError, match=r"bf16-lrhigh \(BF16\) and bf16-lrlow \(BF16\): perplexities scored "
                                         r"on different windows \(64 vs 63 windows"):
        claim_rows(4)["forgets_bf16"](SPECS["forgets_bf16"], study, SETTINGS)


@pytest.mark.parametrize("claim_id", FORGETTING_ROWS)
def test_forgetting_rows_show_the_regime_they_rest_on(claim_id):
    treated, reference, unit = (PERPLEXITY_ROWS | ACCURACY_ROWS)[claim_id]
    if unit == "pretrain":
        a, b = planted_perplexities(0.0, "up")
        planted = {f"{treated}/pretrain": perplexity_record(a), f"{reference}/pretrain": perplexity_record(b)}
    else:
        a, b = planted_accuracies(0.0, "up")
        planted = {f"{treated}/pretrain": accuracy_record(unit, a), f"{reference}/pretrain": accuracy_record(unit, b)}
    claim = claim_rows(4)[claim_id](SPECS[claim_id], artifacts(evaluations=with_regime(claim_id, planted)), SETTINGS)
    assert claim.verdict == "reproduced"  # the regime is shown, never judged
    assert claim.detail == (
        f"{comparison(claim)}; regime the forgetting comparison rests on: the low learning rate keeps the "
        "pretraining corpus, bf16-lrlow (BF16) vs the base model on its test split, P_low / P_base - 1 = +13.0% "
        "(95% interval [+13.0%, +13.0%], paired bootstrap over 64 evaluation windows (1000 resamples, seed 0, "
        "percentile); one training seed per model: evaluation sampling only, not seed-to-seed variation)")
    assert claim.evidence[-2:] == (f"eval:{LOW}", f"eval:{BASE}")
    assert len(set(claim.evidence)) == len(claim.evidence)


def test_a_forgetting_row_needs_the_base_model():
    a, b = planted_perplexities(0.0, "up")
    study = artifacts(evaluations={"bf16/bf16-lrhigh/pretrain": perplexity_record(a), LOW: perplexity_record(b)})
    with pytest.raises(ValueError, match=r"run 'base' has no evaluation \('bf16/base/pretrain'"):
        claim_rows(4)["forgets_bf16"](SPECS["forgets_bf16"], study, SETTINGS)


def test_a_run_the_profile_does_not_train_is_not_testable():
    smoke = profile_config(raw_config(), "smoke")  # observers most_recent and max_window only
    claim = claim_rows(4)["forgets_current"](SPECS["forgets_current"], artifacts(smoke), SETTINGS)
    assert claim.verdict == "not testable at this scale"
    assert claim.estimate is None
    assert claim.reason == "this profile trains no run 'current-lrhigh-w4' (observers: most_recent, max_window)"


def test_a_missing_artifact_of_a_trained_run_is_an_error():
    with pytest.raises(ValueError, match=r"run 'bf16-lrhigh' has no evaluation \('bf16/bf16-lrhigh/pretrain'"):
        claim_rows(4)["forgets_bf16"](SPECS["forgets_bf16"], artifacts(), SETTINGS)


# --- accuracy rows: paired bootstrap over examples ------------------------------------------------------------


def flipped(reference, lose, gain, seed=0):
    """``reference`` with ``lose`` correct answers made wrong and ``gain`` wrong ones made right (random ones)."""
    rng = np.random.default_rng(seed)
    out = np.array(reference)
    right, wrong = np.flatnonzero(out == 1), np.flatnonzero(out == 0)
    out[rng.choice(right, lose, replace=False)] = 0
    out[rng.choice(wrong, gain, replace=False)] = 1
    return out.tolist()


def planted_accuracies(threshold, outcome, examples=1024):
    """``(treated, reference)`` correctness: the reference answers half, the treated model loses about 12% of
    them more than the threshold (``up``), gains 60 (``down``), or is at the threshold with 30 flips each way."""
    reference = np.random.default_rng(1).permutation(correct_list(0.5, examples)).tolist()
    at = round(threshold * examples / 2)
    lose, gain = {"up": (at + 60, 0), "down": (0, 60), "straddle": (at + 30, 30)}[outcome]
    return flipped(reference, lose, gain), reference


def accuracy_record(task, correct):
    field = "example_correct" if task == "cloze" else "example_correct_norm"
    return {"metrics": {task: {field: correct}}}


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", ACCURACY_ROWS)
def test_accuracy_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    treated, reference, task = ACCURACY_ROWS[claim_id]
    a, b = planted_accuracies(spec.prediction.threshold, outcome)
    study = artifacts(evaluations=with_regime(claim_id, {f"{treated}/pretrain": accuracy_record(task, a),
                                                         f"{reference}/pretrain": accuracy_record(task, b)}))
    claim = claim_rows(4)[claim_id](spec, study, SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(1 - sum(a) / sum(b), rel=1e-12)
    assert claim.estimate.method.startswith("paired bootstrap over 1024 examples (1000 resamples, seed 0")
    assert claim.evidence == regime_evidence(claim_id, (f"eval:{treated}/pretrain", f"eval:{reference}/pretrain"))
    metric = "acc" if task == "cloze" else "acc_norm"
    precision = {"hif8": "HiF8", "bf16": "BF16"}[treated.split("/")[0]]
    assert comparison(claim) == (f"{task} {metric}: {sum(a)} of 1024 examples for {treated.split('/')[1]} "
                                 f"({precision}) vs 512 of 1024 for {reference.split('/')[1]} (BF16)")


def test_accuracy_drop_of_a_reference_that_answers_almost_nothing_is_not_testable():
    reference = [1] + [0] * 63  # one correct answer: about a third of the resamples miss it
    claim = claim_rows(4)["recipe_cloze_acc"](SPECS["recipe_cloze_acc"], artifacts(evaluations={
        f"hif8/{RECIPE}/pretrain": accuracy_record("cloze", [0] * 64),
        "bf16/bf16-lrlow/pretrain": accuracy_record("cloze", reference)}), SETTINGS)
    assert claim.verdict == "not testable at this scale"
    assert claim.reason.startswith("the reference answers 1 of 64 examples correctly and some bootstrap resamples")
    assert claim.evidence == (f"eval:hif8/{RECIPE}/pretrain", "eval:bf16/bf16-lrlow/pretrain")


def test_accuracy_rows_need_per_example_scores():
    study = artifacts(evaluations={f"hif8/{RECIPE}/pretrain": {"metrics": {"perplexity": {}}},
                                   "bf16/bf16-lrlow/pretrain": accuracy_record("cloze", [1, 0])})
    with pytest.raises(ValueError, match=rf"evaluation of '{RECIPE} \(HiF8\)' has no cloze example_correct "
                                         r"\(metric groups: perplexity\)"):
        claim_rows(4)["recipe_cloze_acc"](SPECS["recipe_cloze_acc"], study, SETTINGS)


def test_accuracy_drop_needs_the_same_examples():
    with pytest.raises(ValueError, match=r"accuracies on different examples: \(3,\) vs \(4,\)"):
        accuracy_drop([1, 0, 1], [1, 0, 1, 1], SETTINGS)


# --- training-loss APE: circular block bootstrap over steps ---------------------------------------------------


def planted_losses(threshold, outcome, max_steps=65, warmup=4, seed=2):
    """``(run, reference)`` losses ``{step: loss}``: from the warmup step on the relative gap is five times the
    threshold (``up``), a fifth of it (``down``), each with 10% noise, or the threshold with 30% noise
    (``straddle``); before the warmup it is 0.25, which an APE that counted those steps would show."""
    rng = np.random.default_rng(seed)
    steps = max_steps - warmup
    scale, noise = {"up": (5.0, 0.1), "down": (0.2, 0.1), "straddle": (1.0, 0.3)}[outcome]
    gaps = threshold * scale * (1 + noise * standardized(rng, steps))
    assert (gaps > 0).all()
    reference = {t: 4.0 - t / 64 for t in range(max_steps)}
    run = {t: reference[t] * (1.25 if t < warmup else 1 + gaps[t - warmup] * (-1) ** t) for t in range(max_steps)}
    return run, reference, gaps


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", APE_ROWS)
def test_loss_ape_rows(claim_id, outcome):
    spec = SPECS[claim_id]
    run, reference = APE_ROWS[claim_id]
    losses, base, gaps = planted_losses(spec.prediction.threshold, outcome)
    claim = claim_rows(4)[claim_id](spec, artifacts(losses={run: losses, reference: base}), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(gaps.mean(), rel=1e-9)  # steps 4..64, the warmup excluded
    assert claim.estimate.method == (
        "circular block bootstrap over 61 consecutive training steps (blocks of 4 = ceil(n^(1/3)) training steps, "
        "1000 resamples, seed 0, percentile); one training seed per run: variation along its trajectory, not "
        "seed-to-seed variation")
    assert claim.evidence == (f"log:{run}", f"log:{reference}")
    assert claim.detail.startswith(f"training loss of {run} vs {reference} at steps 4..64: final ")


# --- saturation rows: circular block bootstrap over steps -----------------------------------------------------


def exact_saturation(config, run, rates, seed=0):
    """Telemetry of ``run`` where exactly ``rate`` of each role's layer-steps with a delayed scale saturate (random
    ones); ``rates``: role -> rate."""
    rng = np.random.default_rng(seed)
    rows = telemetry_rows(config, run, lambda *_: False)
    for role, rate in rates.items():
        mine = [r for r in rows if r["role"] == role and not r["cold_start"]]
        for index in rng.choice(len(mine), round(rate * len(mine)), replace=False):
            mine[index]["overflow"] = True
    return rows


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_most_recent_saturates(outcome):
    spec = SPECS["most_recent_saturates"]
    rate = {"up": 0.3, "down": 0.0, "straddle": spec.prediction.threshold}[outcome]
    config = grid()
    rows = exact_saturation(config, MOST_RECENT, dict.fromkeys(ROLES, rate))
    claim = claim_rows(4)["most_recent_saturates"](spec, artifacts(config, telemetry={MOST_RECENT: rows}), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    calls = 60 * LAYERS * len(ROLES)  # steps 5..64 (step 4 is the cold start)
    assert claim.estimate.value == pytest.approx(round(rate * calls / 3) * 3 / calls)
    assert claim.detail == (f"{MOST_RECENT}: {round(rate * calls)} of {calls} layer-steps saturate (steps 5..64, "
                            "roles input, weight, grad_output)")
    assert claim.estimate.method.startswith("circular block bootstrap over 60 consecutive HiF8 steps (blocks of 4")
    assert claim.evidence == (f"telemetry:{MOST_RECENT}",)


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("claim_id", DIFFERENCE_ROWS)
def test_max_window_saturates_less(claim_id, outcome):
    spec, role = SPECS[claim_id], DIFFERENCE_ROWS[claim_id]
    max_window, most_recent = {"up": (0.4, 0.05), "down": (0.05, 0.4), "straddle": (0.2, 0.2)}[outcome]
    others = [r for r in ROLES if r != role]  # the other roles saturate the other way round: not counted
    config = grid()
    telemetry = {
        RECIPE: exact_saturation(config, RECIPE, {role: max_window, **dict.fromkeys(others, most_recent)}, seed=1),
        MOST_RECENT: exact_saturation(config, MOST_RECENT, {role: most_recent, **dict.fromkeys(others, max_window)},
                                      seed=2)}
    claim = claim_rows(4)[claim_id](spec, artifacts(config, telemetry=telemetry), SETTINGS)
    assert claim.verdict == expected(spec.prediction.direction, outcome)
    assert claim.estimate.value == pytest.approx(max_window - most_recent)
    assert claim.detail == (f"saturating {role} layer-steps: {round(max_window * 360)} of 360 for {RECIPE} vs "
                            f"{round(most_recent * 360)} of 360 for {MOST_RECENT}")
    assert claim.evidence == (f"telemetry:{RECIPE}", f"telemetry:{MOST_RECENT}")


def test_saturation_difference_needs_the_same_steps():
    config = grid()
    shorter = [r for r in exact_saturation(config, MOST_RECENT, {}) if r["step"] < 64]
    study = artifacts(config, telemetry={RECIPE: exact_saturation(config, RECIPE, {}), MOST_RECENT: shorter})
    spec = SPECS["max_window_saturates_less_input"]
    with pytest.raises(ValueError, match="saturation counted on different steps"):
        claim_rows(4)[spec.id](spec, study, SETTINGS)


def test_step_counts_skip_cold_starts_and_other_roles():
    rows = telemetry_rows(grid(8), RECIPE, lambda step, layer, role: role == "weight" or step == 4)
    counts = step_counts(rows, ["input"])
    assert counts.steps.tolist() == [5, 6, 7]
    assert counts.calls.tolist() == [LAYERS] * 3
    assert counts.saturating.tolist() == [0, 0, 0]
    assert step_counts(rows).saturating.tolist() == [LAYERS] * 3  # the weight role
    with pytest.raises(ValueError, match="no telemetry row of roles"):
        step_counts([r for r in rows if r["cold_start"]])


# --- the whole table ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return study_artifacts(build_study(tmp_path_factory.mktemp("paper"), **PAPER_LIKE))


def test_study_claims_in_the_report_order(paper):
    # the config reaches the step as key-sorted JSON: the order is the code's, and the config lists the same
    assert list(claim_rows(4)) == list(SPECS)
    shuffled = dict(sorted(SPECS.items()))
    claims = study_claims(shuffled, paper, SETTINGS)
    assert [c.id for c in claims] == list(SPECS)
    assert all(c.estimate is not None for c in claims)  # the default observers: every run is there
    by_id = {c.id: c for c in claims}
    # planted without noise: forgetting +25% (20 vs 16), the recipe's drop 2^-9 = 0.195%, its APE 2^-8 = 0.39%
    assert by_id["forgets_bf16"].estimate.value == pytest.approx(0.25)
    assert by_id["forgets_bf16"].verdict == "reproduced"
    assert by_id["recipe_pretrain_perplexity"].estimate.value == pytest.approx(2**-9)
    assert by_id["recipe_pretrain_perplexity"].verdict == "reproduced"
    assert by_id["recipe_loss_ape"].estimate.value == pytest.approx(2**-8)
    assert by_id["recipe_loss_ape"].verdict == "contradicted"  # above the paper's 0.11%
    # the regime the forgetting rows rest on, no row of its own: bf16-lrlow 16 vs the base model 13
    assert f"P_low / P_base - 1 = {16 / 13 - 1:+.1%} " in by_id["forgets_bf16"].detail
    document = claims_document(claims, study_checks(paper, observer_cell(smoke_config()), "cell.json"))
    assert sum(document["counts"].values()) == 17
    assert [Claim.from_dict(row) for row in document["claims"]] == claims


def test_study_claims_refuses_specs_that_do_not_match(paper):
    extra = claim_specs({**raw_config()["claims"], "new_claim": raw_config()["claims"]["forgets_bf16"]})
    with pytest.raises(ValueError, match=r"no computation for \['new_claim'\], no spec for nothing"):
        study_claims(extra, paper, SETTINGS)
    fewer = {k: v for k, v in SPECS.items() if k != "forgets_bf16"}
    with pytest.raises(ValueError, match=r"no computation for nothing, no spec for \['forgets_bf16'\]"):
        study_claims(fewer, paper, SETTINGS)


# --- implementation checks ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cell():
    return observer_cell(smoke_config())


def test_every_check_holds_on_the_paper_like_study(paper, cell):
    checks = study_checks(paper, cell, "cell.json")
    assert [c.id for c in checks] == [
        "synthetic_most_recent_every_spike", "synthetic_max_window_no_recurring_saturation",
        "synthetic_current_never_saturates", "telemetry_accounts_most_recent_lrlow_w4",
        "telemetry_accounts_max_window_lrlow_w4", "same_windows_pretrain", "same_windows_shift",
        "same_examples_cloze", "same_examples_choice", "unit_scores_make_the_metrics"]
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert checks[0].measured == "10 of 10 spikes"
    assert checks[1].measured == "0 of 9 spikes after the first"
    assert checks[3].measured == ("144 rows = 6 layers x 3 roles x steps 4..11 (expected 4..11); cold starts at "
                                  "steps [4]; saturation.json agrees")


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


def test_telemetry_check_accounts_for_every_layer_role_and_step():
    rows = telemetry_rows(grid(12), RECIPE, lambda step, layer, role: step % 2 == 0)
    check = telemetry_check(RECIPE, *telemetry_artifacts(rows), 4, 12)
    assert check.passed
    assert check.id == "telemetry_accounts_max_window_lrlow_w4"
    assert check.measured == ("144 rows = 6 layers x 3 roles x steps 4..11 (expected 4..11); cold starts at steps "
                              "[4]; saturation.json agrees")
    assert check.evidence == ("t.csv", "s.json")


@pytest.mark.parametrize("damage", ["missing row", "duplicate row", "late cold start", "summary", "last step"])
def test_telemetry_check_fails_on_damaged_telemetry(damage):
    rows = telemetry_rows(grid(12), RECIPE, lambda step, layer, role: step % 2 == 0)
    saturation = saturation_summary(rows)
    if damage == "missing row":
        rows = rows[:-1]
        saturation = saturation_summary(rows)
    elif damage == "duplicate row":
        rows = [*rows, rows[-1]]
        saturation = saturation_summary(rows)
    elif damage == "late cold start":
        rows[-1] = {**rows[-1], "cold_start": True}
        saturation = saturation_summary(rows)
    elif damage == "summary":
        saturation = {**saturation, "input": {**saturation["input"], "calls": 1}}
    else:
        rows = [r for r in rows if r["step"] < 11]
        saturation = saturation_summary(rows)
    assert not telemetry_check(RECIPE, *telemetry_artifacts(rows, saturation), 4, 12).passed


def test_pairing_checks_fail_on_other_windows_or_examples(paper):
    evaluations = dict(paper.evaluations)
    assert all(c.passed for c in pairing_checks(evaluations))
    record = copy.deepcopy(evaluations[f"hif8/{RECIPE}/pretrain"].data)
    record["metrics"]["perplexity"]["window_tokens"][0] = 63
    record["metrics"]["cloze"]["example_correct"].append(1)
    evaluations[f"hif8/{RECIPE}/pretrain"] = Artifact("bad.json", record)
    checks = {c.id: c for c in pairing_checks(evaluations)}
    assert not checks["same_windows_pretrain"].passed
    assert checks["same_windows_pretrain"].measured == "21 records, 2 distinct window lists (64 windows, 64 windows)"
    assert checks["same_windows_shift"].passed
    assert not checks["same_examples_cloze"].passed
    assert checks["same_examples_cloze"].measured == "21 records, example counts [1024, 1025]"
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
    checks = study_checks(paper, broken, "cell.json")
    with pytest.raises(ImplementationCheckFailed, match="synthetic_max_window_no_recurring_saturation"):
        claims_document(study_claims(SPECS, paper, SETTINGS), checks)


# --- the claims step ------------------------------------------------------------------------------------------


def write_inputs(directory, cell):
    """Every input of ``python -m papers.maxwindow_hif8 claims`` for the paper-like study under ``directory``."""
    study = build_study(directory / "runs", **PAPER_LIKE)
    config = study["config"]
    evaluations = []
    for key, record in study["evaluations"].items():
        path = directory / "eval" / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
        evaluations.append(str(path))
    telemetry = [write_telemetry(directory / "runs" / run, telemetry_rows(config, run, lambda s, i, r: i == s % 6))
                 for run in telemetry_runs(config)]
    (directory / "observer_study.json").write_text(json.dumps(cell))
    grid_keys = ("observers", "observer_options", "learning_rates", "bf16_warmup_steps", "train", "claims")
    return ["claims", "--config-json", json.dumps({k: config[k] for k in grid_keys}, sort_keys=True),  # json_arg
            "--evidence-json", json.dumps({"level": 0.95, "resamples": 1000, "seed": 0}),
            "--evaluations", *evaluations, "--logs", *study["logs"].values(), "--telemetry", *telemetry,
            "--observer-study", str(directory / "observer_study.json"), "--out", str(directory / "claims.json")]


def test_claims_step_writes_the_document(tmp_path, cell):
    assert main(write_inputs(tmp_path, cell)) == 0
    document = json.loads((tmp_path / "claims.json").read_text())
    assert set(document) == {"rule", "claims", "checks", "counts"}
    assert [c["id"] for c in document["claims"]] == list(SPECS)
    assert all(c["passed"] for c in document["checks"])
    assert sum(document["counts"].values()) == 17
    recipe = next(c for c in document["claims"] if c["id"] == "recipe_pretrain_perplexity")
    assert recipe["evidence"] == [str(tmp_path / f"eval/hif8/{RECIPE}/pretrain.json"),
                                  str(tmp_path / "eval/bf16/bf16-lrlow/pretrain.json")]
    saturating = next(c for c in document["claims"] if c["id"] == "most_recent_saturates")
    # layer i saturates at the steps s with s % 6 == i: one layer in six, every role, steps 5..11
    assert saturating["estimate"]["value"] == pytest.approx(1 / 6)
    assert saturating["evidence"] == [str(tmp_path / f"runs/{MOST_RECENT}/telemetry.csv")]


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
