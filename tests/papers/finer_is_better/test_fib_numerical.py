"""Numerical study: reversal excess, intervals and Regions A/B on planted curves; one real (tiny) cell."""

from pathlib import Path

import pandas as pd
import pytest
import yaml
from fib_testing import BLOCKS, GRID, REGION_A, REGION_B, THRESHOLDS, planted_cells

from common.analysis import block_stats, sigma_grid
from papers.finer_is_better.numerical import (
    claim_sigmas,
    curves,
    intervals,
    mse_table,
    numerical_cell,
    reference_sigmas,
    regions,
    reversal_excess,
    summary,
    table_from_summary,
)
from papers.finer_is_better.settings import profile_config

CONFIG = Path(__file__).resolve().parents[3] / "papers" / "finer_is_better" / "config.yaml"


@pytest.fixture(scope="module")
def table():
    return mse_table(planted_cells())


def test_mse_table_is_tidy_and_sorted(table):
    assert len(table) == 6 * len(BLOCKS) * len(GRID)
    assert list(table.columns) == ["scale", "variant", "block_size", "sigma", "mse", "relative_mse",
                                   "zero_scale_fraction", "floor_scale_fraction", "mse_standard_error"]
    first = table.iloc[0]
    assert (first["scale"], first["variant"], first["block_size"], first["sigma"]) == ("ue4m3", "absmax", 4, 1e-5)
    assert table["scale"].tolist() == sorted(table["scale"])
    with pytest.raises(ValueError, match="no numerical cells given"):
        mse_table([])


def test_curves_pivot_and_missing_setting(table):
    mse = curves(table, "ue4m3", "absmax")
    assert list(mse.columns) == [4, 8, 16]
    assert list(mse.index) == GRID
    assert tuple(mse.loc[1e-5]) == (3.0, 2.0, 4.0)
    zero = curves(table, "ue4m3", "absmax", "zero_scale_fraction")
    assert zero[4].tolist() == [1.0, 0.5, 0.02, 0.005, 0.01, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0]
    with pytest.raises(KeyError, match=r"no numerical cells for scale 'ue5m3', variant 'absmax'"):
        curves(table, "ue5m3", "absmax")


def test_reversal_excess_values(table):
    absmax = reversal_excess(table, "ue4m3", "absmax")
    assert list(absmax.index) == GRID
    # REVERSED 0.5; index 2 via MSE(8)/MSE(16) = 1.5; WITHIN 1/64; SLIGHT 1/32; NORMAL -0.5
    assert absmax.tolist() == [0.5, 0.5, 0.5, 0.5, 0.5, 0.015625, 0.03125, 0.03125, -0.5, 0.03125, -0.5]
    assert reversal_excess(table, "ue4m3", "four_over_six_pz").tolist() == [-0.5] * len(GRID)
    assert reversal_excess(table, "ue5m3", "four_over_six").tolist() == [0.5] * len(GRID)  # scale-specific
    brute = reversal_excess(table, "ue4m3", "brute_force")
    assert brute.tolist() == [0.0, *[-0.5] * (len(GRID) - 1)]


def test_reversal_excess_over_two_block_sizes_only():
    cells = [c for c in planted_cells() if c["block_size"] != 16]
    excess = reversal_excess(mse_table(cells), "ue4m3", "absmax")
    assert excess.tolist() == [0.5, 0.5, 1.0 / 6.0 - 1.0, 0.5, 0.5, 0.015625, 0.03125, 0.03125, -0.5, 0.03125, -0.5]


@pytest.mark.parametrize(("chosen", "expected"), [
    ([], []),
    (GRID, [(GRID[0], GRID[-1])]),
    ([GRID[3]], [(GRID[3], GRID[3])]),
    ([GRID[0], GRID[1], GRID[4], GRID[6], GRID[7], GRID[10]],
     [(GRID[0], GRID[1]), (GRID[4], GRID[4]), (GRID[6], GRID[7]), (GRID[10], GRID[10])]),
    ([GRID[7], GRID[2], GRID[8], GRID[1]], [(GRID[1], GRID[2]), (GRID[7], GRID[8])]),  # order does not matter
    ([GRID[5], 0.5], [(GRID[5], GRID[5])]),  # off-grid sigmas are ignored
])
def test_intervals(chosen, expected):
    assert intervals(chosen, GRID) == expected
    assert intervals(chosen, list(reversed(GRID))) == expected  # the grid is sorted first


