"""The claims table as evidence: every claim function on planted data where it is reproduced, contradicted and
inconclusive (the verdict follows the data both ways), with seeds paired by seed; a row whose runs have one seed or
whose setting is outside the study is not testable with its reason; the table's ids against the config; the
implementation checks; the claims step's document."""

import dataclasses
import json
import math

import numpy as np
import pytest
import yaml
from winq_testing import (
    CONFIG,
    GRAD_NORMS,
    MECHANISM,
    PLANTED,
    STAGNATION,
    WINDOW_TOKENS,
    WINDOWS,
    build_study,
    hessian_cell,
    planted_card,
    quantization_config,
    save_planted_model,
    scored_evaluation,
    smoke_config,
)

from common.report import ClaimSpec, ImplementationCheckFailed, Prediction, claim_specs, claims_document
from common.uncertainty import Evidence
from papers.winq import claims as wc
from papers.winq.__main__ import main
from papers.winq.settings import run_settings, training_cells
from papers.winq.study import study_summary

EVIDENCE = Evidence(level=0.95, resamples=1000, seed=0)
SPECS = claim_specs(yaml.safe_load(CONFIG.read_text())["winq"]["claims"])
SETTINGS = list(yaml.safe_load(CONFIG.read_text())["winq"]["settings"])
EXAMPLES = 64
Z = np.array([(-1.0) ** w for w in range(WINDOWS)])  # a zero-sum pattern of window difficulty
SEEDS = (0, 1)
SEED_INTERVAL = "t-interval over 2 seeds (paired by seed), widened by the evaluation sampling the seeds share"


def windows(ppl, spread=0.0, pattern=Z):
    """Per-window NLL sums of a model of perplexity ``ppl`` whose log-perplexity varies by ``spread * pattern``
    from window to window (exactly ``ppl`` over the split)."""
    return WINDOW_TOKENS * (math.log(ppl) + spread * pattern)


def record(cell, ppl, spread=0.0, pattern=Z, cloze=None, choice=None):
    cloze = np.arange(EXAMPLES) < EXAMPLES // 2 if cloze is None else cloze
    choice = np.arange(EXAMPLES) < EXAMPLES // 4 if choice is None else choice
    return scored_evaluation(cell, windows(ppl, spread, pattern), cloze, choice)


def make_study(tmp_path, *, evaluations=None, hessians=None, config=None, **planted):
    """The planted smoke study (``winq_testing.build_study``, ``planted``: its ``planted`` / ``grad_norms`` /
    ``mechanism`` / ``stagnation``) with ``evaluations`` (cell -> record) and ``hessians`` (cell -> Hessian cell)
    replacing the planted ones."""
    config, curves, logs, records, cells, qat, seconds, bits, mechanism, stagnation = build_study(
        tmp_path, config, **planted)
    records.update(evaluations or {})
    cells.update(hessians or {})
    summary = study_summary(config, curves, logs, records, cells, qat, seconds, bits, mechanism, stagnation)
    names = training_cells(config)
    return wc.Study(summary=summary, evaluations={c: records[c] for c in names},
                    quantized={c: quantization_config(run_settings(config, c.split("/")[0])["bits"]) for c in names},
                    summary_path="results/winq/summary.json",
                    evaluation_paths={c: f"results/winq/eval/{c}.json" for c in names}, configured_settings=SETTINGS)


def spec(cid, direction=None, threshold=None):
    """The config's spec ``cid``, its prediction's direction or threshold changed when given."""
    base = SPECS[cid]
    p = base.prediction
    prediction = Prediction(p.statistic, direction or p.direction, p.threshold if threshold is None else threshold,
                            p.source)
    return ClaimSpec(base.id, base.group, base.statement, base.paper, prediction)


def per_seed(run, values, spread=0.3):
    """``{<run>/seed<k>: record of perplexity values[k]}``."""
    return {f"{run}/seed{k}": record(f"{run}/seed{k}", v, spread) for k, v in zip(SEEDS, values, strict=True)}


# ---------------------------------------------------------------------------- perplexity at equal budget
@pytest.mark.parametrize(("winq", "verdict"), [
    ((92.0, 92.0), "reproduced"),  # 8% lower in every window and seed: the shared window difficulty pairs out
    ((108.0, 108.0), "contradicted"),
    ((92.0, 106.0), "inconclusive"),  # better on one seed, worse on the other
])
def test_lower_perplexity(tmp_path, winq, verdict):
    study = make_study(tmp_path, evaluations={**per_seed("w1-baseline", (100.0, 100.0)),
                                              **per_seed("w1-winq", winq)})
    claim = wc.lower_perplexity(SPECS["winq_lower_perplexity_w1"], study, EVIDENCE, "w1")
    assert claim.verdict == verdict
    assert claim.estimate.value == pytest.approx(np.mean([100 - w for w in winq]))
    assert claim.estimate.low <= claim.estimate.value <= claim.estimate.high
    assert claim.estimate.method.startswith(SEED_INTERVAL)
    assert f"paired bootstrap over {WINDOWS} test windows" in claim.estimate.method
    assert claim.detail.startswith(f"W1A16: test perplexity 100.00 (baseline) -> {np.mean(winq):.2f} (winq), mean "
                                   "over seeds 0, 1; per seed 0: ")
    assert claim.evidence == tuple(f"results/winq/eval/{r}/seed{k}.json" for k in SEEDS
                                   for r in ("w1-winq", "w1-baseline"))


def test_the_window_sampling_widens_the_seed_interval(tmp_path):
    """Two seeds that agree exactly: the interval is the evaluation sampling alone, paired (narrow) or not."""
    paired, unpaired = (
        wc.lower_perplexity(SPECS["winq_lower_perplexity_w1"], make_study(
            tmp_path / name, evaluations={
                **per_seed("w1-baseline", (100.0, 100.0)),
                **{f"w1-winq/seed{k}": record(f"w1-winq/seed{k}", 99.0, 0.3, pattern) for k in SEEDS}}),
            EVIDENCE, "w1").estimate for name, pattern in (("paired", Z), ("reversed", -Z)))
    assert paired.high - paired.low < 1e-6 < 10 < unpaired.high - unpaired.low
    assert paired.value == pytest.approx(unpaired.value)


