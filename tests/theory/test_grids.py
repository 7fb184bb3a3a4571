"""Quantizers as step functions: Q_S against common.formats.round_to_format on every rounding boundary; cells; rules."""

import math

import numpy as np
import pytest
import torch

from common.formats import FORMATS, round_to_format
from common.formats.spec import Family
from common.scaling import round_scale
from common.theory import element_cells, quantize_scale, scale_steps, zero_scale_max

SCALE_FORMATS = [name for name, fmt in FORMATS.items() if fmt.is_codebook and (fmt.finite_values > 0).sum() > 1]


@pytest.mark.parametrize("scale", SCALE_FORMATS)
def test_quantize_scale_matches_quantize_at_every_boundary(scale):
    v = FORMATS[scale].finite_values
    v = v[v >= 0]
    mids = (v[:-1] + v[1:]) / 2
    below = np.nextafter(mids.astype(np.float32), np.float32(0))
    above = np.nextafter(mids.astype(np.float32), np.float32(np.inf))
    beyond = np.array([0.0, v[-1] * 1.5, v[-1] * 1e3])
    raw = np.concatenate((v, mids, below, above, beyond[beyond < np.finfo(np.float32).max])).astype(np.float32)
    expected = round_to_format(torch.from_numpy(raw), scale, rounding="rne").double().numpy()
    np.testing.assert_array_equal(quantize_scale(raw.astype(np.float64), scale), expected)


@pytest.mark.parametrize("scale", ["ue4m3", "ue5m3", "e8m0", "e4m3"])
def test_scale_steps_reproduce_the_absmax_rule(scale):
    """s(M) read off the steps equals quantize_blocks' abs-max scale for block maxes across the whole range."""
    steps = scale_steps(scale, "e2m1")
    grid = np.exp(np.linspace(math.log(1e-8), math.log(1e6), 20001))
    m = grid[np.all(np.abs(grid[:, None] / steps.bounds[None, :] - 1) > 1e-6, axis=1)]  # off the steps
    from_steps = steps.values[np.searchsorted(steps.bounds, m, side="right")]
    actual = round_scale(torch.from_numpy(m).float() / 6.0, FORMATS[scale], prevent_zero=False).double().numpy()
    np.testing.assert_array_equal(from_steps, actual)


def test_ue4m3_steps_and_zero_threshold():
    steps = scale_steps("ue4m3", "e2m1")
    assert steps.zero_max == 3 * 2.0**-9 == zero_scale_max("ue4m3")  # top * 2^-10: the fact sheet's t
    assert steps.values[0] == 0.0
    assert steps.values[1] == 2.0**-9
    assert steps.values[-1] == 448.0
    assert steps.bounds[-1] == 6 * 432.0
    pz = scale_steps("ue4m3", "e2m1", "prevent_zero")
    assert pz.zero_max is None
    assert pz.values[0] == 2.0**-9
    assert zero_scale_max("ue5m3") == 3 * 2.0**-17
    assert zero_scale_max("e8m0") is None  # no zero scale: no block can be flushed


def test_element_cells_of_e2m1_and_int4():
    cells = element_cells("e2m1")
    np.testing.assert_array_equal(cells.q, [0, 0.5, 1, 1.5, 2, 3, 4, 6])
    np.testing.assert_array_equal(cells.mids, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5])
    np.testing.assert_array_equal(cells.lowers, [0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5])
    assert cells.top == 6.0
    assert element_cells("int4").top == 7.0
    assert element_cells("binary").q.tolist() == [1.0]


def test_bad_formats_and_rules():
    with pytest.raises(ValueError, match="'four_over_six' is not tractable"):
        scale_steps("ue4m3", "e2m1", "four_over_six")
    with pytest.raises(ValueError, match="'brute_force' is not tractable"):
        scale_steps("ue4m3", "e2m1", "brute_force")
    with pytest.raises(ValueError, match="unknown rule 'e8m0_floor' for the theory"):
        scale_steps("e8m0", "e2m1", "e8m0_floor")
    with pytest.raises(ValueError, match="'bf16' has 16 bits"):
        scale_steps("bf16", "e2m1")
    with pytest.raises(ValueError, match="element format 'ue4m3' is unsigned"):
        element_cells("ue4m3")
    assert FORMATS["ue4m3"].family is Family.FLOAT


def test_two_s_complement_element_grids_are_refused():
    with pytest.raises(ValueError, match=r"element format 'int4_tc' is not symmetric \(lowest -8, max 7\)"):
        element_cells("int4_tc")
