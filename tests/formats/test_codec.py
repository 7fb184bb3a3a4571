"""encode/decode: every code of every format round-trips; canonical codes; bad codes."""

import math

import numpy as np
import pytest
import torch

from common.formats import FORMATS, decode, encode, get_format, round_to_format

CODEBOOK = [name for name, fmt in FORMATS.items() if fmt.is_codebook]


@pytest.mark.parametrize("name", CODEBOOK)
def test_every_code_round_trips(name):
    fmt = get_format(name)
    codes = torch.arange(2**fmt.bits, dtype=torch.int64)
    values = decode(codes, fmt)
    again = decode(encode(values, fmt, overflow="inf_nan" if fmt.has_nan or fmt.has_inf else "saturate"), fmt)
    same = (values == again) | (values.isnan() & again.isnan())
    assert same.all(), codes[~same]
    zeros = values == 0
    assert torch.equal(values[zeros].signbit(), again[zeros].signbit() & fmt.has_negative_zero)


@pytest.mark.parametrize("name", CODEBOOK)
def test_finite_codes_are_canonical(name):
    """A finite value with a single code encodes back to exactly that code."""
    fmt = get_format(name)
    codes = torch.arange(2**fmt.bits)
    values = decode(codes, fmt)
    unique = values.isfinite() & (values != 0)
    assert torch.equal(encode(values[unique], fmt).long(), codes[unique])


def test_known_codes():
    assert decode(torch.tensor([0x08, 0x10, 0x18, 0x40, 0x6E]), "hif8").tolist() == [1.0, 2.0, 0.5, 16.0, 2.0**15]
    assert decode(torch.tensor([0x7E, 0xFE, 0x01]), "e4m3").tolist() == [448.0, -448.0, 2.0**-9]
    assert decode(torch.tensor([0x7, 0xF, 0x1]), "e2m1").tolist() == [6.0, -6.0, 0.5]
    assert decode(torch.tensor([127, 0, 254]), "e8m0").tolist() == [1.0, 2.0**-127, 2.0**127]
    assert decode(torch.tensor([0x7E, 0x01]), "ue4m3").tolist() == [448.0, 2.0**-9]
    assert decode(torch.tensor([0xFE, 0x01]), "ue5m3").tolist() == [114688.0, 2.0**-17]
    assert decode(torch.tensor([0x7F, 0x81, 0xFF]), "int8").tolist() == [127.0, -127.0, -1.0]
    assert math.isnan(decode(torch.tensor([0x80]), "int8").item())
    assert decode(torch.tensor([0, 1]), "binary").tolist() == [1.0, -1.0]
    assert decode(torch.tensor([0x7, 0x8, 0xF]), "int4_tc").tolist() == [7.0, -8.0, -1.0]
    assert decode(torch.tensor([0x3, 0x4, 0x7]), "int3_tc").tolist() == [3.0, -4.0, -1.0]
    assert decode(torch.tensor([0, 1, 2, 3]), "midrise2").tolist() == [1.0, 3.0, -3.0, -1.0]


@pytest.mark.parametrize("name", ["int3_tc", "int4_tc", "midrise2"])
def test_twos_complement_grids_encode_every_level(name):
    """Every level of the full two's-complement grids has its code (the code read as a signed integer k is the
    value, or 2k + 1 for mid-rise); encode -> decode is exact on the levels."""
    fmt = get_format(name)
    levels = torch.tensor(fmt.finite_values, dtype=torch.float32)
    codes = encode(levels, fmt).long()
    signed = torch.where(codes >= 2 ** (fmt.bits - 1), codes - 2**fmt.bits, codes).float()
    assert torch.equal(levels, 2 * signed + 1 if name == "midrise2" else signed)
    assert torch.equal(decode(codes, fmt), levels)
    assert sorted(codes.tolist()) == list(range(2**fmt.bits))


def test_encode_specials():
    assert encode(torch.tensor([-0.0, 0.0]), "e4m3").tolist() == [0x80, 0x00]
    assert encode(torch.tensor([-0.0]), "hif8").tolist() == [0x00]  # HiF8 has no negative zero
    assert encode(torch.tensor([math.nan]), "hif8").tolist() == [0x80]
    assert encode(torch.tensor([math.inf, -math.inf]), "hif8", overflow="inf_nan").tolist() == [0x6F, 0xEF]
    assert encode(torch.tensor([math.inf]), "hif8").tolist() == [0x6E]  # saturate: 2^15
    assert encode(torch.tensor([1.0, 2.5]), "e2m1").tolist() == [0x2, 0x4]
    # 1.25 * 2^15 ties between 2^15 and the Inf slot: TA goes away (overflow), saturate clamps it to 2^15
    assert encode(torch.tensor([1.25 * 2**15]), "hif8").tolist() == [0x6E]
    assert encode(torch.tensor([1.25 * 2**15]), "hif8", overflow="inf_nan").tolist() == [0x6F]


def test_encode_nan_without_nan_code_fails():
    with pytest.raises(ValueError, match=r"'e2m1'.*no NaN"):
        encode(torch.tensor([math.nan]), "e2m1")


@pytest.mark.parametrize(("codes", "match"), [
    (torch.tensor([16]), "code 16 is out of range for 'e2m1'"),
    (torch.tensor([-1]), "code -1 is out of range"),
    (torch.tensor([1.0]), "integer tensor"),
])
def test_bad_codes_name_the_value(codes, match):
    with pytest.raises(ValueError, match=match):
        decode(codes, "e2m1")


def test_wide_formats_have_no_codes():
    with pytest.raises(ValueError, match="'bf16' has 16 bits"):
        encode(torch.ones(1), "bf16")


def test_code_dtype_and_shape():
    x = torch.randn(4, 6)
    codes = encode(x, "e4m3")
    assert codes.dtype == torch.uint8
    assert codes.shape == x.shape
    assert np.array_equal(decode(codes, "e4m3").numpy(), round_to_format(x, "e4m3").numpy())
