"""The paper's claims: every verdict (reproduced, partly, not reproduced, not testable) of every rule on synthetic
validation results, tensor cells and perplexity gaps."""

import math

import pytest
from msl_testing import (
    THRESHOLDS,
    crossover_row,
    fit,
    gap_summary,
    tensor_summary,
    validation_result,
    zero_block_row,
)

from common.theory import zero_block_probability
from papers.microscaling_limits.claims import model_claims, tensor_claims, theory_claims

THEORY_IDS = ["theory_matches_simulation", "zero_blocks_drive_reversal", "zero_block_probability"]
TENSOR_IDS = ["narrow_tensors_invert", "ue5m3_removes_tensor_inversion"]
MODEL_IDS = ["perplexity_inversion", "ue5m3_removes_perplexity_inversion", "ue5m3_matches_ue4m3s"]
R, P, N, T = "reproduced", "partly", "not reproduced", "not testable at this scale"
EVIDENCE = "results/microscaling_limits/validation.json"
PAPER = {4: 0.33, 8: 0.11, 16: 0.012, 32: 1.5e-4}


def theory(validation, thresholds=THRESHOLDS):
    claims = theory_claims(validation, thresholds, EVIDENCE)
    assert [c.id for c in claims] == THEORY_IDS
    assert all(c.evidence == (EVIDENCE,) for c in claims)
    return {c.id: c for c in claims}


def zero_rows(shift=None, theory_of=None):
    """The UE4M3 zero-block rows with the real theory; simulation = theory + shift[n]; a UE5M3 row (no paper)."""
    rows = []
    for n, paper in PAPER.items():
        value = zero_block_probability(0.005, n) if theory_of is None else theory_of(n)
        rows.append(zero_block_row("ue4m3", n, value, value + (shift or {}).get(n, 0.0), paper))
    rows.append(zero_block_row("ue5m3", 4, 0.0, 0.5, None))  # no paper number: not checked
    return rows


# ------------------------------------------------------------------------------------- theory_matches_simulation
@pytest.mark.parametrize(("fits", "expected"), [
    ({"ue4m3": fit(), "ue5m3": fit()}, R),
    ({"ue4m3": fit(resolved=0.02, max_z=5.0), "ue5m3": fit()}, R),  # both limits are inclusive
    ({"ue4m3": fit(max_relative_error=0.5), "ue5m3": fit()}, R),  # unresolved points only count via z
    ({"ue4m3": fit(), "ue5m3": fit(max_z=5.5)}, P),
    ({"ue4m3": fit(resolved=0.0201), "ue5m3": fit()}, P),
    ({"ue4m3": fit(resolved=0.03), "ue5m3": fit(max_z=6.0)}, N),
    ({}, T),
])
def test_theory_matches_simulation(fits, expected):
    claim = theory(validation_result(fits=fits))["theory_matches_simulation"]
    assert claim.verdict == expected


def test_theory_matches_simulation_threshold_is_configurable():
    fits = {"ue4m3": fit(resolved=0.03)}
    assert theory(validation_result(fits=fits))["theory_matches_simulation"].verdict == N
    loose = {**THRESHOLDS, "relative_error": 0.05}
    claim = theory(validation_result(fits=fits), loose)["theory_matches_simulation"]
    assert claim.verdict == R
    assert claim.rule.startswith("reproduced iff |theory/simulation - 1| <= 5% at every simulated")


def test_theory_matches_simulation_measured():
    claim = theory(validation_result(fits={"ue4m3": fit(), "ue5m3": fit(resolved=0.005, max_z=1.25, chi2=4e-8)}))[
        "theory_matches_simulation"]
    assert claim.measured == (
        "UE4M3: largest relative error 1.50% over the 3 of 4 points the simulation resolves (all points: 25.00%, at "
        "most 2.0 standard errors), chi2 3.1e-08; UE5M3: largest relative error 0.50% over the 3 of 4 points the "
        "simulation resolves (all points: 25.00%, at most 1.2 standard errors), chi2 4.0e-08")
    assert claim.rule.startswith("reproduced iff |theory/simulation - 1| <= 2% at every simulated")


