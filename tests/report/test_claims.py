"""common.report.claims: the fixed verdict rule on planted intervals (each direction, each verdict, the
boundaries), specs read from config with named errors, rows that refuse a verdict the rule does not give, and
implementation checks that fail the build."""

import json
from dataclasses import replace

import pytest

from common.report.claims import (
    VERDICTS,
    Check,
    Claim,
    ClaimsResult,
    ImplementationCheckFailed,
    Prediction,
    claim_specs,
    claims_document,
    judge,
    verdict_counts,
    write_claims,
)
from common.uncertainty import Estimate, Evidence

SPEC = {"kind": "paper", "group": "4/6 at block 4", "statement": "4/6 shrinks the block-4 gap",
        "quote": "4-over-6 cuts the block-4 gap", "where": "Sec. 4", "paper": "0.725 -> 0.270",
        "statistic": "relative change of the block-4 gap", "direction": "below", "threshold": -0.3,
        "source": "about half the paper's -63%"}
COVERAGE = [{"claim": "4-over-6 cuts the block-4 gap", "where": "Sec. 4", "rows": ["a"]},
            {"claim": "it scales to 70B models", "where": "Sec. 5", "not_tested": "the scale"}]


def _est(low, high):
    return Estimate((low + high) / 2, low, high, "planted")


@pytest.mark.parametrize(("direction", "threshold", "interval", "expected"), [
    ("above", 0.0, (0.1, 0.3), "reproduced"),
    ("above", 0.0, (-0.3, -0.1), "contradicted"),
    ("above", 0.0, (-0.1, 0.1), "inconclusive"),
    ("above", 0.0, (0.0, 0.1), "inconclusive"),     # touching the threshold is not "entirely above"
    ("below", -0.3, (-0.7, -0.5), "reproduced"),
    ("below", -0.3, (-0.2, 0.1), "contradicted"),
    ("below", -0.3, (-0.4, -0.2), "inconclusive"),
    ("within", 0.01, (-0.005, 0.008), "reproduced"),
    ("within", 0.01, (0.02, 0.05), "contradicted"),
    ("within", 0.01, (-0.05, -0.02), "contradicted"),
    ("within", 0.01, (0.005, 0.02), "inconclusive"),
    ("within", 0.01, (-0.02, 0.02), "inconclusive"),  # wider than the margin on both sides
])
def test_the_rule_follows_the_interval(direction, threshold, interval, expected):
    assert Prediction("x", direction, threshold, "s").verdict(_est(*interval)) == expected


def test_no_estimate_is_not_testable_and_needs_a_reason():
    spec = claim_specs({"c": SPEC})["c"]
    row = judge(spec, None, reason="no model has zero-shot tasks at this scale")
    assert row.verdict == VERDICTS[3]
    with pytest.raises(ValueError, match="must state why"):
        judge(spec, None)


def test_specs_from_config_name_their_errors():
    spec = claim_specs({"four_over_six_block4": SPEC})["four_over_six_block4"]
    assert spec.prediction == Prediction("relative change of the block-4 gap", "below", -0.3,
                                         "about half the paper's -63%")
    assert spec.prediction.describe() == "relative change of the block-4 gap < -0.3"
    assert Prediction("d", "within", 0.01, "s").describe() == "d within $\\pm 0.01$"
    assert Prediction("d", "above", 0.0, "s").describe() == "d > 0"
    with pytest.raises(ValueError, match=r"claims\.c: missing \['source'\], unknown \['sauce'\]"):
        claim_specs({"c": {**{k: v for k, v in SPEC.items() if k != "source"}, "sauce": "x"}})
    with pytest.raises(ValueError, match=r"claims\.c: prediction direction 'up'"):
        claim_specs({"c": {**SPEC, "direction": "up"}})
    with pytest.raises(ValueError, match="margin must be positive"):
        claim_specs({"c": {**SPEC, "direction": "within", "threshold": 0}})


def test_a_row_refuses_a_verdict_the_rule_does_not_give_and_round_trips():
    spec = claim_specs({"c": SPEC})["c"]
    row = judge(spec, _est(-0.7, -0.5), detail="small: 0.8 -> 0.3", evidence=["a.json"])
    assert row.verdict == "reproduced"
    assert Claim.from_dict(row.to_dict()) == row
    typed = {**row.to_dict(), "verdict": "contradicted"}
    with pytest.raises(ValueError, match="does not follow from the estimate"):
        Claim.from_dict(typed)
    with pytest.raises(ValueError, match="verdict 'partly' is not one of"):
        Claim.from_dict({**row.to_dict(), "verdict": "partly"})


