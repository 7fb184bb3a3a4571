"""Rounding "half_down" (ties toward zero, the Finer-is-Better authors' midpoint bucketing): every tie of the
small formats, a literal nearest-lower-tie oracle elsewhere, and the fast paths of BF16, integers and mid-rise."""

import numpy as np
import pytest
import torch

from common.formats import ROUNDINGS, get_format, round_to_format


def nearest_ties_toward_zero(x, fmt):
    """Literal oracle: the nearest non-negative grid point to |x| (a tie to the lower one), saturating at max, with
    the sign of x put back."""
    grid = fmt.finite_values[fmt.finite_values >= 0]
    a = np.minimum(np.abs(x), grid[-1])
    hi = np.clip(np.searchsorted(grid, a, side="left"), 1, grid.size - 1)
    lo_value, hi_value = grid[hi - 1], grid[hi]
    q = np.where(hi_value - a < a - lo_value, hi_value, lo_value)
    return np.copysign(q, x) if fmt.signed else q


def test_half_down_is_a_rounding():
    assert "half_down" in ROUNDINGS


def test_every_e2m1_tie_goes_to_the_smaller_magnitude():
    midpoints = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    x = torch.tensor(midpoints + [-m for m in midpoints])
    lower = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
    assert round_to_format(x, "e2m1", rounding="half_down").tolist() == lower + [-v for v in lower]
    assert round_to_format(x, "e2m1").tolist()[:7] == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]  # rne: where the two disagree


@pytest.mark.parametrize("name", ["e2m1", "e2m3", "e3m2", "e4m3", "ue5m3", "ue4m3", "e5m2"])
def test_half_down_equals_the_literal_oracle_on_ties_and_random_values(name):
    fmt = get_format(name)
    grid = fmt.finite_values[fmt.finite_values >= 0].astype(np.float64)
    ties = (grid[1:] + grid[:-1]) / 2
    g = np.random.default_rng(0)
    random = np.exp2(g.uniform(np.log2(fmt.min_subnormal) - 1, np.log2(fmt.max) + 1, 20000))
    magnitudes = np.concatenate([ties, np.nextafter(ties.astype(np.float32), np.float32(np.inf)), random])
    x = np.concatenate([magnitudes, -magnitudes]) if fmt.signed else magnitudes
    x = x.astype(np.float32).astype(np.float64)
    got = round_to_format(torch.from_numpy(x).float(), fmt, rounding="half_down").double().numpy()
    np.testing.assert_array_equal(got, nearest_ties_toward_zero(x, fmt))


def test_bf16_prefix_rounding_ties_toward_zero():
    """The float32-prefix path: 1 + 2^-8 lies midway between bf16 neighbours 1 and 1 + 2^-7."""
    x = torch.tensor([1 + 2**-8, -(1 + 2**-8), 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20])
    assert round_to_format(x, "bf16", rounding="half_down").tolist() == [1.0, -1.0, 1 + 2**-7, 1 + 2**-7]
    assert round_to_format(x, "bf16").tolist() == [1.0, -1.0, 1 + 2**-6, 1 + 2**-7]


def test_integer_and_midrise_ties_toward_zero():
    assert round_to_format(torch.tensor([2.5, -2.5, 0.5, 2.51]), "int4", rounding="half_down").tolist() == [2, -2, 0, 3]
    # mid-rise levels -3, -1, 1, 3: the even integers are ties; toward zero, 0 -> +1 as "away"
    assert round_to_format(torch.tensor([2.0, -2.0, 0.0, 2.1]), "midrise2", rounding="half_down").tolist() == [
        1.0, -1.0, 1.0, 3.0]