def test_theory_matches_simulation_without_resolved_points():
    fits = {"ue4m3": fit(), "ue5m3": fit(resolved=None, resolved_points=0)}
    assert theory(validation_result(fits=fits))["theory_matches_simulation"].verdict == P


# ------------------------------------------------------------------------------------ zero_blocks_drive_reversal
@pytest.mark.parametrize(("crossovers", "expected"), [
    ([crossover_row("ue4m3", 4, 0.024, 0.75), crossover_row("ue4m3", 8, 0.019, 0.625)], R),
    ([crossover_row("ue4m3", 4, 0.024, 0.75), crossover_row("ue4m3", 8, 0.019, 0.5)], P),  # half is not more
    ([crossover_row("ue4m3", 4, 0.024, 0.094), crossover_row("ue4m3", 8, 0.019, 0.0026)], N),
    ([crossover_row("ue4m3", 4, None), crossover_row("ue5m3", 4, 9.4e-5, 0.75)], T),  # UE4M3 without drivers
    ([crossover_row("ue5m3", 4, 9.4e-5, 0.0)], T),  # only UE4M3 counts
    ([crossover_row("ue4m3", 4, 0.024, 0.75), crossover_row("ue5m3", 4, 9.4e-5, 0.0)], R),
])
def test_zero_blocks_drive_reversal(crossovers, expected):
    claim = theory(validation_result(crossovers=crossovers))["zero_blocks_drive_reversal"]
    assert claim.verdict == expected


def test_zero_blocks_drive_reversal_measured():
    claims = theory(validation_result(crossovers=[crossover_row("ue4m3", 4, 0.024, 0.75)]))
    assert claims["zero_blocks_drive_reversal"].measured == (
        "n=4 vs 8 at sigma 0.02: zero blocks 75%, max element 12%, non-max 12% of MSE(n) - MSE(2n)")
    assert theory(validation_result())["zero_blocks_drive_reversal"].measured == "no UE4M3 crossover"


# ---------------------------------------------------------------------------------------- zero_block_probability
def test_zero_block_probability_reproduced_by_the_real_theory():
    claim = theory(validation_result(zero_block=zero_rows()))["zero_block_probability"]
    assert claim.verdict == R
    assert claim.measured == ("n=4: theory 0.33, simulation 0.33, n=8: theory 0.11, simulation 0.11, n=16: theory "
                              "0.012, simulation 0.012, n=32: theory 0.00015, simulation 0.00015")


def four_se(n):
    t = zero_block_probability(0.005, n)
    return 4 * math.sqrt(t * (1 - t) / (2**20 / n))


@pytest.mark.parametrize(("rows", "expected"), [
    (lambda: zero_rows({4: 0.99 * four_se(4), 32: -0.99 * four_se(32)}), R),
    (lambda: zero_rows({4: 1.01 * four_se(4)}), P),  # simulation beyond 4 standard errors
    (lambda: zero_rows(theory_of=lambda n: 2 * PAPER[n]), N),  # theory not the paper's numbers
    (lambda: zero_rows(theory_of=lambda n: PAPER[n] * 1.01), R),  # 0.3333, 0.1111, 0.01212, 1.515e-4: 2 digits
    (lambda: zero_rows(theory_of=lambda n: PAPER[n] * 1.04), P),  # 0.3432 -> 0.34 and 1.56e-4 -> 0.00016 differ
    (lambda: [r for r in zero_rows() if r["paper"] is None], T),
    (lambda: [], T),
])
def test_zero_block_probability(rows, expected):
    claim = theory(validation_result(zero_block=rows()))["zero_block_probability"]
    assert claim.verdict == expected


# -------------------------------------------------------------------------------------------------------- tensors
NARROW, WIDE = 2**-8, 2**-5  # sigma 0.0039 and 0.031: binary fractions, so 1.5 x ratios are exact
UE5_CROSSOVER = [crossover_row("ue5m3", 8, 7.6e-5), crossover_row("ue5m3", 16, 0.5)]  # block 16 ignored


def tensors_claims(cells, crossovers=UE5_CROSSOVER):
    claims = tensor_claims(cells, validation_result(crossovers=crossovers), ["t/base.json", "t/minilm.json"])
    assert [c.id for c in claims] == TENSOR_IDS
    assert all(c.evidence == ("t/base.json", "t/minilm.json") for c in claims)
    return {c.id: c for c in claims}


