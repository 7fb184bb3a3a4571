"""The regime card: the config's theory numbers pinned against the paper's model, and our values measured from
planted sweep artifacts (every quantity, no crossover, no point, no reference cell)."""

import pytest
from msl_testing import (
    WINDOW_TOKENS,
    WINDOWS,
    ppl_record,
    raw_config,
    sweep_models,
    sweep_tensor_cell,
)

from common.report.regime import regime_specs
from common.theory import crossover
from papers.microscaling_limits.regime import regime_card, regime_values
from papers.microscaling_limits.sweep import sweep_points

REGIME = raw_config()["regime"]
SPECS = regime_specs(REGIME)
MODELS = sweep_models([1.0, 0.5, 0.25])
SIGMAS = (0.04, 0.02, 0.01)
CELLS = ("unquantized", "e2m1-ue4m3-b16-weights", "e2m1-ue4m3-b32-weights", "e2m1-ue5m3-b8-weights")


def prereg(star=0.016, exact=0.0162):
    return {"pair": [16, 32], "block_size": 16, "crossover_paper": {"ue4m3": star, "ue5m3": None},
            "crossover": {"ue4m3": exact, "ue5m3": None}}


@pytest.fixture(scope="module")
def points():
    return sweep_points(MODELS, [sweep_tensor_cell(m["model"], s) for m, s in zip(MODELS, SIGMAS, strict=True)])


def sweep_records(cells=CELLS):
    return [ppl_record(m["model"], c) for m in MODELS for c in cells]


def test_the_config_s_theory_numbers_are_the_paper_model_s():
    star = {n: crossover(n, "e2m1", "ue4m3", model="paper") for n in (8, 16, 32)}
    assert star[16] == pytest.approx(0.01583, abs=1e-5)
    assert SPECS["narrowest_sigma"].paper == (round(star[32] / star[16], 2), 1.0) == (0.81, 1.0)
    assert SPECS["widest_sigma"].paper == (round(star[8] / star[16], 2), round(0.04 / star[16], 2)) == (1.21, 2.53)
    assert SPECS["narrowest_sigma"].bounds == (None, 1.0)
    assert SPECS["widest_sigma"].bounds == (1.0, None)


def test_values_of_a_planted_sweep(points):
    measured, notes = regime_values(points, prereg(), sweep_records())
    assert measured == pytest.approx({"narrowest_sigma": 0.01 / 0.016, "widest_sigma": 0.04 / 0.016,
                                      "sequence_length": WINDOW_TOKENS / 2048,
                                      "evaluated_tokens": WINDOWS * WINDOW_TOKENS / 2048, "block_pair": 16,
                                      "smallest_block": 8})
    assert notes["narrowest_sigma"] == notes["widest_sigma"] == (
        "sigma* = 0.016, the paper's model's UE4M3 crossover of blocks 16 vs 32 (ours, 0.0162); per point: "
        "c=1 2.5, c=0.5 1.25, c=0.25 0.625")
    assert notes["sequence_length"] == "16 tokens, stride 16"
    assert notes["evaluated_tokens"] == "1024 tokens scored by every sweep cell"
    assert notes["smallest_block"] == "the sweep's blocks 8, 16, 32"
    rows = {r.spec.id: r for r in regime_card(REGIME, points, prereg(), sweep_records())}
    assert {i: r.inside for i, r in rows.items()} == {"narrowest_sigma": True, "widest_sigma": True,
                                                     "sequence_length": False, "evaluated_tokens": False,
                                                     "block_pair": True, "smallest_block": True}


def test_no_crossover_or_no_point_measures_no_sigma(points):
    measured, notes = regime_values(points, prereg(star=None, exact=None), sweep_records())
    assert measured["narrowest_sigma"] is measured["widest_sigma"] is None
    assert notes["widest_sigma"] == "the paper's model has no UE4M3 crossover of blocks 16 vs 32"
    measured, notes = regime_values([], prereg(), sweep_records())
    assert measured["narrowest_sigma"] is None
    assert notes["narrowest_sigma"] == "no sweep point"
    assert not {r.spec.id: r for r in regime_card(REGIME, [], prereg(), sweep_records())}["narrowest_sigma"].inside


def test_the_reference_cell_is_needed_and_quantized_cells_give_the_blocks(points):
    with pytest.raises(ValueError, match="no 'unquantized' perplexity cell among the 3 sweep records"):
        regime_values(points, prereg(), sweep_records(CELLS[1:2]))
    measured, notes = regime_values(points, prereg(), sweep_records(CELLS[:1]))
    assert measured["smallest_block"] is None
    assert notes["smallest_block"] == "no quantized sweep cell"
