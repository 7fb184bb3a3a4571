"""The claims table as evidence: every claim function on planted data where it is reproduced, contradicted and
inconclusive (the verdict follows the data both ways), the speedup not testable with its reason, the table's ids
against the config, the implementation checks, and the claims step's document."""

import json
import math

import numpy as np
import pytest
import yaml
from winq_testing import (
    CONFIG,
    WINDOW_TOKENS,
    WINDOWS,
    build_study,
    hessian_cell,
    quantization_config,
    scored_evaluation,
    smoke_config,
)

from common.report import ClaimSpec, ImplementationCheckFailed, Prediction, claim_specs, claims_document
from common.uncertainty import Evidence
from papers.winq import claims as wc
from papers.winq.__main__ import main
from papers.winq.settings import run_names, run_settings
from papers.winq.study import study_summary

EVIDENCE = Evidence(level=0.95, resamples=1000, seed=0)
SPECS = claim_specs(yaml.safe_load(CONFIG.read_text())["winq"]["claims"])
SETTINGS = list(yaml.safe_load(CONFIG.read_text())["winq"]["settings"])
EXAMPLES = 64
Z = np.array([(-1.0) ** w for w in range(WINDOWS)])  # a zero-sum pattern of window difficulty


def windows(ppl, spread=0.0, pattern=Z):
    """Per-window NLL sums of a model of perplexity ``ppl`` whose log-perplexity varies by ``spread * pattern``
    from window to window (exactly ``ppl`` over the split)."""
    return WINDOW_TOKENS * (math.log(ppl) + spread * pattern)


def record(run, ppl, spread=0.0, pattern=Z, cloze=None, choice=None):
    cloze = np.arange(EXAMPLES) < EXAMPLES // 2 if cloze is None else cloze
    choice = np.arange(EXAMPLES) < EXAMPLES // 4 if choice is None else choice
    return scored_evaluation(run, windows(ppl, spread, pattern), cloze, choice)


def make_study(tmp_path, *, evaluations=None, hessians=None, config=None):
    """The planted smoke study (``winq_testing.build_study``) with ``evaluations`` (run -> record) and
    ``hessians`` replacing the planted ones."""
    config, curves, records, cells, seconds, bits = build_study(tmp_path, config, hessians=hessians)
    records.update(evaluations or {})
    summary = study_summary(config, curves, records, cells, seconds, bits)
    runs = run_names(config)
    return wc.Study(summary=summary, evaluations={r: records[r] for r in runs},
                    quantized={r: quantization_config(run_settings(config, r)["bits"]) for r in runs},
                    summary_path="results/winq/summary.json",
                    evaluation_paths={r: f"results/winq/eval/{r}.json" for r in runs})


def spec(cid, direction=None, threshold=None):
    """The config's spec ``cid``, its prediction's direction or threshold changed when given."""
    base = SPECS[cid]
    p = base.prediction
    prediction = Prediction(p.statistic, direction or p.direction, p.threshold if threshold is None else threshold,
                            p.source)
    return ClaimSpec(base.id, base.group, base.statement, base.paper, prediction)


# ---------------------------------------------------------------------------- perplexity at equal budget, per setting
@pytest.mark.parametrize(("winq", "spread", "verdict"), [
    (92.0, 0.3, "reproduced"),  # 8% lower in every window: the shared window difficulty pairs out
    (108.0, 0.3, "contradicted"),
    (99.9, -0.3, "inconclusive"),  # 0.1% lower overall, but better and worse by ~45% window to window
])
def test_lower_perplexity(tmp_path, winq, spread, verdict):
    study = make_study(tmp_path, evaluations={"w2-baseline": record("w2-baseline", 100.0, 0.3),
                                              "w2-winq": record("w2-winq", winq, spread)})
    claim = wc.lower_perplexity(SPECS["winq_lower_perplexity_w2"], study, EVIDENCE, "w2")
    assert claim.verdict == verdict
    assert claim.estimate.value == pytest.approx(100 * (1 - winq / 100.0))
    assert claim.estimate.low <= claim.estimate.value <= claim.estimate.high
    assert claim.estimate.method.startswith(f"paired bootstrap over {WINDOWS} test windows (1000 resamples, seed 0")
    assert claim.detail == f"W2A16: test perplexity 100.00 (baseline) -> {winq:.2f} (winq), {100 - winq:+.2f}%"
    assert claim.evidence == ("results/winq/eval/w2-winq.json", "results/winq/eval/w2-baseline.json")