def planted(ue5_narrow_inverts=False):
    """base: a narrow tensor that inverts with UE4M3 (as predicted), a wide one that does not; minilm: wide."""
    return [tensor_summary("base", [("a.weight", "ue4m3", NARROW, True, True),
                                    ("a.weight", "ue5m3", NARROW, ue5_narrow_inverts, False),
                                    ("b.weight", "ue4m3", WIDE, False, False),
                                    ("b.weight", "ue5m3", WIDE, False, False)]),
            tensor_summary("minilm", [("c.weight", "ue4m3", 2 * WIDE, False, False)])]


def test_tensor_claims_reproduced():
    claims = tensors_claims(planted())
    assert {cid: c.verdict for cid, c in claims.items()} == dict.fromkeys(TENSOR_IDS, R)
    assert claims["narrow_tensors_invert"].measured == (
        "1 of 3 tensors invert (MSE at block 8 > block 16) with UE4M3; sigma of inverting tensors [0.00391, "
        "0.00391], of the others [0.0312, 0.0625]; theory predicts the measured behaviour for 3 of 3")
    assert claims["ue5m3_removes_tensor_inversion"].measured == (
        "0 of 2 tensors invert with UE5M3; theory's UE5M3 crossover at block 8: sigma 7.6e-05 vs the narrowest "
        "tensor's 0.0039")


def tensor_rows(*specs):
    """One cell from (std, inverts, predicted_inverts) UE4M3 tensors."""
    return [tensor_summary("m", [(f"t{i}.weight", "ue4m3", std, inv, pred)
                                 for i, (std, inv, pred) in enumerate(specs)])]


@pytest.mark.parametrize(("cells", "expected"), [
    (tensor_rows((NARROW, True, True), (WIDE, False, False)), R),
    (tensor_rows((1.5 * NARROW, True, True), (NARROW, False, False)), P),  # inverting not < 1.5 x steady
    (tensor_rows((1.5 * NARROW - 2**-20, True, True), (NARROW, False, False)), R),  # slightly wider is fine
    # 9 of 10 predicted: >= 90%
    (tensor_rows((NARROW, True, False), *[(WIDE, False, False)] * 9), R),
    (tensor_rows((NARROW, True, False), (NARROW, True, False), *[(WIDE, False, False)] * 8), P),  # 8 of 10
    (tensor_rows((WIDE, True, False), (NARROW, False, True)), N),  # the wide one inverts, unpredicted
    (tensor_rows((NARROW, False, False), (WIDE, False, False)), T),  # nothing inverts
    (tensor_rows((NARROW, True, True), (WIDE, True, True)), T),  # everything inverts
    ([], T),
])
def test_narrow_tensors_invert(cells, expected):
    assert tensors_claims(cells)["narrow_tensors_invert"].verdict == expected


def test_only_ue4m3_tensors_decide_the_narrow_claim():
    cells = [tensor_summary("m", [("a", "ue5m3", NARROW, True, True), ("b", "ue5m3", WIDE, False, False)])]
    assert tensors_claims(cells)["narrow_tensors_invert"].verdict == T


@pytest.mark.parametrize(("cells", "crossovers", "expected"), [
    (planted(), UE5_CROSSOVER, R),
    (planted(), [], R),  # no UE5M3 crossover at block 8: the measurement alone decides
    (planted(ue5_narrow_inverts=True), UE5_CROSSOVER, P),
    (planted(), [crossover_row("ue5m3", 8, 0.01)], P),  # crossover above the narrowest tensor
    (planted(), [crossover_row("ue5m3", 8, NARROW)], P),  # at it: not below
    (planted(ue5_narrow_inverts=True), [crossover_row("ue5m3", 8, 0.01)], N),
    (tensor_rows((NARROW, True, True)), [], T),  # no UE5M3 tensors, no crossover
    (tensor_rows((NARROW, True, True)), [crossover_row("ue5m3", 8, 0.01)], N),  # theory alone
    (tensor_rows((NARROW, True, True)), [crossover_row("ue4m3", 8, 1e-3)], T),  # UE4M3 crossovers do not count
])
def test_ue5m3_removes_tensor_inversion(cells, crossovers, expected):
    assert tensors_claims(cells, crossovers)["ue5m3_removes_tensor_inversion"].verdict == expected