def test_claims_document_counts_and_fails_on_a_broken_check():
    specs = claim_specs({"a": SPEC, "b": {**SPEC, "direction": "above"}})
    rows = [judge(specs["a"], _est(-0.7, -0.5)), judge(specs["b"], _est(-0.7, -0.5))]
    ok = Check("brute_force_lowest", "brute force <= every heuristic", "0 of 287 points above", True)
    document = claims_document(rows, [ok])
    assert document["counts"] == {"reproduced": 1, "contradicted": 1, "inconclusive": 0,
                                  "not testable at this scale": 0}
    assert [c["id"] for c in document["claims"]] == ["a", "b"]
    assert document["checks"][0]["passed"] is True
    broken = Check("parts_sum", "theory parts sum to the total", "off by 1e-3", False)
    with pytest.raises(ImplementationCheckFailed, match=r"parts_sum \(theory parts sum to the total: off by 1e-3\)"):
        claims_document(rows, [ok, broken])
    with pytest.raises(ValueError, match="duplicate claim or check ids: a"):
        claims_document([rows[0], rows[0]], [])
    with pytest.raises(ValueError, match="unknown verdicts"):
        verdict_counts(["partly"])


def planted_claims(specs, study, evidence):
    """A paper's entry point (common.report.PaperClaims) on a planted study: each spec's interval from ``study``."""
    rows = [judge(spec, _est(*study[cid]), detail=f"level {evidence.level}") for cid, spec in specs.items()]
    return ClaimsResult(rows, [Check("planted", "the study is planted", f"{len(study)} intervals", True)])


def test_write_claims_runs_a_paper_s_entry_point_and_writes_its_document(tmp_path):
    out = tmp_path / "claims.json"
    study = {"a": (-0.7, -0.5), "b": (-0.2, 0.1)}
    config = {"claims": {"a": SPEC, "b": {**SPEC, "kind": "finding"}}, "coverage": COVERAGE}
    document = write_claims(out, planted_claims, config, study, Evidence(0.9, 1000, 0), [], "demo", root=tmp_path)
    assert json.loads(out.read_text()) == document
    assert [(c["id"], c["kind"], c["verdict"], c["detail"]) for c in document["claims"]] == [
        ("a", "paper", "reproduced", "level 0.9"), ("b", "finding", "contradicted", "level 0.9")]
    assert document["counts"] == {"reproduced": 1, "contradicted": 0, "inconclusive": 0,
                                  "not testable at this scale": 0}
    assert document["counts_by_kind"]["finding"]["contradicted"] == 1
    assert document["coverage"][1] == {"claim": "it scales to 70B models", "where": "Sec. 5", "rows": [],
                                       "not_tested": "the scale", "profile": ""}
    assert document["claims"][0]["dates"]["prediction"] == {"note": "unknown: not a git checkout"}
    assert [c["id"] for c in document["checks"]] == ["planted"]
    with pytest.raises(ValueError, match=r"demo\.claims\.a: missing \['source'\]"):
        write_claims(out, planted_claims, {**config, "claims": {"a": {k: v for k, v in SPEC.items() if k != "source"}}},
                     study, Evidence(0.9, 1000, 0), [], "demo", root=tmp_path)
    with pytest.raises(ValueError, match="the demo config has no coverage"):
        write_claims(out, planted_claims, {"claims": {"a": SPEC}}, study, Evidence(0.9, 1000, 0), [], "demo")
    with pytest.raises(ValueError, match=r"demo\.coverage lists no claim for the paper rows a"):
        write_claims(out, planted_claims, {**config, "coverage": COVERAGE[1:]}, study, Evidence(0.9, 1000, 0), [],
                     "demo", root=tmp_path)


def test_write_claims_writes_nothing_when_a_check_fails(tmp_path):
    def failing(specs, study, evidence):
        return ClaimsResult([], [Check("broken", "an identity", "off by 1", False)])

    with pytest.raises(ImplementationCheckFailed, match="broken"):
        write_claims(tmp_path / "claims.json", failing, {"claims": {}, "coverage": []}, None,
                     Evidence(0.95, 1000, 0), [], "demo", root=tmp_path)
    assert not (tmp_path / "claims.json").exists()


def test_kinds_quotes_and_controls_are_read_with_named_errors():
    with pytest.raises(ValueError, match=r"claims\.c: missing \['quote'\]"):
        claim_specs({"c": {k: v for k, v in SPEC.items() if k != "quote"}})
    assert claim_specs({"c": {k: v for k, v in {**SPEC, "kind": "finding"}.items() if k != "quote"}})["c"].quote == ""
    with pytest.raises(ValueError, match=r"claims\.c: kind 'ours' is not one of paper, finding, check, control"):
        claim_specs({"c": {**SPEC, "kind": "ours"}})
    with pytest.raises(ValueError, match=r"claims\.c\.control names 'd', which is not a control row of claims"):
        claim_specs({"c": {**SPEC, "control": "d"}, "d": SPEC})
    with pytest.raises(ValueError, match=r"claims\.c\.revised must be \{commit, why\} and optionally earlier"):
        claim_specs({"c": {**SPEC, "revised": {"commit": "abc1234"}}})