@pytest.mark.parametrize(("winq", "verdict"), [
    ((100.0, 100.0), "reproduced"),  # the paper's W3A16 tie: |improvement| < 0.92%
    ((95.0, 95.0), "contradicted"),  # 5% better: outside the margin
    ((99.0, 101.5), "inconclusive"),
])
def test_lower_perplexity_within_the_papers_tie(tmp_path, winq, verdict):
    study = make_study(tmp_path, evaluations={**per_seed("w1-baseline", (100.0, 100.0)),
                                              **per_seed("w1-winq", winq)})
    claim = wc.lower_perplexity(SPECS["winq_lower_perplexity_w3"], study, EVIDENCE, "w1")
    assert SPECS["winq_lower_perplexity_w3"].prediction.direction == "within"
    assert claim.verdict == verdict


def test_one_seed_has_the_window_interval_alone(tmp_path):
    config = {**smoke_config(), "seeds": [0]}
    planted = {"w1-baseline/seed0": record("w1-baseline/seed0", 100.0, 0.3),
               "w1-winq/seed0": record("w1-winq/seed0", 92.0, 0.3)}
    study = make_study(tmp_path, config=config, evaluations=planted)
    claim = wc.lower_perplexity(SPECS["winq_lower_perplexity_w1"], study, EVIDENCE, "w1")
    assert claim.verdict == "reproduced"
    assert claim.estimate.method.endswith("1 seed: no seed-to-seed variation")


# ------------------------------------------------------------------------------------------ the ablation, pooled
ABLATION = {"interpolation_alone_improves": ("interpolation", "baseline"),
            "noise_alone_improves": ("noise", "baseline"),
            "winq_beats_interpolation": ("winq", "interpolation"),
            "winq_beats_noise": ("winq", "noise"),
            "interpolation_beats_noise": ("interpolation", "noise")}


@pytest.mark.parametrize("cid", list(ABLATION))
@pytest.mark.parametrize(("values", "verdict"), [
    ((95.0, 95.5), "reproduced"),  # 5% and 4.5% better (2 seeds: t_0.975,1 = 12.7 x the se of the mean)
    ((105.0, 104.5), "contradicted"),
    ((90.0, 110.0), "inconclusive"),  # better on one seed, worse on the other
])
def test_pooled_ablation(tmp_path, cid, values, verdict):
    model, reference = ABLATION[cid]  # the smoke study compares every method at W1 only
    planted = {**per_seed(f"w1-{reference}", (100.0, 100.0)), **per_seed(f"w1-{model}", values)}
    row = wc.POOLED_ROWS[cid](SPECS[cid], make_study(tmp_path, evaluations=planted), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean([100 - v for v in values]), abs=1e-9)
    assert row.detail.startswith(f"W1A16: test perplexity 100.00 ({reference}) -> {np.mean(values):.2f} ({model})")
    assert "W2A16" not in row.detail
    assert len(row.evidence) == 4


def test_winq_pooled_over_both_settings(tmp_path):
    planted = {}
    for setting, ppl in (("w1", 90.0), ("w2", 96.0)):
        planted |= {**per_seed(f"{setting}-baseline", (100.0, 100.0)), **per_seed(f"{setting}-winq", (ppl, ppl))}
    row = wc.POOLED_ROWS["winq_lower_perplexity_pooled"](SPECS["winq_lower_perplexity_pooled"],
                                                         make_study(tmp_path, evaluations=planted), EVIDENCE)
    assert row.verdict == "reproduced"
    assert row.estimate.value == pytest.approx(7.0)
    assert "; W2A16: test perplexity 100.00 (baseline) -> 96.00 (winq)" in row.detail