def test_lower_perplexity_intervals_are_paired(tmp_path):
    """The same shift, unpaired (the windows' difficulty reversed for WinQ), is far less certain."""
    paired, unpaired = (
        wc.lower_perplexity(SPECS["winq_lower_perplexity_w2"], make_study(
            tmp_path / name, evaluations={"w2-baseline": record("w2-baseline", 100.0, 0.3),
                                          "w2-winq": record("w2-winq", 99.0, 0.3, pattern)}), EVIDENCE, "w2").estimate
        for name, pattern in (("paired", Z), ("reversed", -Z)))
    assert paired.high - paired.low < 1e-9 < 10 < unpaired.high - unpaired.low
    assert paired.value == pytest.approx(unpaired.value)


@pytest.mark.parametrize(("winq", "spread", "verdict"), [
    (100.0, 0.0, "reproduced"),  # the paper's W3A16 tie: |improvement| < 0.92%
    (95.0, 0.0, "contradicted"),  # 5% better: outside the margin
    (100.0, -0.3, "inconclusive"),
])
def test_lower_perplexity_within_the_papers_tie(tmp_path, winq, spread, verdict):
    study = make_study(tmp_path, evaluations={"w2-baseline": record("w2-baseline", 100.0, 0.3),
                                              "w2-winq": record("w2-winq", winq, 0.3 if spread == 0 else spread)})
    claim = wc.lower_perplexity(SPECS["winq_lower_perplexity_w3"], study, EVIDENCE, "w2")
    assert SPECS["winq_lower_perplexity_w3"].prediction.direction == "within"
    assert claim.verdict == verdict


# ------------------------------------------------------------------------------------------ the ablation, pooled
ABLATION = {"both_components_matter_interpolation_alone": ("interpolation", "baseline"),
            "both_components_matter_noise_alone": ("noise", "baseline"),
            "both_components_matter_without_noise": ("winq", "interpolation"),
            "both_components_matter_without_interpolation": ("winq", "noise")}