def test_a_bound_whose_control_does_not_break_it_is_not_reproduced():
    bound = {**SPEC, "direction": "within", "threshold": 0.006, "control": "coarse"}
    control = {**SPEC, "kind": "control", "direction": "above", "threshold": 0.006}
    specs = claim_specs({"bound": bound, "coarse": control})
    inside = _est(-0.001, 0.003)
    broke = claims_document([judge(specs["bound"], inside), judge(specs["coarse"], _est(0.01, 0.02))], [])
    assert [c["verdict"] for c in broke["claims"]] == ["reproduced", "reproduced"]
    assert broke["claims"][0]["control_failed"] == ""
    loose = claims_document([judge(specs["bound"], inside), judge(specs["coarse"], _est(0.004, 0.02))], [])
    assert [c["verdict"] for c in loose["claims"]] == ["inconclusive", "inconclusive"]
    assert "did not break the bound" in loose["claims"][0]["control_failed"]
    assert loose["counts"]["inconclusive"] == 1  # the control row is not in the paper's tally
    assert loose["counts_by_kind"]["control"]["inconclusive"] == 1
    row = Claim.from_dict(loose["claims"][0])
    assert row.verdict == "inconclusive"
    assert Claim.from_dict(row.to_dict()) == row
    with pytest.raises(ValueError, match="does not follow from the estimate"):
        Claim.from_dict({**loose["claims"][0], "verdict": "reproduced"})


def test_a_revised_paper_row_counts_under_its_earlier_prediction_or_not_at_all():
    spec = claim_specs({"c": SPEC})["c"]
    row = judge(spec, _est(-0.25, -0.1))  # inconclusive against -0.3
    earlier = {"statistic": "relative change of the block-4 gap", "direction": "below", "threshold": 0.0,
               "requires": []}
    same = Claim.from_dict({**row.to_dict(), "revision": {"earlier": earlier, "how": "git"}})
    assert same.tallied == "reproduced"  # the earlier threshold, 0, judges today's interval
    assert same.to_dict()["revision"]["earlier_text"] == "relative change of the block-4 gap < 0"
    new_statistic = Claim.from_dict({**row.to_dict(), "revision": {"earlier": {**earlier, "statistic": "gap"},
                                                                   "how": "git"}})
    assert new_statistic.tallied is None
    document = claims_document([same, Claim.from_dict({**new_statistic.to_dict(), "id": "d"})], [])
    assert document["counts"]["reproduced"] == 1
    assert sum(document["counts"].values()) == 1
    assert document["not_counted"] == ["d"]
    assert judge(claim_specs({"f": {**SPEC, "kind": "finding"}})["f"], _est(-0.7, -0.5)).tallied is None


def test_coverage_and_dates_follow_rows_derived_from_one_config_row(tmp_path):
    def derived(specs, study, evidence):
        spec = specs["a"]
        return ClaimsResult([judge(replace(spec, id="a_wa"), _est(-0.7, -0.5)),
                             judge(replace(spec, id="a_w", kind="finding"), _est(-0.7, -0.5))], [])

    config = {"claims": {"a": SPEC}, "coverage": COVERAGE}
    document = write_claims(tmp_path / "claims.json", derived, config, None, Evidence(0.95, 1000, 0), [], "demo",
                            root=tmp_path)
    assert document["coverage"][0]["rows"] == ["a_wa"]  # the paper row computed from a; a_w is our finding
    assert document["counts"]["reproduced"] == 1
    assert document["claims"][0]["dates"]["prediction"] == {"note": "unknown: not a git checkout"}
    with pytest.raises(ValueError, match=r"demo\.coverage: the claim '4-over-6 cuts the block-4 gap' lists 'a', "
                                         r"which no paper row of the claims table comes from"):
        write_claims(tmp_path / "claims.json", lambda s, st, e: ClaimsResult([], []), config, None,
                     Evidence(0.95, 1000, 0), [], "demo", root=tmp_path)


def test_a_row_with_the_papers_effect_states_its_power():
    """The detail ends with the interval's half-width against half the paper's effect: narrow enough to tell the
    effect from none, or too wide."""
    from common.report.claims import power_text

    spec = claim_specs({"gain": {**SPEC, "effect": 4.8}})["gain"]
    narrow, wide = _est(0.0, 2.0), _est(-4.0, 6.0)
    assert power_text(narrow, 4.8) == ("Power: the interval's half-width 1 against half the paper's effect 2.4 (4.8): "
                                       "narrow enough to tell the paper's effect from none.")
    assert judge(spec, narrow, detail="3 seeds").detail == "3 seeds. " + power_text(narrow, 4.8)
    assert judge(spec, narrow).detail == power_text(narrow, 4.8)
    assert "too wide to tell the paper's effect from none" in judge(spec, wide).detail
    assert judge(claim_specs({"gain": SPEC})["gain"], wide).detail == ""  # no effect stated, no power
    with pytest.raises(ValueError, match=r"claims\.gain\.effect must be a positive number"):
        claim_specs({"gain": {**SPEC, "effect": -1}})
