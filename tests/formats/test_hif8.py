"""HiF8 against its fact sheet: the 256-code table and the reference TA rounding formula."""

import math

import numpy as np
import torch

from common.formats import decode, encode, get_format, round_to_format
from common.formats.reference import quantize_reference

HIF8 = get_format("hif8")


def fact_sheet_decode(code: int) -> float:
    """Decode written independently from hif8.md's layout table (not from the Tier data)."""
    sign = -1.0 if code & 0x80 else 1.0
    bits = format(code & 0x7F, "07b")
    if bits.startswith("11"):
        e_bits, mant = bits[2:6], bits[6:]
    elif bits.startswith("10"):
        e_bits, mant = bits[2:5], bits[5:]
    elif bits.startswith("01"):
        e_bits, mant = bits[2:4], bits[4:]
    elif bits.startswith("001"):
        e_bits, mant = bits[3:4], bits[4:]
    elif bits.startswith("0001"):
        e_bits, mant = "", bits[4:]
    else:  # 0000 MMM: denormal 2^(M-23), M = 0 is zero (and NaN with the sign bit)
        m = int(bits[4:], 2)
        if m == 0:
            return math.nan if sign < 0 else 0.0
        return sign * 2.0 ** (m - 23)
    exponent = 0 if not e_bits else int("1" + e_bits[1:], 2) * (-1 if e_bits[0] == "1" else 1)
    value = 2.0**exponent * (1 + int(mant, 2) / 2 ** len(mant))
    if value == 1.5 * 2**15:
        return sign * math.inf
    return sign * value


def fact_sheet_ta(x: np.ndarray) -> np.ndarray:
    """The reference TA formula of hif8.md, literally (float64)."""
    ax = np.abs(x.astype(np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(ax > 0, ax, 1.0)))
    e = np.where(e == -23, -22, e)
    ae = np.abs(e)
    mb = np.where(ae <= 3, 3, np.where(ae <= 7, 2, np.where(ae <= 15, 1, 0)))
    q = np.floor(ax * 2.0 ** (mb - e) + 0.5) * 2.0 ** (e - mb)
    q = np.where(ax >= 1.25 * 2**15, np.inf, q)
    q = np.where(ax < 2.0**-23, 0.0, q)
    return np.copysign(q, x)


def test_all_256_codes_match_the_fact_sheet_layout():
    ours = decode(torch.arange(256), HIF8).double().numpy()
    sheet = np.array([fact_sheet_decode(c) for c in range(256)])
    assert np.array_equal(ours, sheet, equal_nan=True)


def test_listed_values():
    table = {0x00: 0.0, 0x08: 1.0, 0x10: 2.0, 0x18: 0.5, 0x40: 16.0, 0x6E: 2.0**15, 0x01: 2.0**-22, 0x07: 2.0**-16}
    for code, value in table.items():
        assert decode(torch.tensor([code]), HIF8).item() == value
    assert HIF8.max == 2.0**15
    assert HIF8.min_subnormal == 2.0**-22


def test_precision_tiers():
    """3 mantissa bits below 16, 2 bits below 256, 1 bit up to 2^15."""
    values = HIF8.finite_values[HIF8.finite_values > 0]
    for lo, hi, bits in [(1, 16, 3), (16, 256, 2), (256, 2**15, 1)]:
        inside = (values >= lo) & (values < hi)
        steps = np.diff(values)[inside[:-1]]
        expected = 2.0 ** (np.floor(np.log2(values[:-1][inside[:-1]])) - bits)
        np.testing.assert_array_equal(steps, expected)


def test_random_inputs_match_the_reference_formula():
    g = torch.Generator().manual_seed(0)
    n = 1_000_000
    x = torch.exp2(torch.rand(n, generator=g, dtype=torch.float64) * 40 - 24).float()  # 2^-24 .. 2^16
    x = x * torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    grid = torch.tensor(HIF8.finite_values)
    mids = ((grid[1:] + grid[:-1]) / 2).float()  # every tie
    x = torch.cat([x, mids, torch.tensor([1.25 * 2**15, -1.25 * 2**15, 2.0**-23, 1.5 * 2.0**-23])])
    ours = round_to_format(x, HIF8, overflow="inf_nan").double().numpy()
    np.testing.assert_array_equal(ours, fact_sheet_ta(x.numpy()))
    np.testing.assert_array_equal(ours, quantize_reference(x.numpy(), HIF8, rounding="away", overflow="inf_nan"))


def test_default_rounding_is_ties_away_and_rne_is_available():
    tie = torch.tensor([8.5, 9.5, 2.0**-16 * 1.5])  # between 8 and 9 (3 mantissa bits: step 1), 9 and 10, denormals
    assert round_to_format(tie, HIF8).tolist() == [9.0, 10.0, 2.0**-15]
    assert round_to_format(tie, HIF8, rounding="rne").tolist() == [8.0, 10.0, 2.0**-15]


def test_overflow_policy():
    x = torch.tensor([1.2 * 2**15, 1.25 * 2**15, 1e9, -1e9])
    assert round_to_format(x, HIF8).tolist() == [2.0**15, 2.0**15, 2.0**15, -(2.0**15)]
    assert round_to_format(x, HIF8, overflow="inf_nan").tolist() == [2.0**15, math.inf, math.inf, -math.inf]
    # rne: the tie at 1.25 * 2^15 goes to the even neighbour 2^15; only beyond it is Inf
    assert round_to_format(x[:2], HIF8, rounding="rne", overflow="inf_nan").tolist() == [2.0**15, 2.0**15]


def test_no_negative_zero_code():
    assert encode(torch.tensor([-0.0, -1e-30]), HIF8).tolist() == [0, 0]
