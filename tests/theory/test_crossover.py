"""crossover and best_block_size: the small-block reversal located by the theory and confirmed by Monte Carlo."""

import pytest
from theory_testing import mc_mse, normal_draw

from common.theory import best_block_size, block_mse, crossover

SIZES = (4, 8, 16, 32, 64, 128, 256)


@pytest.fixture(scope="module")
def z20():
    return normal_draw(1 << 20)


def relative_difference(mse_n: float, mse_2n: float) -> float:
    return (mse_n - mse_2n) / (mse_n + mse_2n)


@pytest.mark.parametrize(("n", "scale", "rule"), [
    (4, "ue4m3", "absmax"), (16, "ue4m3", "absmax"), (64, "ue4m3", "absmax"), (16, "ue4m3", "prevent_zero"),
    (16, "ue5m3", "absmax"),
])
def test_crossover_is_a_sign_change_in_monte_carlo(z20, n, scale, rule):
    """10% above the crossover block size n beats 2n, 10% below it loses, in simulation (same draw for both)."""
    sigma = crossover(n, scale=scale, rule=rule)
    assert sigma is not None
    for factor, sign in ((1.1, -1), (0.9, 1)):
        x = z20 * (sigma * factor)
        mc = relative_difference(mc_mse(x, n, scale=scale, rule=rule)[0], mc_mse(x, 2 * n, scale=scale, rule=rule)[0])
        theory = relative_difference(block_mse(sigma * factor, n, scale=scale, rule=rule)["total"],
                                     block_mse(sigma * factor, 2 * n, scale=scale, rule=rule)["total"])
        assert sign * mc > 0.001, (factor, mc)
        assert mc == pytest.approx(theory, abs=0.002)
    at = [block_mse(sigma, size, scale=scale, rule=rule)["total"] for size in (n, 2 * n)]
    assert at[0] == pytest.approx(at[1], rel=1e-8)


def test_crossover_positions():
    ue4m3 = [crossover(n) for n in SIZES[:-1]]
    assert all(0.005 < c < 0.03 for c in ue4m3)
    assert ue4m3 == sorted(ue4m3, reverse=True)  # larger blocks reverse at narrower distributions
    # UE5M3's grid below 2^-6 is UE4M3's times 2^-8: the same reversal, 256 times lower in sigma
    assert crossover(16, scale="ue5m3") == pytest.approx(ue4m3[2] / 256, rel=1e-8)
    # the first reversal is not the zero blocks' doing: keeping every scale positive barely moves it
    assert crossover(16, rule="prevent_zero") == pytest.approx(ue4m3[2], rel=1e-6)
    assert crossover(4, rule="prevent_zero") == pytest.approx(ue4m3[0], rel=0.01)


def test_no_crossover_in_a_range_without_one():
    assert crossover(16, sigma_range=(0.05, 10.0)) is None  # finer is better everywhere up there
    assert crossover(16, sigma_range=(1e-6, 1e-3)) is None  # every block is flushed: the sizes tie


def test_best_block_size():
    assert best_block_size(0.1, SIZES) == 4  # wide distribution: finer is better
    best = best_block_size(0.003, SIZES)
    assert best >= 64  # narrow: small blocks flush to zero
    totals = {n: block_mse(0.003, n)["total"] for n in SIZES}
    assert totals[best] == min(totals.values())
    assert best_block_size(0.003, SIZES, scale="ue5m3") == 4  # UE5M3 removes the reversal at this sigma


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"sigma_range .* got \(1.0, 0.1\)"):
        crossover(16, sigma_range=(1.0, 0.1))
    with pytest.raises(ValueError, match=r"got \(0.0, 1.0\)"):
        crossover(16, sigma_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="block_size=0"):
        crossover(0)
    with pytest.raises(ValueError, match=r"block_sizes .* got \[\]"):
        best_block_size(0.01, [])
    with pytest.raises(ValueError, match="block_size=-4"):
        best_block_size(0.01, [4, -4])
