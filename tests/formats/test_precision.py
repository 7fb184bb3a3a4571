"""mantissa_bits: explicit fraction bits by magnitude, by hand and against every format's own value grid."""

import math

import pytest
import torch

from common.formats import FORMATS, Family, get_format, mantissa_bits

# HiF8 (hif8.md): 3 mantissa bits for |e| <= 3, 2 for 4..7, 1 for 8..15, 0 in the denormal tier 2^-22 .. 2^-16
HIF8_HAND = [(0.0, 0), (1.0, 3), (8.0, 3), (15.0, 3), (15.9375, 3), (16.0, 2), (60.0, 2), (255.0, 2), (256.0, 1),
             (300.0, 1), (32768.0, 1), (61440.0, 1), (1e30, 1), (math.inf, 1), (0.125, 3), (0.0625, 2),
             (2.0**-7, 2), (2.0**-8, 1), (2.0**-15, 1), (1.5 * 2.0**-15, 1), (2.0**-16, 0), (2.0**-22, 0),
             (2.0**-30, 0), (1e-45, 0)]


def bits(values, fmt, dtype=torch.float32):
    return mantissa_bits(torch.tensor(values, dtype=dtype), fmt).tolist()


def test_hif8_hand_values():
    values, expected = zip(*HIF8_HAND, strict=True)
    assert bits(list(values), "hif8") == list(expected)
    assert mantissa_bits(torch.tensor([[4.0, 20.0]]), "hif8").shape == (1, 2)
    assert mantissa_bits(torch.tensor([4.0]), "hif8").dtype == torch.int64


def test_float_hand_values():
    # e4m3: m = 3, smallest normal 2^-6; subnormals 2^-9 (0 bits after the leading one), 2^-8 + 2^-9 (1), 2^-7 (2)
    assert bits([0.0, 2.0**-9, 1.5 * 2.0**-8, 2.0**-7, 2.0**-6, 1.0, 448.0, 1000.0, math.inf], "e4m3") == [
        0, 0, 1, 2, 3, 3, 3, 3, 3]
    assert bits([2.0**-10], "e4m3") == [0]  # below the smallest subnormal
    assert bits([0.5, 1.0, 6.0, 7.0], "e2m1") == [0, 1, 1, 1]
    # fp32 subnormals: 2^-149 has 0 bits, 2^-127 (mantissa field 2^22) has 22
    assert bits([2.0**-149, 2.0**-127, 2.0**-126, 3.0], "fp32") == [0, 22, 23, 23]
    assert bits([2.0**-127, 2.0**127], "e8m0") == [0, 0]
    assert bits([1.0, 2.0**-133], "bf16", torch.bfloat16) == [7, 0]  # bf16 input; 2^-133 = 2^-126 2^-7: 0 bits


@pytest.mark.parametrize("name", [n for n, f in FORMATS.items()
                                  if f.family in (Family.FLOAT, Family.TAPERED) and f.is_codebook])
def test_grid_step_is_two_to_the_binade_minus_the_bits(name):
    """For every positive finite value v but the largest, the next value is v + 2^(floor(log2 v) - bits(v)): the bits
    are those of the format's own grid (every code, denormals and subnormals included)."""
    fmt = get_format(name)
    values = [float(v) for v in fmt.finite_values if v > 0]
    found = bits(values, fmt)
    for value, following, b in zip(values, values[1:], found, strict=False):
        assert following - value == math.ldexp(1.0, math.floor(math.log2(value)) - b), (name, value, b)
    assert bits([fmt.max * 4], fmt) == [found[-1]]  # clipped values count with the bits at the maximum


def test_formats_without_mantissa_are_rejected():
    for name in ("int8", "binary", "midrise2"):
        with pytest.raises(ValueError, match=f"format '{name}' .* has no mantissa bits"):
            mantissa_bits(torch.tensor([1.0]), name)