@pytest.mark.parametrize("cid", list(ABLATION))
@pytest.mark.parametrize(("w2", "w4", "spread", "verdict"), [
    (95.0, 97.0, 0.3, "reproduced"),  # 5% and 3% better: 4% on average
    (105.0, 103.0, 0.3, "contradicted"),
    (90.0, 110.0, -0.3, "inconclusive"),  # better in one setting, worse in the other, noisy windows
])
def test_pooled_ablation(tmp_path, cid, w2, w4, spread, verdict):
    model, reference = ABLATION[cid]
    planted = {}
    for setting, ppl in (("w2", w2), ("w4", w4)):
        planted[f"{setting}-{reference}"] = record(f"{setting}-{reference}", 100.0, 0.3)
        planted[f"{setting}-{model}"] = record(f"{setting}-{model}", ppl, spread)
    claim = SPECS[cid]
    row = wc.POOLED_ROWS[cid](claim, make_study(tmp_path, evaluations=planted), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(((100 - w2) + (100 - w4)) / 2)
    assert row.detail.startswith(f"W2A16: test perplexity 100.00 ({reference}) -> {w2:.2f} ({model})")
    assert "; W4A16: " in row.detail
    assert len(row.evidence) == 4


def test_a_missing_method_is_not_testable(tmp_path):
    config = {**smoke_config(), "methods": ["baseline", "winq"]}
    config["hessian"] = {**config["hessian"], "methods": ["baseline", "winq"]}
    study = make_study(tmp_path, config=config)
    row = wc.POOLED_ROWS["both_components_matter_noise_alone"](SPECS["both_components_matter_noise_alone"], study,
                                                                EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert row.reason == "the study's methods (baseline, winq) lack noise"
    assert row.estimate is None


# --------------------------------------------------------------------------------------------------- zero-shot
def correct(first, last):
    return (np.arange(EXAMPLES) >= first) & (np.arange(EXAMPLES) < last)


@pytest.mark.parametrize("task", ["cloze", "choice"])
@pytest.mark.parametrize(("winq", "verdict", "value"), [
    (correct(0, 32), "reproduced", 25.0),  # every baseline hit and 16 more
    (correct(0, 4), "contradicted", -18.75),
    (correct(16, 32), "inconclusive", 0.0),  # as many hits, on other examples
])
def test_zero_shot(tmp_path, task, winq, verdict, value):
    baseline = correct(0, 16)
    planted = {}
    for setting in ("w2", "w4"):
        for run, hits in ((f"{setting}-baseline", baseline), (f"{setting}-winq", winq)):
            planted[run] = record(run, 100.0, **{task: hits})
    row = wc.zero_shot(SPECS[f"winq_zero_shot_{task}"], make_study(tmp_path, evaluations=planted), EVIDENCE,
                       task=task)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(value)
    assert row.estimate.method.startswith(f"paired bootstrap over {EXAMPLES} {task} examples")
    label = {"cloze": "cloze acc", "choice": "choice acc_norm"}[task]  # the summary's accuracies
    assert row.detail.startswith(f"W2A16: {label} 0.250 (baseline) -> {winq.mean():.3f} (winq)")


# ------------------------------------------------------------------------------------------------- the speedup
@pytest.mark.parametrize("curve", [[110.0, 88.0, 80.0], [130.0, 120.0, 95.0]])
def test_speedup_is_not_testable_with_one_seed(tmp_path, curve):
    config, curves, records, cells, seconds, bits = build_study(tmp_path, planted={
        "baseline": ([120.0, 100.0, 90.0], 100.0), "winq": (curve, 92.0), "interpolation": ([1, 1, 1], 95.0),
        "noise": ([1, 1, 1], 98.0)})
    summary = study_summary(config, curves, records, cells, seconds, bits)
    study = wc.Study(summary, records, {}, "results/winq/summary.json", {})
    row = wc.speedup(SPECS["winq_faster_w2"], study, EVIDENCE, "w2")
    assert row.verdict == "not testable at this scale"
    assert row.reason == wc.SPEEDUP_REASON
    assert "eval_log.csv" in row.reason
    assert "issue 14" in row.reason
    reached = "8 steps, 1.50x" if curve[1] < 90 else "never reached"
    assert row.detail == (f"W2A16: baseline 12 steps to its final validation perplexity 90.00; WinQ {reached} "
                          "(evaluated every 4 steps)")


# --------------------------------------------------------------------------------------------- Hessian spectra
def one_bit_config():
    return {**smoke_config(), "study_settings": ["w1", "w2"]}


@pytest.mark.parametrize(("near_zero", "jitter", "verdict"), [
    (0.5, 0.05, "reproduced"),  # 50% near zero (the paper: > 40%)
    (0.3, 0.05, "contradicted"),
    (0.4, 0.5, "inconclusive"),  # 40% on average, 20% or 60% probe by probe
])
def test_one_bit_near_zero(tmp_path, near_zero, jitter, verdict):
    cells = {"w1-baseline": hessian_cell(1, "baseline", near_zero=near_zero, largest=1.0, probes=6, jitter=jitter),
             "w2-baseline": hessian_cell(2, "baseline", near_zero=0.3, largest=2.0, probes=6)}
    study = make_study(tmp_path, config=one_bit_config(), hessians=cells)
    row = wc.one_bit_near_zero(SPECS["lower_bits_flatter_one_bit"], study, EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(100 * near_zero)
    assert row.estimate.method.startswith("paired bootstrap over 6 SLQ probes")
    assert row.detail.startswith(f"w1-baseline: near-zero {near_zero:.1%}, largest |eigenvalue| 1")


def test_one_bit_near_zero_needs_a_one_bit_spectrum(tmp_path):
    row = wc.one_bit_near_zero(SPECS["lower_bits_flatter_one_bit"], make_study(tmp_path), EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert "1-bit baseline" in row.reason


@pytest.mark.parametrize(("statistic", "w2", "w4", "verdict"), [
    # near-zero mass (the paper: rises as bits fall; slope below 0); w2's probes jitter by +-jitter
    ("near_zero", (0.4, 0.1), (0.2, 0.0), "reproduced"),
    ("near_zero", (0.2, 0.1), (0.4, 0.0), "contradicted"),
    ("near_zero", (0.3, 0.5), (0.3, 0.0), "inconclusive"),
    # the largest |eigenvalue| (the paper: shrinks as bits fall; slope of ln above 0)
    ("largest", (1.0, 0.1), (4.0, 0.0), "reproduced"),
    ("largest", (4.0, 0.1), (1.0, 0.0), "contradicted"),
    ("largest", (2.0, 0.4), (2.0, 0.0), "inconclusive"),
])
def test_bit_trend(tmp_path, statistic, w2, w4, verdict):
    def cell(bits, value_jitter):
        value, jitter = value_jitter
        fields = {"near_zero": value, "largest": 2.0} if statistic == "near_zero" else {"near_zero": 0.3,
                                                                                        "largest": value}
        return hessian_cell(bits, "baseline", **fields, probes=6, jitter=jitter)

    study = make_study(tmp_path, hessians={"w2-baseline": cell(2, w2), "w4-baseline": cell(4, w4)})
    cid = f"lower_bits_flatter_{statistic}_trend"
    row = wc.SPECTRUM_ROWS[cid](SPECS[cid], study, EVIDENCE)
    assert row.verdict == verdict
    expected = (100 * (w4[0] - w2[0]) if statistic == "near_zero" else math.log(w4[0] / w2[0])) / 2
    assert row.estimate.value == pytest.approx(expected, abs=0.02)  # the jitter moves the probes' mean largest
    assert row.detail.startswith("w2-baseline: near-zero ")


def test_bit_trend_needs_two_bit_widths(tmp_path):
    study = make_study(tmp_path, hessians={"w2-baseline": hessian_cell(2, "baseline", near_zero=0.3, largest=1.0)})
    row = wc.SPECTRUM_ROWS["lower_bits_flatter_largest_trend"](SPECS["lower_bits_flatter_largest_trend"], study,
                                                               EVIDENCE)
    assert row.verdict == "not testable at this scale"
    assert row.reason.endswith("with 16-bit activations (w2-baseline)")


@pytest.mark.parametrize(("statistic", "winq", "jitter", "verdict", "value"), [
    ("largest", 2.0, 0.05, "reproduced", math.log(2)),  # twice the baseline's largest |eigenvalue|
    ("largest", 0.5, 0.05, "contradicted", -math.log(2)),
    ("largest", 1.0, 0.4, "inconclusive", 0.0),
    ("near_zero", 0.2, 0.05, "reproduced", -10.0),  # 10 points less near-zero mass than the baseline's 30%
    ("near_zero", 0.4, 0.05, "contradicted", 10.0),
    ("near_zero", 0.3, 0.6, "inconclusive", 0.0),
])
def test_winq_steepens(tmp_path, statistic, winq, jitter, verdict, value):
    cells = {}
    for setting, bits in (("w2", 2), ("w4", 4)):
        cells[f"{setting}-baseline"] = hessian_cell(bits, "baseline", near_zero=0.3, largest=bits, probes=6)
        winq_fields = ({"near_zero": 0.3, "largest": winq * bits} if statistic == "largest"
                       else {"near_zero": winq, "largest": bits})
        cells[f"{setting}-winq"] = hessian_cell(bits, "winq", **winq_fields, probes=6, jitter=jitter)
    cid = f"winq_steepens_{statistic}"
    row = wc.SPECTRUM_ROWS[cid](SPECS[cid], make_study(tmp_path, hessians=cells), EVIDENCE)
    assert row.verdict == verdict
    assert row.estimate.value == pytest.approx(value, abs=0.06)
    assert row.evidence == ("results/winq/summary.json",)


def test_spectra_must_pair_by_probe(tmp_path):
    cells = {"w2-baseline": hessian_cell(2, "baseline", near_zero=0.3, largest=1.0),
             "w2-winq": {**hessian_cell(2, "winq", near_zero=0.3, largest=1.0), "seed": 1}}
    with pytest.raises(ValueError, match=r"do not pair by probe: w2-winq \(2 probes, seed 1, 1000 parameters\), "
                                         r"w2-baseline \(2 probes, seed 0"):
        wc.SPECTRUM_ROWS["winq_steepens_largest"](SPECS["winq_steepens_largest"], make_study(tmp_path, hessians=cells),
                                                  EVIDENCE)


# ------------------------------------------------------------------------------------------------------ the table
def test_the_table_follows_the_config(tmp_path):
    rows = wc.study_claims(SPECS, make_study(tmp_path), EVIDENCE, SETTINGS)
    assert [r.id for r in rows] == [
        *wc.SPECTRUM_ROWS, *(wc.claim_id("winq_faster", s) for s in SETTINGS),
        *(wc.claim_id("winq_lower_perplexity", s) for s in SETTINGS), *wc.POOLED_ROWS]
    assert sorted(r.id for r in rows) == sorted(SPECS)
    by_id = {r.id: r for r in rows}
    for cid in ("winq_faster_w1_58", "winq_lower_perplexity_w3", "winq_lower_perplexity_w2a8"):
        assert by_id[cid].reason.startswith("setting '")
        assert by_id[cid].reason.endswith("is not in this profile's study_settings (w2, w4)")
    assert by_id["lower_bits_flatter_one_bit"].verdict == "not testable at this scale"  # smoke has no W1
    # the planted study: every window alike, the paper's direction everywhere
    assert by_id["winq_lower_perplexity_w2"].verdict == "reproduced"
    assert by_id["winq_steepens_largest"].verdict == "reproduced"
    assert by_id["lower_bits_flatter_near_zero_trend"].verdict == "reproduced"
    document = claims_document(rows, wc.study_checks(make_study(tmp_path / "again")))
    assert document["counts"]["not testable at this scale"] == 1 + 6 + 4  # W1; every speedup; 4 outside the study
    assert [c["id"] for c in document["checks"]] == ["paired_test_units", "scores_give_metrics",
                                                      "spectrum_from_probes", "bits_per_weight_identity"]


def test_spec_ids_are_checked(tmp_path):
    study = make_study(tmp_path)
    extra = {**SPECS, "winq_faster_w9": SPECS["winq_faster_w2"]}
    with pytest.raises(ValueError, match=r"unknown ids \['winq_faster_w9'\], missing ids none"):
        wc.study_claims(extra, study, EVIDENCE, SETTINGS)
    fewer = {k: v for k, v in SPECS.items() if k not in ("winq_lower_perplexity_w4", "winq_zero_shot_cloze")}
    with pytest.raises(ValueError, match=r"missing ids \['winq_lower_perplexity_w4', 'winq_zero_shot_cloze'\]"):
        wc.study_claims(fewer, study, EVIDENCE, SETTINGS)
    outside = {k: v for k, v in SPECS.items() if k != "winq_faster_w3"}  # w3 is not in the smoke study: optional
    assert "winq_faster_w3" not in [r.id for r in wc.study_claims(outside, study, EVIDENCE, SETTINGS)]
    with pytest.raises(ValueError, match=r"study settings \['w4'\] are not configured settings"):
        wc.study_claims(SPECS, study, EVIDENCE, ["w1", "w2"])


# ---------------------------------------------------------------------------------------- implementation checks
def checks_of(study):
    return {c.id: c for c in wc.study_checks(study)}


def test_the_checks_pass_on_a_consistent_study(tmp_path):
    checks = checks_of(make_study(tmp_path))
    assert all(c.passed for c in checks.values())
    assert checks["bits_per_weight_identity"].measured.startswith("w2-baseline 2.2500, ")
    assert "w4-noise 4.2500" in checks["bits_per_weight_identity"].measured  # 4 + 32 / 128
    assert checks["paired_test_units"].measured == ("8 evaluations: 1 distinct window layout(s) of 16 windows; "
                                                    "examples cloze [64], choice [64]")


def test_each_check_fails_on_broken_data(tmp_path):
    study = make_study(tmp_path)
    short = record("w2-winq", 90.0)
    short["metrics"]["perplexity"] |= {"window_nll": short["metrics"]["perplexity"]["window_nll"][:-1],
                                       "window_tokens": [WINDOW_TOKENS] * (WINDOWS - 1)}
    assert not checks_of(wc.Study(study.summary, {**study.evaluations, "w2-winq": short}, study.quantized,
                                  study.summary_path, study.evaluation_paths))["paired_test_units"].passed
    wrong = record("w2-winq", 90.0)
    wrong["metrics"]["perplexity"]["perplexity"] = 91.0
    wrong["metrics"]["cloze"]["correct"] += 1
    check = checks_of(wc.Study(study.summary, {**study.evaluations, "w2-winq": wrong}, study.quantized,
                               study.summary_path, study.evaluation_paths))["scores_give_metrics"]
    assert not check.passed
    assert check.measured == ("w2-winq: perplexity 91 vs 90 from 1008 window tokens (recorded 1008); w2-winq: cloze "
                              "correct 33 vs 32 from example_correct")
    summary = json.loads(json.dumps(study.summary))
    summary["hessian"][0]["near_zero_mass"] = 0.9
    check = checks_of(wc.Study(summary, study.evaluations, study.quantized, study.summary_path,
                               study.evaluation_paths))["spectrum_from_probes"]
    assert not check.passed
    assert check.measured == "w2-baseline: near-zero 0.9 vs 0.4 from its probes, largest 2 vs 2, masses sum to 1.5"
    quantized = {**study.quantized, "w4-winq": quantization_config(2)}
    check = checks_of(wc.Study(study.summary, study.evaluations, quantized, study.summary_path,
                               study.evaluation_paths))["bits_per_weight_identity"]
    assert not check.passed
    assert check.measured == "w4-winq: 4.25 reported vs 2.25 from its layers"
    blocks = {**study.quantized, "w2-winq": {**quantization_config(2), "scale_storage": "codes"}}
    check = checks_of(wc.Study(study.summary, study.evaluations, blocks, study.summary_path,
                               study.evaluation_paths))["bits_per_weight_identity"]
    assert check.measured == "w2-winq: scales stored as codes per row block (global scale None), not float32 per row"
    with pytest.raises(ImplementationCheckFailed, match="bits_per_weight_identity"):
        claims_document([], wc.study_checks(wc.Study(study.summary, study.evaluations, blocks, study.summary_path,
                                                     study.evaluation_paths)))


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
    for run, rec in study.evaluations.items():
        path = tmp_path / "eval" / f"{run}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(rec))
        evaluations.append(str(path))
        folder = tmp_path / "quantized" / run
        folder.mkdir(parents=True)
        (folder / "quantization_config.json").write_text(json.dumps(study.quantized[run]))
        quantized.append(str(folder))
    config = {"claims": yaml.safe_load(CONFIG.read_text())["winq"]["claims"], "settings": SETTINGS}
    out = tmp_path / "claims.json"
    assert main(["claims", "--config-json", json.dumps(config), "--evidence-json",
                 json.dumps({"level": 0.95, "resamples": 1000, "seed": 0}), "--summary", str(summary),
                 "--evaluations", *evaluations, "--quantized", *quantized, "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert set(document) == {"rule", "claims", "checks", "counts"}
    assert len(document["claims"]) == len(SPECS)
    rows = {c["id"]: c for c in document["claims"]}
    assert rows["winq_lower_perplexity_w2"]["evidence"] == [str(tmp_path / "eval" / "w2-winq.json"),
                                                            str(tmp_path / "eval" / "w2-baseline.json")]
    assert rows["winq_lower_perplexity_w2"]["estimate"]["method"].startswith("paired bootstrap over 16 test windows")
    assert all(c["passed"] for c in document["checks"])