def test_regions_find_exactly_the_planted_sigmas(table):
    found = regions(table, THRESHOLDS)
    assert found["A"]["sigmas"] == [GRID[i] for i in REGION_A]
    assert found["A"]["intervals"] == [(GRID[0], GRID[2]), (GRID[4], GRID[4])]
    assert found["B"]["sigmas"] == [GRID[i] for i in REGION_B]
    assert found["B"]["intervals"] == [(GRID[4], GRID[4]), (GRID[6], GRID[7]), (GRID[9], GRID[9])]
    assert found["A"]["rule"] == ("abs-max MSE(n) > (1 + 0.02) MSE(2n) for some consecutive n and >= 1% of its "
                                  "block-4 scales round to zero")
    assert found["B"]["rule"] == "prevent-zero MSE(n) > (1 + 0.02) MSE(2n) for some consecutive n"


def test_region_thresholds_move_the_regions(table):
    # a tolerance of 1/32 turns SLIGHT (excess exactly 1/32) into a tie: Region B vanishes, A is unchanged
    found = regions(table, {**THRESHOLDS, "reversal_tolerance": 0.03125})
    assert found["A"]["sigmas"] == [GRID[i] for i in REGION_A]
    assert found["B"]["sigmas"] == []
    assert found["B"]["intervals"] == []
    # a 0.5% underflow threshold admits index 3 (0.005) and joins A into one run
    found = regions(table, {**THRESHOLDS, "underflow_fraction": 0.005})
    assert found["A"]["intervals"] == [(GRID[0], GRID[4])]


def test_summary_and_back(table):
    data = summary(planted_cells(), THRESHOLDS)
    assert data["block_sizes"] == [4, 8, 16]
    assert data["wall_time_s"] == 0.25 * 18
    assert data["regions"] == regions(table, THRESHOLDS)
    assert data["claim_sigmas"] == {"sigma_A": 1e-2, "sigma_B": 3e-2}  # from the theory on GRID, not the cells
    pd.testing.assert_frame_equal(table_from_summary(data), table)


def test_claim_sigmas_on_the_default_grid_come_from_the_theory():
    # UE4M3 theory: abs-max MSE(4)/MSE(8) peaks (+167%) at 5.6e-3; outside Region A (P(s=0, n=4) < 1%) prevent-zero's
    # largest excess (+12%) sits at 1.78e-2
    sigmas = claim_sigmas(sigma_grid(1e-5, 1.0, 41), 0.01)
    assert sigmas == {"sigma_A": pytest.approx(10 ** -2.25), "sigma_B": pytest.approx(10 ** -1.75)}
    with pytest.raises(ValueError, match=r"no grid sigma has P\(scale = 0, n = 4\) < 0.01"):
        claim_sigmas([1e-5, 1e-4], 0.01)


def test_reference_sigmas():
    assert reference_sigmas(GRID, [1e-3, 1e-2, 1.0]) == [1e-3, 1e-2, 1.0]
    # log-nearest: 2e-3 is nearer 3e-3 (ratio 1.5) than 1e-3 (ratio 2); 1e-7 clamps to the grid's first point
    assert reference_sigmas(reversed(GRID), [2e-3, 1e-7, 1e3]) == [3e-3, 1e-5, 1.0]


@pytest.fixture(scope="module")
def tiny_config():
    raw = yaml.safe_load(CONFIG.read_text())["finer_is_better"]
    config = profile_config(raw, "smoke")
    config["numerical"] = {**config["numerical"], "samples": 4096, "sigma": {"low": 1e-5, "high": 1.0, "points": 3}}
    return config


@pytest.mark.parametrize(("variant", "zero_at_smallest_sigma"), [("absmax", 1.0), ("hierarchical_four_over_six", 0.0)])
def test_numerical_cell(tiny_config, variant, zero_at_smallest_sigma):
    cell = numerical_cell(tiny_config, f"e2m1-ue4m3-b8-{variant}")
    assert (cell["cell"], cell["element"], cell["scale"], cell["block_size"], cell["variant"]) == (
        f"e2m1-ue4m3-b8-{variant}", "e2m1", "ue4m3", 8, variant)
    assert (cell["samples"], cell["seed"]) == (4096, 0)
    assert len(cell["rows"]) == 3
    assert [r["sigma"] for r in cell["rows"]] == sigma_grid(1e-5, 1.0, 3).tolist()
    for row in cell["rows"]:
        assert row["relative_mse"] == row["mse"] / row["sigma"] ** 2
    assert cell["rows"][0]["zero_scale_fraction"] == zero_at_smallest_sigma
    options = cell["options"]
    assert cell["rows"][1] == block_stats(cell["rows"][1]["sigma"], 8, samples=4096, seed=0, **options)
    assert cell["wall_time_s"] > 0
