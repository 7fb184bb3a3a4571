"""block_mse against Monte Carlo (quantize_blocks on seeded Normal samples) on the sigma x block-size grid.

Tolerance: ``|theory - mc| <= max(2% of mc, 4 standard errors)`` (:func:`theory_testing.within`). The standard
error comes from the per-block sums of squared errors. Where zero-scale blocks are rare but present (UE4M3
around sigma = 2e-3..4e-3 with large blocks, UE5M3 near 1e-5) one flushed block weighs as much as hundreds of
ordinary ones, the per-block error is heavy-tailed and a Monte Carlo estimate cannot resolve 2% (its standard
error reaches 10% at 2^18 samples): there the bound is 4 standard errors. Everywhere else it is 2%; the theory
itself is exact to ~1e-14 (test_block_mse: the nested-quad oracle).

The fast test runs every fifth sigma of the 41-point grid (9 sigmas) for block sizes 4, 32, 256 with 2^18
samples; the slow test runs the full grid (41 sigmas x 7 block sizes x UE4M3/UE5M3 x absmax/prevent_zero) with
2^20 samples, as the issue asks. prevent_zero changes only zero scales, so where the abs-max run has none its
Monte Carlo result is reused (bit-identical).
"""

import numpy as np
import pytest
from theory_testing import mc_mse, normal_draw, within

from common.analysis import block_stats, sigma_grid
from common.theory import block_mse

SCALES = ("ue4m3", "ue5m3")


def compare_grid(samples: int, sigmas: np.ndarray, block_sizes: tuple[int, ...]) -> list[dict]:
    z = normal_draw(samples)
    rows = []
    for scale in SCALES:
        for n in block_sizes:
            for sigma in sigmas:
                x = z * float(sigma)
                absmax = mc_mse(x, n, scale=scale)
                results = {"absmax": absmax,
                           "prevent_zero": absmax if absmax[2] == 0 else mc_mse(x, n, scale=scale, rule="prevent_zero")}
                for rule, (mc, se, _) in results.items():
                    theory = block_mse(float(sigma), n, scale=scale, rule=rule)["total"]
                    rows.append({"scale": scale, "rule": rule, "n": n, "sigma": float(sigma), "theory": theory,
                                 "mc": mc, "se": se, "error": abs(theory / mc - 1)})
    return rows


def check(rows: list[dict]) -> None:
    bad = [row for row in rows if not within(row["theory"], row["mc"], row["se"])]
    assert not bad, bad[:5]
    resolved = [row["error"] for row in rows if row["se"] < 0.005 * row["mc"]]  # MC resolves 2%
    assert max(resolved) <= 0.02


def test_mc_helper_is_block_stats():
    z = normal_draw(1 << 16)
    for rule in ("absmax", "prevent_zero"):
        assert mc_mse(z * 0.003, 16, rule=rule)[0] == pytest.approx(
            block_stats(0.003, 16, z=z, prevent_zero=rule == "prevent_zero")["mse"], rel=1e-12)


def test_against_monte_carlo_fast():
    rows = compare_grid(1 << 18, sigma_grid()[::5], (4, 32, 256))
    assert len(rows) == 9 * 3 * 2 * 2
    check(rows)


@pytest.mark.slow
def test_against_monte_carlo_full_grid():
    rows = compare_grid(1 << 20, sigma_grid(), (4, 8, 16, 32, 64, 128, 256))
    assert len(rows) == 41 * 7 * 2 * 2
    check(rows)
    strict = sum(row["error"] <= 0.02 for row in rows)
    print(f"\n{strict}/{len(rows)} points within 2%; max relative error {max(r['error'] for r in rows):.4f}")