def test_a_method_no_pooled_setting_compares_is_not_testable(tmp_path):
    config = {**smoke_config(), "compared": {"w1": ["baseline", "winq"], "w2": ["baseline", "winq"]}}
    config["hessian"] = {**config["hessian"], "methods": ["baseline"]}
    study = make_study(tmp_path, config=config)
    row = wc.POOLED_ROWS["noise_alone_improves"](SPECS["noise_alone_improves"], study, EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert row.reason == "no pooled setting (w1, w2) compares noise and baseline on the seeds"
    assert row.estimate is None


# --------------------------------------------------------------------------------------------------- zero-shot
def correct(first, last):
    return (np.arange(EXAMPLES) >= first) & (np.arange(EXAMPLES) < last)


@pytest.mark.parametrize("task", ["cloze", "choice"])
@pytest.mark.parametrize(("winq", "verdict", "value"), [
    ((correct(0, 32),) * 3, "reproduced", 25.0),  # every baseline hit and 16 more
    ((correct(0, 0),) * 3, "contradicted", -25.0),
    ((correct(0, 32), correct(0, 0), correct(0, 16)), "inconclusive", 0.0),  # the seeds disagree
])
def test_zero_shot(tmp_path, task, winq, verdict, value):
    """Three seeds: the examples' sampling, shared by the seeds, is widened by t_0.975,2 = 4.3."""
    baseline = correct(0, 16)
    planted = {}
    for setting in ("w1", "w2"):
        for k in range(3):
            for run, hits in ((f"{setting}-baseline", baseline), (f"{setting}-winq", winq[k])):
                planted[f"{run}/seed{k}"] = record(f"{run}/seed{k}", 100.0, **{task: hits})
    study = make_study(tmp_path, evaluations=planted, config={**smoke_config(), "seeds": [0, 1, 2]})
    row = wc.zero_shot(SPECS[f"winq_zero_shot_{task}"], study, EVIDENCE, task=task)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(value)
    assert f"paired bootstrap over {EXAMPLES} {task} examples" in row.estimate.method
    label = {"cloze": "acc", "choice": "acc_norm"}[task]
    assert row.detail.startswith(f"W1A16: {task} {label} 0.250 (baseline) -> ")


# ------------------------------------------------------------------------------------------------- the speedup
@pytest.mark.parametrize(("curves", "verdict", "value"), [
    # WinQ at or below the baseline's 90 after 4 steps on both seeds: 3x
    ({0: [100.0, 90.0, 85.0, 84.0, 81.0, 80.0], 1: [100.0, 90.0, 85.0, 84.0, 81.0, 80.0]}, "reproduced", 3.0),
    # only at the last step: 1x
    ({0: [130.0, 120.0, 100.0, 95.0, 91.0, 90.0], 1: [130.0, 120.0, 100.0, 95.0, 91.0, 90.0]}, "contradicted", 1.0),
    ({0: [100.0, 90.0, 85.0, 84.0, 81.0, 80.0], 1: [130.0, 120.0, 100.0, 95.0, 91.0, 90.0]}, "inconclusive", 2.0),
])
def test_speedup(tmp_path, curves, verdict, value):
    planted = {**PLANTED, "winq": {k: (c, 92.0) for k, c in curves.items()}}
    study = make_study(tmp_path, planted=planted)
    row = wc.speedup(SPECS["winq_faster_w1"], study, EVIDENCE, "w1")
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(value)
    assert row.estimate.method == "t-interval over 2 seeds"
    assert row.detail.startswith("W1A16: the baseline reaches its final validation perplexity after 12, 12 steps "
                                 "(seeds 0, 1); WinQ's speedup per seed 0: ")
    assert row.detail.endswith("resolution: evaluated every 2 steps, so the speedups next to 1.5x are 1.500x and "
                               "2.000x (33.3% apart)")


def test_a_speedup_never_reached_counts_after_the_run(tmp_path):
    planted = {**PLANTED, "winq": PLANTED["noise"]}  # never at or below 90
    row = wc.speedup(SPECS["winq_faster_w1"], make_study(tmp_path, planted=planted), EVIDENCE, "w1")
    assert row.estimate.value == pytest.approx(12 / 14)
    assert "(never reached by seeds 0, 1: counted at step 14)" in row.detail
    assert row.verdict == "contradicted"


def test_one_seed_leaves_a_trajectory_row_not_testable(tmp_path):
    study = make_study(tmp_path, config={**smoke_config(), "seeds": [0]})
    row = wc.speedup(SPECS["winq_faster_w1"], study, EVIDENCE, "w1")
    assert row.verdict == "not testable at this scale"
    assert row.reason == wc.ONE_SEED
    assert row.detail.startswith("W1A16: the baseline reaches")
    row = wc.FIXED_ROWS["baseline_stagnates_grad_norm"](SPECS["baseline_stagnates_grad_norm"], study, EVIDENCE)
    assert row.reason == wc.ONE_SEED


def test_speedup_resolution():
    assert wc.speedup_resolution(960, 24, 1.5) == ("resolution: evaluated every 24 steps, so the speedups next to 1.5x "
                                                   "are 1.481x and 1.538x (3.8% apart)")


# ------------------------------------------------------------------------------------------ training dynamics
def decaying(last):
    """12 steps of gradient norm: 1 (first quarter), 0.8 (second), 0.5, ``last`` (last quarter)."""
    return [1.0] * 3 + [0.8] * 3 + [0.5] * 3 + [last] * 3


@pytest.mark.parametrize(("last", "verdict"), [
    ((0.2, 0.2), "reproduced"),  # a quarter of the second quarter's norm on both seeds (the paper: toward zero)
    ((1.6, 1.6), "contradicted"),  # rising
    ((0.2, 0.8), "inconclusive"),
])
def test_baseline_stagnates_grad_norm(tmp_path, last, verdict):
    norms = {**GRAD_NORMS, "baseline": {k: decaying(v) for k, v in zip(SEEDS, last, strict=True)}}
    row = wc.FIXED_ROWS["baseline_stagnates_grad_norm"](SPECS["baseline_stagnates_grad_norm"],
                                                        make_study(tmp_path, grad_norms=norms), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean(last) / 0.8)
    assert row.estimate.method == "t-interval over 2 seeds"
    assert row.detail.startswith("W1A16: gradient norm last / second quarter per seed 0: ")
    assert "; W2A16: " in row.detail


def curve(half):
    """Validation perplexity 200 -> 150 (step 2) -> ``half`` (step 6) -> 100 (step 12)."""
    return [200.0, 150.0, half, (half + 100.0) / 2, 100.5, 100.0]


@pytest.mark.parametrize(("half", "verdict"), [
    ((102.0, 102.0), "reproduced"),  # ln(1.02) / ln(2) = 2.9% of the gain in the last half
    ((150.0, 150.0), "contradicted"),  # 58%
    ((102.0, 150.0), "inconclusive"),
])
def test_baseline_stagnates_perplexity(tmp_path, half, verdict):
    planted = {**PLANTED, "baseline": {k: (curve(h), 100.0) for k, h in zip(SEEDS, half, strict=True)}}
    row = wc.FIXED_ROWS["baseline_stagnates_perplexity"](SPECS["baseline_stagnates_perplexity"],
                                                         make_study(tmp_path, planted=planted), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean([100 * math.log(h / 100) / math.log(2) for h in half]))


@pytest.mark.parametrize(("factor", "verdict"), [
    ((1.5, 1.5), "reproduced"),
    ((0.5, 0.5), "contradicted"),
    ((1.5, 0.6), "inconclusive"),
])
def test_noise_larger_grad_norm(tmp_path, factor, verdict):
    norms = {**GRAD_NORMS, "noise": {k: [f * g for g in GRAD_NORMS["baseline"]] for k, f in
                                     zip(SEEDS, factor, strict=True)}}
    row = wc.FIXED_ROWS["noise_larger_grad_norm"](SPECS["noise_larger_grad_norm"],
                                                  make_study(tmp_path, grad_norms=norms), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean(np.log(factor)))
    assert "W2A16" not in row.detail  # W2 does not compare noise in the smoke study


def relative_curve(ratio):
    """The relative gradient norm after 2, 4, ..., 12 steps: 0.8 in the second quarter (after 4 and 6 steps),
    ``0.8 ratio`` in the last (after 10 and 12)."""
    return [1.0, 0.8, 0.8, 0.5, 0.8 * ratio, 0.8 * ratio]


@pytest.mark.parametrize(("ratio", "verdict"), [
    ((0.25, 0.25), "reproduced"),  # a quarter of the second quarter's value on both seeds
    ((1.2, 1.2), "contradicted"),  # rising
    ((0.25, 0.75), "inconclusive"),
])
def test_baseline_stagnates_relative_grad_norm(tmp_path, ratio, verdict):
    stagnation = {**dict.fromkeys(PLANTED, STAGNATION),
                  "baseline": {k: relative_curve(r) for k, r in zip(SEEDS, ratio, strict=True)}}
    cid = "baseline_stagnates_relative_grad_norm"
    row = wc.FIXED_ROWS[cid](SPECS[cid], make_study(tmp_path, stagnation=stagnation), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean(ratio))  # the mean over W1 and W2 of the same values
    assert row.estimate.method == "t-interval over 2 seeds"
    what = "relative gradient norm ||grad_W L|| / ||W|| last / second quarter"
    assert row.detail == (f"W1A16: {what} per seed 0: {ratio[0]:.3g}, 1: {ratio[1]:.3g}; "
                          f"W2A16: {what} per seed 0: {ratio[0]:.3g}, 1: {ratio[1]:.3g}")
    assert row.evidence == ("results/winq/summary.json",)


def test_the_relative_grad_norm_needs_both_quarters(tmp_path):
    stagnation = {**dict.fromkeys(PLANTED, STAGNATION), "baseline": {0: STAGNATION, 1: STAGNATION[-2:]}}
    cid = "baseline_stagnates_relative_grad_norm"
    row = wc.FIXED_ROWS[cid](SPECS[cid], make_study(tmp_path, stagnation=stagnation), EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert row.reason == ("relative gradient norm ||grad_W L|| / ||W|| last / second quarter is undefined for some "
                          f"seed ({wc.NO_STAGNATION})")


def codes(after_first):
    """A planted mechanism (``winq_testing.MECHANISM``'s form) changing 12.5% of the codes in the first period and
    ``after_first`` in each later one, the near-boundary shares of the baseline."""
    return ([0.125] + [after_first] * 3, *MECHANISM["baseline"][1:])


def near(after):
    """A planted mechanism with half the weights near a boundary before each interpolation and ``after`` right
    after it (the last boundary has no next period), the codes of the baseline."""
    return (MECHANISM["baseline"][0], [0.5, 0.5, 0.5, None], [after, after, after, None], *MECHANISM["baseline"][3:])


@pytest.mark.parametrize(("cid", "series", "values", "verdict"), [
    # the baseline changes 12.5% of its codes a period
    ("interpolation_fewer_codes_change", (codes(0.0625), codes(0.0625)), (-6.25, -6.25), "reproduced"),
    ("interpolation_fewer_codes_change", (codes(0.25), codes(0.25)), (12.5, 12.5), "contradicted"),
    ("interpolation_fewer_codes_change", (codes(0.0625), codes(0.25)), (-6.25, 12.5), "inconclusive"),
    # the baseline has half its weights near a boundary at every boundary
    ("interpolation_away_from_boundaries", (near(0.25), near(0.25)), (-25.0, -25.0), "reproduced"),
    ("interpolation_away_from_boundaries", (near(0.75), near(0.75)), (25.0, 25.0), "contradicted"),
    ("interpolation_away_from_boundaries", (near(0.25), near(0.625)), (-25.0, 12.5), "inconclusive"),
])
def test_the_mechanism_vs_the_baseline(tmp_path, cid, series, values, verdict):
    mechanism = {**MECHANISM, "interpolation": dict(zip(SEEDS, series, strict=True))}
    row = wc.FIXED_ROWS[cid](SPECS[cid], make_study(tmp_path, mechanism=mechanism), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean(values))
    assert row.estimate.method == "t-interval over 2 seeds"
    assert row.detail.startswith("W1A16: ")  # W2 does not compare interpolation in the smoke study
    assert row.detail.endswith(f"interpolation - baseline, points per seed 0: {values[0]:.3g}, 1: {values[1]:.3g}")
    assert "W2A16" not in row.detail


@pytest.mark.parametrize("broken", ["none", "other steps"])
def test_the_mechanism_rows_need_records_at_the_baselines_steps(tmp_path, broken):
    """Without the baseline's records, or with records at other boundaries, the rows are not testable."""
    if broken == "none":
        study = make_study(tmp_path, mechanism={m: v for m, v in MECHANISM.items() if m != "baseline"})
    else:
        study = make_study(tmp_path)
        summary = json.loads(json.dumps(study.summary))
        cell = next(c for c in summary["cells"] if c["cell"] == "w1-baseline/seed1")
        cell["mechanism"]["steps"] = [2, 4, 6, 8]
        study = replaced(study, summary=summary)
    for cid in ("interpolation_fewer_codes_change", "interpolation_away_from_boundaries"):
        row = wc.FIXED_ROWS[cid](SPECS[cid], study, EVIDENCE)
        assert row.verdict == "not testable at this scale", cid
        assert row.reason.endswith(f"is undefined for some seed ({wc.NO_MECHANISM})"), cid


# --------------------------------------------------------------------------------------------- Hessian spectra
def cells_of(run, bits, method, per_seed_fields, probes=6):
    """``{<run>/seed<k>: hessian_cell(bits, method, **fields_k)}``."""
    return {f"{run}/seed{k}": hessian_cell(bits, method, probes=probes, **fields)
            for k, fields in zip(SEEDS, per_seed_fields, strict=True)}


def spectra(**runs):
    """Every Hessian cell of the smoke study with 6 probes (the defaults of ``build_study``), ``runs`` replacing
    some: ``w1_baseline=[fields of seed 0, fields of seed 1]``."""
    default = {"baseline": {"near_zero": 0.5, "largest": 1.0}, "interpolation": {"near_zero": 0.3, "largest": 2.0},
               "noise": {"near_zero": 0.5, "largest": 1.0, "negative": 0.6}}
    out = {}
    for setting, bits, methods in (("w1", 1, ("baseline", "interpolation", "noise")), ("w2", 2, ("baseline",))):
        for method in methods:
            fields = runs.get(f"{setting}_{method}")
            if fields is None:
                fields = [default[method] if setting == "w1" else {"near_zero": 0.4, "largest": 2.0}] * 2
            out |= cells_of(f"{setting}-{method}", bits, method, fields)
    return out


@pytest.mark.parametrize(("quantity", "cid"), [("near", "flat_near_zero_w1"),
                                               ("near_relative", "flat_near_zero_relative_w1")])
@pytest.mark.parametrize(("fields", "verdict"), [
    ([{"near_zero": 0.5, "jitter": 0.01}] * 2, "reproduced"),  # 50% near zero (the paper: > 40%)
    ([{"near_zero": 0.3, "jitter": 0.01}] * 2, "contradicted"),
    ([{"near_zero": 0.3}, {"near_zero": 0.5}], "inconclusive"),  # 40% on average, the seeds disagree
])
def test_one_bit_near_zero(tmp_path, quantity, cid, fields, verdict):
    cells = spectra(w1_baseline=[{"largest": 1.0, **f} for f in fields])
    row = wc.FIXED_ROWS[cid](SPECS[cid], make_study(tmp_path, hessians=cells), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(100 * np.mean([f["near_zero"] for f in fields]))
    assert "paired bootstrap over 6 SLQ probes" in row.estimate.method
    assert row.detail.startswith("w1-baseline/seed0: near zero ")
    assert "(|eigenvalue| < 0.001)" in row.detail
    assert "(< 0.0015)" in row.detail


def test_the_absolute_threshold_is_not_the_relative_one(tmp_path):
    """A Ritz value at 2e-3 is near zero at the relative threshold (1% of a largest 10), not at the paper's
    absolute 1e-3."""
    cell = hessian_cell(1, "baseline", near_zero=0.5, largest=10.0, probes=4)
    cell["nodes"] = [[-5.0, 2e-3, 10.0]] * 4  # the middle node: |2e-3| <= 0.01 x 10, but not < 1e-3
    cells = {**spectra(), "w1-baseline/seed0": cell, "w1-baseline/seed1": cell}
    study = make_study(tmp_path, hessians=cells)
    absolute = wc.FIXED_ROWS["flat_near_zero_w1"](SPECS["flat_near_zero_w1"], study, EVIDENCE)
    relative = wc.FIXED_ROWS["flat_near_zero_relative_w1"](SPECS["flat_near_zero_relative_w1"], study, EVIDENCE)
    assert (absolute.estimate.value, relative.estimate.value) == (0.0, pytest.approx(50.0))


@pytest.mark.parametrize(("negative", "verdict"), [
    ((0.5, 0.5), "reproduced"),  # as much negative as positive mass: balanced
    ((0.95, 0.95), "contradicted"),  # 90 points more negative
    ((0.5, 0.95), "inconclusive"),
])
def test_one_bit_balance(tmp_path, negative, verdict):
    cells = spectra(w1_baseline=[{"near_zero": 0.5, "largest": 1.0, "negative": n, "jitter": 0.05}
                                 for n in negative])
    row = wc.FIXED_ROWS["flat_balance_w1"](SPECS["flat_balance_w1"], make_study(tmp_path, hessians=cells), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(np.mean([100 * (2 * n - 1) for n in negative]))


def test_one_bit_rows_need_a_one_bit_spectrum(tmp_path):
    config = {**smoke_config(), "study_settings": ["w2"]}
    row = wc.FIXED_ROWS["flat_near_zero_w1"](SPECS["flat_near_zero_w1"], make_study(tmp_path, config=config),
                                             EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert row.reason == wc.ONE_BIT_REASON


@pytest.mark.parametrize(("statistic", "w1", "w2", "verdict"), [
    # near-zero mass (the paper: rises as bits fall; slope below 0)
    ("near_zero", (0.5, 0.5), (0.3, 0.3), "reproduced"),
    ("near_zero", (0.3, 0.3), (0.5, 0.5), "contradicted"),
    ("near_zero", (0.5, 0.3), (0.4, 0.4), "inconclusive"),
    # the largest |eigenvalue| (the paper: shrinks as bits fall; slope of ln above 0)
    ("largest", (1.0, 1.0), (4.0, 4.0), "reproduced"),
    ("largest", (4.0, 4.0), (1.0, 1.0), "contradicted"),
    ("largest", (1.0, 4.0), (2.0, 2.0), "inconclusive"),
])
def test_bit_trend(tmp_path, statistic, w1, w2, verdict):
    def fields(values):
        return [{"near_zero": v, "largest": 2.0, "jitter": 0.05} if statistic == "near_zero"
                else {"near_zero": 0.3, "largest": v, "jitter": 0.05} for v in values]

    cells = spectra(w1_baseline=fields(w1), w2_baseline=fields(w2))
    cid = f"fewer_bits_{statistic}_trend"
    row = wc.FIXED_ROWS[cid](SPECS[cid], make_study(tmp_path, hessians=cells), EVIDENCE)
    assert row.verdict == verdict
    expected = [100 * (b - a) if statistic == "near_zero" else math.log(b / a) for a, b in zip(w1, w2, strict=True)]
    assert row.estimate.value == pytest.approx(np.mean(expected), abs=0.03)  # the jitter moves the mean largest
    assert row.detail.startswith("w1-baseline/seed0: near zero ")


def test_bit_trend_needs_two_bit_widths(tmp_path):
    config = {**smoke_config(), "study_settings": ["w1"]}
    row = wc.FIXED_ROWS["fewer_bits_largest_trend"](SPECS["fewer_bits_largest_trend"],
                                                    make_study(tmp_path, config=config), EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert row.reason.endswith("with 16-bit activations (w1-baseline)")


@pytest.mark.parametrize(("cid", "fields", "verdict", "value"), [
    ("interpolation_steepens_largest", [{"near_zero": 0.5, "largest": 2.0}] * 2, "reproduced", math.log(2)),
    ("interpolation_steepens_largest", [{"near_zero": 0.5, "largest": 0.5}] * 2, "contradicted", -math.log(2)),
    ("interpolation_steepens_largest", [{"near_zero": 0.5, "largest": 2.0}, {"near_zero": 0.5, "largest": 0.5}],
     "inconclusive", 0.0),
    ("interpolation_steepens_near_zero", [{"near_zero": 0.3, "largest": 1.0}] * 2, "reproduced", -20.0),
    ("interpolation_steepens_near_zero", [{"near_zero": 0.7, "largest": 1.0}] * 2, "contradicted", 20.0),
    ("interpolation_steepens_near_zero", [{"near_zero": 0.3, "largest": 1.0}, {"near_zero": 0.7, "largest": 1.0}],
     "inconclusive", 0.0),
    ("noise_more_negative_mass", [{"near_zero": 0.5, "largest": 1.0, "negative": 0.7}] * 2, "reproduced", 10.0),
    ("noise_more_negative_mass", [{"near_zero": 0.5, "largest": 1.0, "negative": 0.3}] * 2, "contradicted", -10.0),
    ("noise_more_negative_mass", [{"near_zero": 0.5, "largest": 1.0, "negative": 0.7},
                                  {"near_zero": 0.5, "largest": 1.0, "negative": 0.3}], "inconclusive", 0.0),
])
def test_one_component_vs_the_baseline_spectrum(tmp_path, cid, fields, verdict, value):
    method = "noise" if cid.startswith("noise") else "interpolation"
    base = [{"near_zero": 0.5, "largest": 1.0, "jitter": 0.05}] * 2
    cells = spectra(w1_baseline=base, **{f"w1_{method}": [{**f, "jitter": 0.05} for f in fields]})
    row = wc.FIXED_ROWS[cid](SPECS[cid], make_study(tmp_path, hessians=cells), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(value, abs=0.06)
    assert row.evidence == ("results/winq/summary.json",)


def test_spectra_must_pair_by_probe(tmp_path):
    cells = spectra()
    cells["w1-interpolation/seed1"] = {**cells["w1-interpolation/seed1"], "seed": 1}
    with pytest.raises(ValueError, match=r"do not pair by probe: .*w1-interpolation/seed1 \(6 probes, seed 1, 1000 "
                                         r"parameters\)"):
        wc.FIXED_ROWS["interpolation_steepens_largest"](SPECS["interpolation_steepens_largest"],
                                                        make_study(tmp_path, hessians=cells), EVIDENCE)


# ------------------------------------------------------------------------------------------------------- Hadamard
def test_hadamard_is_not_testable_without_a_rotated_setting(tmp_path):
    row = wc.POOLED_ROWS["hadamard_winq_improves"](SPECS["hadamard_winq_improves"], make_study(tmp_path), EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert "input width a power of two" in row.reason


def test_hadamard_compares_the_rotated_setting(tmp_path):
    config = smoke_config()
    config = {**config, "study_settings": ["w1", "w2", "w2h"], "compared": {**config["compared"],
                                                                           "w2h": ["baseline", "winq"]}}
    planted = {**per_seed("w2h-baseline", (100.0, 100.0)), **per_seed("w2h-winq", (95.0, 95.0))}
    row = wc.POOLED_ROWS["hadamard_winq_improves"](SPECS["hadamard_winq_improves"],
                                                   make_study(tmp_path, config=config, evaluations=planted), EVIDENCE)
    assert row.verdict == "reproduced"
    assert row.estimate.value == pytest.approx(5.0)
    assert row.detail.startswith("W2A16+H: test perplexity 100.00 (baseline) -> 95.00 (winq)")


# ------------------------------------------------------------------------------------------------------ the table
def test_the_table_follows_the_config(tmp_path):
    rows, checks = wc.claims(SPECS, make_study(tmp_path, hessians=spectra()), EVIDENCE)
    per_setting = [cid for prefix in wc.PER_SETTING_ROWS for s in SETTINGS if (cid := wc.claim_id(prefix, s)) in SPECS]
    assert [r.id for r in rows] == [*wc.FIXED_ROWS, *per_setting, *wc.POOLED_ROWS]
    assert sorted(r.id for r in rows) == sorted(SPECS)
    by_id = {r.id: r for r in rows}
    for cid in ("winq_faster_w3", "winq_lower_perplexity_w3"):
        assert by_id[cid].reason == "setting 'w3' is not in this profile's study_settings (w1, w2)"
    # the planted study: every window alike, the paper's direction everywhere
    assert by_id["winq_lower_perplexity_w1"].verdict == "reproduced"
    assert by_id["winq_faster_w1"].verdict == "reproduced"  # 2x on both seeds
    assert by_id["interpolation_steepens_largest"].verdict == "reproduced"
    assert by_id["fewer_bits_near_zero_trend"].verdict == "reproduced"
    assert by_id["baseline_stagnates_grad_norm"].verdict == "reproduced"
    for cid, value in (("baseline_stagnates_relative_grad_norm", 0.25), ("interpolation_fewer_codes_change", -6.25),
                       ("interpolation_away_from_boundaries", -25.0)):  # winq_testing.STAGNATION and MECHANISM
        assert (by_id[cid].verdict, by_id[cid].estimate.value) == ("reproduced", pytest.approx(value)), cid
    document = claims_document(rows, checks, planted_card())
    assert document["counts"]["not testable at this scale"] == 4  # W3 perplexity, W1A8 twice, Hadamard
    assert document["counts_by_kind"]["finding"]["not testable at this scale"] == 1  # W3 speed (the paper: a tie)
    assert document["outside_regime"] == 0
    assert [c["id"] for c in document["checks"]] == ["paired_test_units", "scores_give_metrics",
                                                      "spectrum_from_probes", "bits_per_weight_identity",
                                                      "interpolation_count", "interpolation_keeps_codes",
                                                      "seed_cells"]


def test_spec_ids_are_checked(tmp_path):
    study = make_study(tmp_path)
    extra = {**SPECS, "winq_faster_w9": SPECS["winq_faster_w2"]}
    with pytest.raises(ValueError, match=r"unknown ids \['winq_faster_w9'\], missing ids none"):
        wc.claim_rows(extra, study, EVIDENCE)
    fewer = {k: v for k, v in SPECS.items() if k not in ("winq_lower_perplexity_w2", "winq_zero_shot_cloze")}
    with pytest.raises(ValueError, match=r"missing ids \['winq_lower_perplexity_w2', 'winq_zero_shot_cloze'\]"):
        wc.claim_rows(fewer, study, EVIDENCE)
    outside = {k: v for k, v in SPECS.items() if k != "winq_faster_w3"}  # w3 is not in the smoke study: optional
    assert "winq_faster_w3" not in [r.id for r in wc.claim_rows(outside, study, EVIDENCE)]
    with pytest.raises(ValueError, match=r"study settings \['w2'\] are not configured settings"):
        wc.claim_rows(SPECS, dataclasses.replace(study, configured_settings=["w1", "w3"]), EVIDENCE)


def test_a_per_setting_spec_of_a_setting_that_compares_only_the_baseline(tmp_path):
    config = {**smoke_config(), "compared": {**smoke_config()["compared"], "w2": ["baseline"]}}
    rows = {r.id: r for r in wc.claim_rows(SPECS, make_study(tmp_path, config=config), EVIDENCE)}
    assert rows["winq_faster_w2"].reason == ("setting 'w2' does not compare WinQ with the baseline on the seeds in "
                                             "this profile (compared: baseline)")


# ---------------------------------------------------------------------------------------------- the regime card
# the method rows (issue 37): each requires the premise, its settings' baselines stalling (the card's stall_<w>)
METHOD_ROWS = {"winq_lower_perplexity_pooled", "interpolation_alone_improves", "noise_alone_improves",
               "winq_beats_interpolation", "winq_beats_noise", "interpolation_beats_noise", "winq_zero_shot_cloze",
               "winq_zero_shot_choice", "hadamard_winq_improves",
               *(cid for cid in SPECS if cid.startswith(tuple(f"{p}_w" for p in wc.PER_SETTING_ROWS)))}


def row_bits(cid):
    """The card's bit widths a row depends on: its setting's (W1A8: the 1-bit rows), W2 for the Hadamard row, else
    the pooled W1 and W2."""
    setting = next((cid.removeprefix(f"{p}_") for p in wc.PER_SETTING_ROWS if cid.startswith(f"{p}_w")), None)
    return {setting.removesuffix("a8")} if setting else {"w2"} if cid.startswith("hadamard_") else {"w1", "w2"}


def test_every_claim_requires_the_quantized_share_the_interpolation_rows_the_travel_and_the_method_rows_the_premise():
    for cid, claim in SPECS.items():
        assert "quantized_share" in claim.requires, cid
        travel = {r for r in claim.requires if r.startswith("travel_")}
        if cid.startswith(("winq_", "interpolation_", "hadamard_")):
            bits = row_bits(cid)
            assert travel == {f"travel_{b}" for b in bits}, cid
            assert {r for r in claim.requires if r.startswith("step_")} == {f"step_{b}" for b in bits}, cid
        else:
            assert not travel, cid
        stall = {r for r in claim.requires if r.startswith("stall_")}
        assert stall == ({f"stall_{b}" for b in row_bits(cid)} if cid in METHOD_ROWS else set()), cid


POOLED_INTERPOLATING = {"winq_lower_perplexity_pooled", "interpolation_alone_improves", "winq_beats_interpolation",
                        "winq_beats_noise", "interpolation_beats_noise", "winq_zero_shot_cloze",
                        "winq_zero_shot_choice", "interpolation_steepens_largest", "interpolation_steepens_near_zero",
                        "interpolation_fewer_codes_change", "interpolation_away_from_boundaries",
                        "winq_lower_perplexity_any_regime"}


@pytest.mark.parametrize(("card", "outside"), [
    ({}, set()),
    ({"travel_w1": 0.1}, {"winq_faster_w1", "winq_lower_perplexity_w1", "winq_faster_w1a8",
                          "winq_lower_perplexity_w1a8", *POOLED_INTERPOLATING}),
    ({"step_w2": 0.5}, {"winq_faster_w2", "winq_lower_perplexity_w2", "hadamard_winq_improves",
                        *POOLED_INTERPOLATING}),
    ({"quantized_share": 0.32}, set(SPECS)),
    ({"stall_w1": 0.9}, {c for c in METHOD_ROWS if not c.endswith(("_w2", "_w3", "hadamard_winq_improves"))}),
    ({"stall_w2": None}, {c for c in METHOD_ROWS if not c.endswith(("_w1", "_w1a8", "_w3"))}),
])
def test_a_claim_is_not_testable_exactly_when_a_quantity_it_requires_is_outside(tmp_path, card, outside):
    """The planted study (every row testable has the paper's direction) judged against a card with one quantity
    moved outside its bounds: exactly the rows requiring it become not testable, their estimates kept."""
    rows = wc.claim_rows(SPECS, make_study(tmp_path, hessians=spectra()), EVIDENCE)
    inside = {c["id"]: c for c in claims_document(rows, [], planted_card())["claims"]}
    document = claims_document(rows, [], planted_card(**card))
    judged = {c["id"]: c for c in document["claims"]}
    assert {cid for cid, c in judged.items() if c["outside_regime"]} == outside
    assert document["outside_regime"] == len(outside)
    for cid, claim in judged.items():
        assert claim["estimate"] == inside[cid]["estimate"], cid  # kept either way
        if cid in outside:
            assert claim["verdict"] == "not testable at this scale", cid
        else:
            assert claim["verdict"] == inside[cid]["verdict"], cid
    assert inside["winq_faster_w1"]["verdict"] == "reproduced"
    if "travel_w1" in card:
        assert judged["winq_faster_w1"]["outside_regime"] == (
            "travel per interpolation period, W1 (bin widths) is 0.1, outside $\\ge$ 1 (the paper's 14.2–56.6): the "
            "interpolation acts only if a 1-bit weight it moved to its level can reach a code boundary before the "
            "next interpolation")


# ---------------------------------------------------------------------------------------- implementation checks
def checks_of(study):
    return {c.id: c for c in wc.study_checks(study)}


def replaced(study, summary=None, evaluations=None, quantized=None):
    return dataclasses.replace(study, summary=summary or study.summary,
                               evaluations={**study.evaluations, **(evaluations or {})},
                               quantized={**study.quantized, **(quantized or {})})


def test_the_checks_pass_on_a_consistent_study(tmp_path):
    checks = checks_of(make_study(tmp_path))
    assert all(c.passed for c in checks.values())
    assert checks["bits_per_weight_identity"].measured.startswith("w1-baseline/seed0 1.2500, ")
    assert "w2-winq/seed1 2.2500" in checks["bits_per_weight_identity"].measured  # 2 + 32 / 128
    assert checks["paired_test_units"].measured == ("12 evaluations: 1 distinct window layout(s) of 16 windows; "
                                                    "examples cloze [64], choice [64]")
    assert checks["interpolation_count"].measured == "N = 12, K = 3: 4, N = 12, K = None: 0"  # after 3, 6, 9, 12
    assert checks["seed_cells"].measured == "12 cells agree"
    assert checks["interpolation_keeps_codes"].measured == ("10 of 12 cells checked (the others have no mechanism "
                                                            "records): no interpolation changed a code")  # not noise


def test_each_check_fails_on_broken_data(tmp_path):
    study = make_study(tmp_path)
    cell = "w2-winq/seed1"
    short = record(cell, 90.0)
    short["metrics"]["perplexity"] |= {"window_nll": short["metrics"]["perplexity"]["window_nll"][:-1],
                                       "window_tokens": [WINDOW_TOKENS] * (WINDOWS - 1)}
    assert not checks_of(replaced(study, evaluations={cell: short}))["paired_test_units"].passed
    wrong = record(cell, 90.0)
    wrong["metrics"]["perplexity"]["perplexity"] = 91.0
    wrong["metrics"]["cloze"]["correct"] += 1
    check = checks_of(replaced(study, evaluations={cell: wrong}))["scores_give_metrics"]
    assert not check.passed
    assert check.measured == (f"{cell}: perplexity 91 vs 90 from 1008 window tokens (recorded 1008); {cell}: cloze "
                              "correct 33 vs 32 from example_correct")
    summary = json.loads(json.dumps(study.summary))
    summary["hessian"][0]["near_zero_mass"] = 0.9
    check = checks_of(replaced(study, summary=summary))["spectrum_from_probes"]
    assert not check.passed
    assert check.measured == ("w1-baseline/seed0: near-zero 0.9 vs 0.5 from its probes, largest 1 vs 1, masses sum "
                              "to 1.4 (relative), 1, 1 (absolute)")
    check = checks_of(replaced(study, quantized={cell: quantization_config(4)}))["bits_per_weight_identity"]
    assert not check.passed
    assert check.measured == f"{cell}: 2.25 reported vs 4.25 from its layers"
    blocks = {cell: {**quantization_config(2), "scale_storage": "codes"}}
    check = checks_of(replaced(study, quantized=blocks))["bits_per_weight_identity"]
    assert check.measured == f"{cell}: scales stored as codes per row block (global scale None), not float32 per row"
    with pytest.raises(ImplementationCheckFailed, match="bits_per_weight_identity"):
        claims_document([], wc.study_checks(replaced(study, quantized=blocks)))
    summary = json.loads(json.dumps(study.summary))
    summary["cells"][2]["interpolations"] = 3  # the old rule: after steps 4, 7, 10, never after the last
    summary["cells"][5]["noise_seed"] = 0
    checks = checks_of(replaced(study, summary=summary))
    assert checks["interpolation_count"].measured == "w1-winq/seed0: 3 interpolations, K = 3 of 12 steps, expected 4"
    assert checks["seed_cells"].measured == "w1-interpolation/seed1: data seed 1, noise seed 0"
    summary = json.loads(json.dumps(study.summary))
    summary["cells"][2]["mechanism"]["mean"]["codes_changed_by_interpolation_max"] = 0.001
    check = checks_of(replaced(study, summary=summary))["interpolation_keeps_codes"]
    assert not check.passed
    assert check.measured == ("10 of 12 cells checked (the others have no mechanism records): w1-winq/seed0: an "
                              "interpolation changed a share 0.001 of the codes")


def test_stored_bits_per_weight_over_layer_shapes():
    meta = {**quantization_config(1), "weights": {"a": {"shape": [4, 64]}, "b": {"shape": [2, 100]}}}
    # 1 bit, 8 codes per byte: rows of ceil(64 / 8) = 8 and ceil(100 / 8) = 13 bytes, plus a float32 scale per row
    assert wc.stored_bits_per_weight(meta) == 8 * (4 * (8 + 4) + 2 * (13 + 4)) / (4 * 64 + 2 * 100)
    assert wc.stored_bits_per_weight(quantization_config(1)) == 1 + 32 / 128


# --------------------------------------------------------------------------------------------- the claims step
def test_claims_step_writes_the_document(tmp_path):
    study = make_study(tmp_path / "runs")
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(study.summary))
    evaluations, quantized = [], []
    for cell, rec in study.evaluations.items():
        path = tmp_path / "eval" / f"{cell}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec))
        evaluations.append(str(path))
        folder = tmp_path / "quantized" / cell
        folder.mkdir(parents=True)
        (folder / "quantization_config.json").write_text(json.dumps(study.quantized[cell]))
        quantized.append(str(folder))
    config = wc.claims_config(smoke_config())
    assert set(config) == {"claims", "coverage", "settings", "regime", "learning_rates", "train", "train_steps",
                           "interpolation"}
    save_planted_model(tmp_path / "base")  # 4,608 of 5,328 parameters quantized: every quantity's own bound decides
    out = tmp_path / "claims.json"
    assert main(["claims", "--config-json", json.dumps(config), "--evidence-json",
                 json.dumps({"level": 0.95, "resamples": 1000, "seed": 0}), "--summary", str(summary),
                 "--evaluations", *evaluations, "--quantized", *quantized, "--base-model", str(tmp_path / "base"),
                 "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert set(document) == {"rule", "claims", "checks", "counts", "counts_by_kind", "not_counted", "outside_regime",
                             "regime", "coverage"}
    card = {row["id"]: row for row in document["regime"]}
    assert list(card) == list(config["regime"])
    assert card["quantized_share"]["ours"] == 4608 / 5328
    assert card["quantized_share"]["inside"]
    assert not card["travel_w1"]["inside"]  # lr 3e-5 over 3 of 12 steps: far under a bin width
    assert len(document["claims"]) == len(SPECS)
    rows = {c["id"]: c for c in document["claims"]}
    assert rows["winq_lower_perplexity_w2"]["evidence"] == [
        str(tmp_path / "eval" / f"w2-{m}" / f"seed{k}.json") for k in SEEDS for m in ("winq", "baseline")]
    assert rows["winq_lower_perplexity_w2"]["estimate"]["method"].startswith(SEED_INTERVAL)
    assert all(c["passed"] for c in document["checks"])


# ------------------------------------------------------------------------------------ kinds, quotes and coverage
RAW = yaml.safe_load(CONFIG.read_text())["winq"]


def test_rows_of_the_paper_quote_it_and_the_coverage_lists_them():
    claims, coverage = RAW["claims"], RAW["coverage"]
    paper = {cid for cid, entry in claims.items() if entry["kind"] == "paper"}
    assert all(claims[cid]["quote"].strip() and claims[cid]["where"].startswith("arXiv:2605.17471v1")
               for cid in paper)
    listed = [cid for entry in coverage for cid in entry.get("rows", [])]
    assert sorted(listed) == sorted(paper)  # every paper row under exactly one claim, and only paper rows
    assert all(("rows" in entry) != ("not_tested" in entry) for entry in coverage)
    # our findings: a second reading, our scale-free threshold, the mechanism's measurements, a claim the paper
    # does not make
    assert {cid for cid, entry in claims.items() if entry["kind"] == "finding"} == {
        "baseline_stagnates_grad_norm", "flat_near_zero_relative_w1", "interpolation_fewer_codes_change",
        "interpolation_away_from_boundaries", "winq_faster_w3", "baseline_stagnates_perplexity",
        "winq_lower_perplexity_any_regime"}


@pytest.mark.parametrize("profile", ["smoke", "default", "full", "paper", "standin"])
def test_every_profile_has_the_rows_its_study_computes(profile):
    """Each setting a profile's study compares WinQ with the baseline in has its per-setting rows (the paper
    profile's W1A8 among them), so that its claims step finds every id it computes."""
    from papers.winq.settings import profile_config

    active = profile_config(RAW, profile)
    computed = [s for s in active["study_settings"] if not active["settings"][s].get("hadamard")
                and {"winq", "baseline"} <= set(active["compared"].get(s, []))]
    missing = [wc.claim_id(prefix, s) for prefix in wc.PER_SETTING_ROWS for s in computed
               if wc.claim_id(prefix, s) not in SPECS]
    assert not missing
