"""The regime card: sigma* from the theory, the config's theory numbers pinned against it, our values measured from
planted point summaries (every quantity, the Region B point chosen by its bounds, several tokenizers, no points)."""

import pytest
from fib_testing import CONFIG, point_summary
from scipy.optimize import brentq

from common.report.regime import regime_specs
from common.theory import crossover, zero_block_probability
from papers.finer_is_better import regime
from papers.finer_is_better.regime import REGION_B, regime_card, regime_values, reversal_sigma

SPECS = regime_specs(CONFIG["regime"])
STAR = reversal_sigma("e2m1", [4, 16])
CELL = {("ue4m3", "absmax", 4): 0.02, ("ue4m3", "absmax", 16): 0.02}


def points(*ratios, windows=None):
    """Point summaries ``small-c<r>`` of sigma ``r * sigma*`` (32 windows of 100 scored tokens)."""
    out = [point_summary(f"small-c{r:g}", r * STAR, CELL, operands=("w",)) for r in ratios]
    for p, n in zip(out, windows or (), strict=False):
        p["window_tokens"] = [n] * len(p["window_tokens"])
    return out


def test_sigma_star_is_the_largest_crossover_of_the_blocks(monkeypatch):
    assert STAR == crossover(4, "e2m1", "ue4m3") == pytest.approx(0.02405, abs=1e-5)
    assert reversal_sigma("e2m1", [16, 64]) == crossover(16, "e2m1", "ue4m3")
    monkeypatch.setattr(regime, "crossover", lambda *args, **kwargs: None)
    with pytest.raises(ValueError, match=r"no UE4M3 crossover of n vs 2n for block sizes \[4, 16\]"):
        reversal_sigma("e2m1", [4, 16])


def test_the_config_s_theory_numbers_are_the_theory_s():
    crossovers = {n: crossover(n, "e2m1", "ue4m3") for n in (8, 16)}
    paper = (round(crossovers[16] / STAR, 2), round(crossovers[8] / STAR, 2))
    assert SPECS["narrowest_sigma"].paper == SPECS[REGION_B].paper == paper == (0.67, 0.81)
    assert SPECS["widest_sigma"].paper == (1.0, round(0.04 / STAR, 2))
    # Region B outside Region A: the bounds lie inside the theory's edges, within 0.01 of them
    edge_a = brentq(lambda s: zero_block_probability(s, 4, "e2m1", "ue4m3")
                    - CONFIG["regions"]["underflow_fraction"], 1e-3, 0.05, rtol=1e-12) / STAR
    top_b = crossover(4, "e2m1", "ue4m3", "prevent_zero") / STAR
    low, high = SPECS[REGION_B].bounds
    assert edge_a <= low < edge_a + 0.01
    assert top_b - 0.01 < high <= top_b
    assert SPECS["narrowest_sigma"].bounds == (None, high)


def test_values_of_a_planted_sweep():
    measured, notes = regime_values(SPECS, CONFIG, points(4.0, 0.7, 0.25), STAR)
    assert measured == pytest.approx({"narrowest_sigma": 0.25, REGION_B: 0.7, "widest_sigma": 4.0,
                                      "sequence_length": 0.125, "evaluated_tokens": 3200 / 2048, "smallest_block": 4,
                                      "largest_block": 32})
    assert notes["narrowest_sigma"] == (f"sigma* = {STAR:.4g}, the largest UE4M3 abs-max crossover of n vs 2n over "
                                        "blocks 4, 8, 16, 32; per point: small-c0.25 0.25, small-c0.7 0.7, small-c4 4")
    assert notes[REGION_B].startswith("small-c0.7, the point nearest Region B's middle; sigma* = ")
    assert notes["evaluated_tokens"] == "3200 tokens scored by each of the 3 points"
    assert notes["sequence_length"] == "256 tokens, stride 256, batch 8"
    rows = {r.spec.id: r for r in regime_card(CONFIG, points(4.0, 0.7, 0.25))}
    assert all(r.inside for r in rows.values() if r.spec.id != "sequence_length")
    assert not rows["sequence_length"].inside  # 256 tokens: only the paper-scale gap requires 2048


@pytest.mark.parametrize(("ratios", "chosen", "inside"), [
    ((0.59, 1.0), 1.0, False),   # neither in Region B: the nearer the middle (sqrt(0.6 * 0.99)) is still outside
    ((0.59, 0.99), 0.99, True),  # the top edge is inside
    ((0.6, 2.0), 0.6, True),     # the bottom edge too
    ((0.3, 0.5, 1.2), 0.5, False),
])
def test_the_region_b_point_is_inside_exactly_when_one_lies_in_region_b(ratios, chosen, inside):
    measured, _ = regime_values(SPECS, CONFIG, points(*ratios), STAR)
    assert measured[REGION_B] == pytest.approx(chosen, rel=1e-12)
    low, high = SPECS[REGION_B].bounds
    assert (low <= round(measured[REGION_B], 12) <= high) is inside  # r * sigma* / sigma* to 1e-12


def test_different_tokenizers_give_the_fewest_tokens():
    measured, notes = regime_values(SPECS, CONFIG, points(2.0, 0.5, windows=(120, 90)), STAR)
    assert measured["evaluated_tokens"] == 32 * 90 / 2048
    assert notes["evaluated_tokens"] == "the fewest; tokens per point: small-c0.5 2880, small-c2 3840"


def test_a_run_without_points_measures_no_sigma():
    measured, notes = regime_values(SPECS, CONFIG, [], STAR)
    assert {k: v for k, v in measured.items() if v is None} == dict.fromkeys(
        ("narrowest_sigma", REGION_B, "widest_sigma", "evaluated_tokens"))
    assert notes["widest_sigma"] == "no sweep point in this run"
    assert not {r.spec.id: r for r in regime_card(CONFIG, [])}["widest_sigma"].inside


def test_region_b_needs_two_edges():
    open_top = regime_specs({**CONFIG["regime"], REGION_B: {**CONFIG["regime"][REGION_B], "bounds": [0.6, None]}})
    with pytest.raises(ValueError, match=r"regime.region_b_sigma: its bounds must be Region B's two edges, got "
                                         r"\[0.6, None\]"):
        regime_values(open_top, CONFIG, points(1.0), STAR)
