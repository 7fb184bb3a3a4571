"""Property tests (hypothesis) of round_to_format over every format and both nearest roundings."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from common.formats import FORMATS, Family, get_format, round_to_format

NAMES = sorted(FORMATS)
ROUNDINGS = ["rne", "away"]


def finite_floats(fmt, scale=2.0):
    bound = float(np.float32(min(fmt.max * scale, 3.0e38)))
    return st.lists(st.floats(-bound, bound, width=32, allow_nan=False, allow_infinity=False), min_size=1,
                    max_size=64)


def tensor(values):
    return torch.tensor(values, dtype=torch.float32)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
@given(data=st.data())
def test_idempotent(name, rounding, data):
    fmt = get_format(name)
    x = tensor(data.draw(finite_floats(fmt)))
    once = round_to_format(x, fmt, rounding=rounding)
    assert torch.equal(round_to_format(once, fmt, rounding=rounding), once)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("rounding", ROUNDINGS)
@given(data=st.data())
def test_monotone(name, rounding, data):
    fmt = get_format(name)
    x = tensor(sorted(data.draw(finite_floats(fmt))))
    q = round_to_format(x, fmt, rounding=rounding)
    assert (q[1:] >= q[:-1]).all()


# sign-symmetric rounding: symmetric grids; not midrise2 under "rne" (ties go to the even two's-complement code)
SYMMETRIC = [(n, r) for n in NAMES for r in ROUNDINGS
             if FORMATS[n].signed and FORMATS[n].symmetric and not (FORMATS[n].family is Family.MIDRISE and r == "rne")]


@pytest.mark.parametrize(("name", "rounding"), SYMMETRIC)
@given(data=st.data())
def test_sign_symmetric(name, rounding, data):
    fmt = get_format(name)
    x = tensor(data.draw(finite_floats(fmt)))
    if fmt.family in (Family.BINARY, Family.MIDRISE):  # zero maps to +1 whatever its sign
        x = x[x != 0]
    assert torch.equal(round_to_format(-x, fmt, rounding=rounding), -round_to_format(x, fmt, rounding=rounding))


@pytest.mark.parametrize("name", ["int3_tc", "int4_tc"])
@pytest.mark.parametrize("rounding", ROUNDINGS)
@given(data=st.data())
def test_twos_complement_is_sign_symmetric_inside_the_symmetric_range(name, rounding, data):
    """Inside ``[-max, max]`` the full two's-complement grid rounds like the symmetric one; below, it reaches
    ``lowest = -max - 1``."""
    fmt = get_format(name)
    x = tensor(data.draw(finite_floats(fmt)))
    inside = x.abs() <= fmt.max
    assert torch.equal(round_to_format(-x[inside], fmt, rounding=rounding),
                       -round_to_format(x[inside], fmt, rounding=rounding))
    below = x[x < -fmt.max - 0.5]
    assert (round_to_format(below, fmt, rounding=rounding) == fmt.lowest).all()


@pytest.mark.parametrize("name", [n for n in NAMES if FORMATS[n].is_codebook])
@pytest.mark.parametrize("rounding", ROUNDINGS)
@given(data=st.data())
def test_error_at_most_half_a_step_inside_the_range(name, rounding, data):
    fmt = get_format(name)
    x = tensor(data.draw(finite_floats(fmt, scale=1.0)))
    if not fmt.signed:
        x = x.abs()
    x = x.clamp(-fmt.max, fmt.max).double()
    grid = torch.tensor(fmt.finite_values)
    hi_index = torch.searchsorted(grid, x, right=True).clamp(1, grid.numel() - 1)
    step = grid[hi_index] - grid[hi_index - 1]
    error = (round_to_format(x.float(), fmt, rounding=rounding).double() - x).abs()
    inside = x.abs() >= fmt.min_subnormal if not fmt.has_zero else torch.ones_like(x, dtype=torch.bool)
    assert (error[inside] <= step[inside] / 2).all()


@pytest.mark.parametrize("name", ["bf16", "fp32"])
@given(data=st.data())
def test_wide_formats_error_at_most_half_ulp(name, data):
    fmt = get_format(name)
    x = tensor(data.draw(finite_floats(fmt, scale=0.5))).double()
    q = round_to_format(x.float(), fmt).double()
    ulp = torch.exp2(torch.floor(torch.log2(x.abs().clamp(min=fmt.min_normal))) - fmt.mantissa_bits)
    assert ((q - x).abs() <= ulp / 2).all()
