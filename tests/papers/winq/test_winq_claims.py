"""The claims table: verdicts computed from planted summaries by each claim's rule."""

import pytest
from winq_testing import PLANTED, build_study, hessian_cell

from common.report import VERDICTS
from papers.winq.claims import study_claims
from papers.winq.study import study_summary

THRESHOLDS = {"speedup_min": 1.0, "improvement_min": 0.0, "ablation_margin": 0.0}


def claims_of(summary, thresholds=THRESHOLDS):
    return {c.id: c for c in study_claims(summary, thresholds, "results/winq/summary.json")}


def summary_of(tmp_path, **changes):
    return study_summary(*build_study(tmp_path, **changes))


def test_paper_like_study_reproduces_every_claim(tmp_path):
    claims = claims_of(summary_of(tmp_path))
    assert list(claims) == ["lower_bits_flatter", "winq_steepens", "winq_faster", "winq_lower_perplexity",
                            "both_components_matter"]
    assert {c.verdict for c in claims.values()} == {"reproduced"}
    assert claims["winq_faster"].measured == "W2A16: 8 steps, 1.50x; W4A16: 8 steps, 1.50x"
    assert claims["winq_lower_perplexity"].measured == "W2A16: 100.00 -> 92.00 (+8.0%); W4A16: 100.00 -> 92.00 (+8.0%)"
    assert claims["both_components_matter"].evidence == ("results/winq/summary.json",)


def test_no_speedup_and_no_improvement(tmp_path):
    planted = {**PLANTED, "winq": PLANTED["baseline"]}
    claims = claims_of(summary_of(tmp_path, planted=planted))
    assert claims["winq_faster"].verdict == "not reproduced"  # 1.0x is not above 1.0x
    assert claims["winq_lower_perplexity"].verdict == "not reproduced"
    assert claims["both_components_matter"].verdict == "not reproduced"  # each ablation beats "WinQ"


def test_thresholds_move_the_verdicts(tmp_path):
    summary = summary_of(tmp_path)
    strict = {"speedup_min": 1.5, "improvement_min": 0.08, "ablation_margin": 0.04}
    claims = claims_of(summary, strict)
    assert claims["winq_faster"].verdict == "not reproduced"  # 1.5x is not above 1.5x
    assert claims["winq_lower_perplexity"].verdict == "not reproduced"  # 8% is not above 8%
    # interpolation alone +5% is not 4% below WinQ's 8%; noise alone +2% is
    assert claims["both_components_matter"].verdict == "partly"


def test_a_never_reaching_winq_fails_the_speed_claim(tmp_path):
    planted = {**PLANTED, "winq": ([130.0, 120.0, 95.0], 92.0)}
    claim = claims_of(summary_of(tmp_path, planted=planted))["winq_faster"]
    assert claim.verdict == "not reproduced"
    assert "never reached" in claim.measured


def test_hessian_claims_count_pairs(tmp_path):
    hessians = {"w2-baseline": hessian_cell(2, "baseline", near_zero=0.5, largest=1.0),
                "w4-baseline": hessian_cell(4, "baseline", near_zero=0.3, largest=0.5),  # larger bits, smaller max
                "w2-winq": hessian_cell(2, "winq", near_zero=0.4, largest=0.9),
                "w4-winq": hessian_cell(4, "winq", near_zero=0.2, largest=0.8)}
    claims = claims_of(summary_of(tmp_path, hessians=hessians))
    assert claims["lower_bits_flatter"].verdict == "partly"  # more near-zero mass holds, smaller max fails
    assert claims["winq_steepens"].verdict == "partly"  # w2: 0.9 < 1.0; w4: 0.8 > 0.5
    assert claims["lower_bits_flatter"].measured.startswith("W2: near-zero 50.0%, largest |eigenvalue| 1")


def test_without_spectra_or_ablations_the_claims_are_untestable(tmp_path):
    config, *rest = build_study(tmp_path, hessians={})
    claims = claims_of(study_summary(config, *rest))
    assert claims["lower_bits_flatter"].verdict == VERDICTS[3]
    assert claims["winq_steepens"].verdict == VERDICTS[3]
    only = {**config, "methods": ["baseline", "winq"]}
    claims = claims_of(study_summary(only, *build_study(tmp_path / "two", only)[1:]))
    assert claims["both_components_matter"].verdict == VERDICTS[3]
    assert claims["winq_faster"].verdict == "reproduced"


@pytest.mark.parametrize("claim", ["winq_faster", "winq_lower_perplexity"])
def test_one_setting_of_two_is_partly(tmp_path, claim):
    summary = summary_of(tmp_path)
    for row in summary["runs"]:
        if row["run"] == "w4-winq":
            row.update(speedup=0.5, improvement=-0.01)
    assert claims_of(summary)[claim].verdict == "partly"