def test_tensor_claims_without_tensors_are_not_testable():
    claims = tensors_claims([], [])
    assert claims["narrow_tensors_invert"].measured == (
        "0 of 0 tensors invert (MSE at block None > block None) with UE4M3; sigma of inverting tensors none, of "
        "the others none; theory predicts the measured behaviour for 0 of 0")
    assert claims["ue5m3_removes_tensor_inversion"].measured == (
        "0 of 0 tensors invert with UE5M3; theory's UE5M3 crossover at block None: sigma nan vs the narrowest "
        "tensor's nan")


# ---------------------------------------------------------------------------------------------------- perplexity
INVERTED = {4: 0.5, 8: 0.25, 16: 0.375}  # UE4M3 on a narrow model: block 4 is the worst
FINER = {4: 0.25, 8: 0.375, 16: 0.5}  # finer is better


def models(*summaries, cells=None, thresholds=THRESHOLDS):
    cells = planted() if cells is None else cells
    claims = model_claims(list(summaries), cells, validation_result(), thresholds, ["m/base.json", "t/base.json"])
    assert [c.id for c in claims] == MODEL_IDS
    assert all(c.evidence == ("m/base.json", "t/base.json") for c in claims)
    return {c.id: c for c in claims}


def test_model_claims_reproduced():
    claims = models(gap_summary("base", {"ue4m3": INVERTED, "ue4m3s": {4: 0.25, 8: 0.25, 16: 0.375},
                                         "ue5m3": {4: 0.125, 8: 0.25, 16: 0.375}}),
                    gap_summary("minilm", {"ue4m3": FINER, "ue4m3s": FINER, "ue5m3": FINER}))
    assert {cid: c.verdict for cid, c in claims.items()} == dict.fromkeys(MODEL_IDS, R)
    assert claims["perplexity_inversion"].measured == (
        "base: UE4M3 gap inverts (block 4: 0.500, best block 8: 0.250); 1 of 2 weight tensors invert (median "
        "sigma 0.0312); minilm: UE4M3 gap does not invert (block 4: 0.250, best block 4: 0.250); 0 of 1 weight "
        "tensors invert (median sigma 0.0625)")
    assert claims["ue5m3_removes_perplexity_inversion"].measured == (
        "base: UE5M3 gap at block 4 0.125 vs UE4M3 0.500, UE5M3 does not invert; minilm: UE5M3 gap at block 4 "
        "0.250 vs UE4M3 0.250, UE5M3 does not invert")
    assert claims["ue5m3_matches_ue4m3s"].measured == (
        "base: UE5M3 <= UE4M3-S at 3 of 3 block sizes; minilm: UE5M3 <= UE4M3-S at 3 of 3 block sizes")


@pytest.mark.parametrize(("base", "minilm", "expected"), [
    (INVERTED, FINER, R),
    (INVERTED, INVERTED, P),  # minilm's tensors do not invert, its gap does
    (FINER, FINER, P),  # base's narrow tensor inverts, its gap does not
    (FINER, INVERTED, N),
])
def test_perplexity_inversion(base, minilm, expected):
    claims = models(gap_summary("base", {"ue4m3": base}), gap_summary("minilm", {"ue4m3": minilm}))
    assert claims["perplexity_inversion"].verdict == expected


def test_perplexity_inversion_needs_a_tensor_study_of_the_model():
    claims = models(gap_summary("smollm2", {"ue4m3": INVERTED}))
    assert claims["perplexity_inversion"].verdict == T
    assert claims["perplexity_inversion"].measured.endswith("0 of 0 weight tensors invert (median sigma n/a)")
    assert models(cells=[])["perplexity_inversion"].verdict == T


def test_perplexity_inversion_without_ue4m3_rows():
    claims = models(gap_summary("base", {"ue5m3": FINER}))
    assert claims["perplexity_inversion"].verdict == T


