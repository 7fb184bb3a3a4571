"""Scaled quantize-dequantize: the lookup path equals common.formats.round_to_format bit for bit."""

import math

import pytest
import torch

from common.formats import round_to_format
from common.quantizers.scaled import CHUNK, float32, lookup_bits, lookup_table, scaled_qdq


def reference(t, scale, fmt):
    return (round_to_format(t.float() * scale, fmt) / scale).to(t.dtype)


def assert_same_bits(a, b):
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    a32, b32 = a.float(), b.float()
    both_nan = a32.isnan() & b32.isnan()
    assert torch.equal(torch.where(both_nan, 0, a32.view(torch.int32)), torch.where(both_nan, 0, b32.view(torch.int32)))


def test_lookup_bits():
    assert lookup_bits("hif8") == 13  # sign, 8 exponent bits, 3 mantissa bits, the round bit
    assert lookup_bits("e4m3") is None  # round-to-nearest-even needs the sticky bits
    assert lookup_table("hif8").shape == (8192,)
    with pytest.raises(ValueError, match="format 'e4m3' has no lookup table"):
        lookup_table("e4m3")


def test_every_key_with_extreme_low_bits():
    """Every sign/exponent/top-4-mantissa key, with the 19 low bits at their extremes and around the half."""
    keys = torch.arange(8192, dtype=torch.int64) << 19
    low = torch.tensor([0, 1, (1 << 18) - 1, 1 << 18, (1 << 18) + 1, (1 << 19) - 1], dtype=torch.int64)
    bits = (keys[:, None] + low[None, :]).reshape(-1).to(torch.int32)
    x = bits.view(torch.float32)
    assert_same_bits(scaled_qdq(x, 1.0), round_to_format(x, "hif8"))


@pytest.mark.parametrize("scale", [1.0, 2.0, float32(15 / 0.37), float32(15 / 1234.5), float32(1.5e13)])
def test_random_tensors_any_scale(scale):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3 * CHUNK + 17, generator=g) * torch.logspace(-12, 6, 3 * CHUNK + 17)
    assert_same_bits(scaled_qdq(x, scale), reference(x, scale, "hif8"))


def test_specials_bf16_and_shape():
    signalling_nan = torch.tensor([0x7F800001], dtype=torch.int32).view(torch.float32)
    x = torch.cat([torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -3e-39, 2.0**-23, 2.0**-24,
                                 32767.0, 40000.0, -1e38]), signalling_nan]).reshape(13, 1)
    out = scaled_qdq(x, 1.0)
    assert_same_bits(out, reference(x, 1.0, "hif8"))
    assert out[4].isnan()
    assert out[12].isnan()
    assert out.shape == (13, 1)
    assert str(out[1].item()) == "-0.0"
    y = torch.randn(4, 5, 6).to(torch.bfloat16)
    assert_same_bits(scaled_qdq(y, 3.0), reference(y, 3.0, "hif8"))
    assert scaled_qdq(torch.empty(0, 3), 2.0).shape == (0, 3)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e2m1", "int8"])
def test_generic_path(fmt):
    x = torch.randn(CHUNK + 5, generator=torch.Generator().manual_seed(1)) * 4
    assert_same_bits(scaled_qdq(x, 1.75, fmt), reference(x, 1.75, fmt))


@pytest.mark.parametrize("fmt", ["hif8", "e4m3"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_both_paths_stay_on_the_device(fmt, dtype):
    """The lookup path (HiF8: its table cached per device) and the generic path run on the input's device: on
    PyTorch's meta device, a CPU table or a value read back to the host would raise."""
    x = torch.empty(3, 50, device="meta", dtype=dtype)
    out = scaled_qdq(x, 0.25, fmt)
    assert (out.device.type, out.dtype, out.shape) == ("meta", dtype, x.shape)
    assert lookup_table("hif8", "meta").device.type == "meta"