@pytest.mark.parametrize(("ue5", "ue4", "expected"), [
    (FINER, INVERTED, R),
    ({4: 0.5, 8: 0.375, 16: 0.5}, INVERTED, N),  # UE5M3 itself inverts
    ({4: 0.5, 8: 0.5, 16: 0.5}, INVERTED, R),  # ties at block 4 with UE4M3: within the tolerance
    ({4: 0.5 * 1.02 + 1e-9, 8: 0.6, 16: 0.6}, INVERTED, N),  # worse than UE4M3 at block 4 beyond 2%
    ({4: 0.5 * 1.02 - 1e-9, 8: 0.6, 16: 0.6}, INVERTED, R),
])
def test_ue5m3_removes_perplexity_inversion(ue5, ue4, expected):
    claims = models(gap_summary("base", {"ue4m3": ue4, "ue5m3": ue5}))
    assert claims["ue5m3_removes_perplexity_inversion"].verdict == expected


def test_ue5m3_removes_perplexity_inversion_partly_and_untested():
    claims = models(gap_summary("base", {"ue4m3": INVERTED, "ue5m3": FINER}),
                    gap_summary("minilm", {"ue4m3": FINER, "ue5m3": INVERTED}))
    assert claims["ue5m3_removes_perplexity_inversion"].verdict == P
    claims = models(gap_summary("base", {"ue4m3": INVERTED, "ue4m3s": FINER}))
    assert claims["ue5m3_removes_perplexity_inversion"].verdict == T
    assert claims["ue5m3_removes_perplexity_inversion"].measured == ""


@pytest.mark.parametrize(("ue5", "ue4s", "expected"), [
    ({4: 0.25, 8: 0.25}, {4: 0.25, 8: 0.5}, R),  # a tie counts
    ({4: 0.25, 8: 0.5}, {4: 0.25, 8: 0.25}, P),  # worse at block 8
    ({4: 0.5, 8: 0.5}, {4: 0.25, 8: 0.25}, N),
    ({4: 0.51, 8: 0.255}, {4: 0.5, 8: 0.25}, R),  # within 2% of the larger gap
    ({4: 0.25, 8: 0.5, 16: 0.125}, {4: 0.25, 32: 0.125}, R),  # only the common block sizes
    ({4: 0.25}, {8: 0.25}, T),
    ({4: 0.25}, {}, T),
])
def test_ue5m3_matches_ue4m3s(ue5, ue4s, expected):
    claims = models(gap_summary("base", {"ue4m3": INVERTED, "ue4m3s": ue4s, "ue5m3": ue5}))
    assert claims["ue5m3_matches_ue4m3s"].verdict == expected


def test_gap_tolerance_is_configurable():
    summary = gap_summary("base", {"ue4m3": {4: 0.3, 8: 0.25}, "ue4m3s": {4: 0.25}, "ue5m3": {4: 0.3}})
    strict = models(summary)
    assert (strict["perplexity_inversion"].verdict, strict["ue5m3_matches_ue4m3s"].verdict) == (R, N)
    loose = models(summary, thresholds={**THRESHOLDS, "gap_tolerance": 0.25})
    # 0.3 is not above 0.25 + 25%: no inversion, though base's narrow tensor inverts
    assert (loose["perplexity_inversion"].verdict, loose["ue5m3_matches_ue4m3s"].verdict) == (N, R)
    assert "(within 25%)" in loose["ue5m3_matches_ue4m3s"].rule


def test_ue5m3_matches_ue4m3s_tie_without_tolerance():
    exact = {**THRESHOLDS, "gap_tolerance": 0.0}
    ue4s = {4: 0.25, 8: 0.5}
    tie = models(gap_summary("base", {"ue4m3": INVERTED, "ue4m3s": ue4s, "ue5m3": {4: 0.25, 8: 0.5}}),
                 thresholds=exact)
    assert tie["ue5m3_matches_ue4m3s"].verdict == R
    worse = models(gap_summary("base", {"ue4m3": INVERTED, "ue4m3s": ue4s, "ue5m3": {4: 0.25 + 2**-30, 8: 0.5}}),
                   thresholds=exact)
    assert worse["ue5m3_matches_ue4m3s"].verdict == P
