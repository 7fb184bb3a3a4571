"""Kernels stay on the input's device, checked without a GPU on PyTorch's ``meta`` device: a meta tensor has no data,
so a constant table left on the CPU (a device mismatch) or a value read back to the host (``.item()``, ``bool()``,
``nonzero``, ``.cpu()``) raises there as it would cost a transfer or a synchronisation on CUDA. The values are
compared with the CPU on a GPU (``tests/gpu``)."""

import pytest
import torch

from common.formats import FORMATS, OVERFLOWS, ROUNDINGS, encode, get_format, round_to_format
from common.formats.rounding import divide, exact_exp2

CASES = [(name, rounding, overflow) for name in FORMATS for rounding in ROUNDINGS for overflow in OVERFLOWS
         if overflow == "saturate" or get_format(name).has_inf or get_format(name).has_nan]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("fmt", "rounding", "overflow"), CASES)
def test_round_to_format_stays_on_the_device_in_the_input_dtype(fmt, rounding, overflow, dtype):
    x = torch.empty(3, 70, device="meta", dtype=dtype)
    out = round_to_format(x, fmt, rounding=rounding, overflow=overflow)
    assert (out.device.type, out.dtype, out.shape) == ("meta", dtype, x.shape)


@pytest.mark.parametrize("fmt", [name for name, fmt in FORMATS.items() if fmt.is_codebook and fmt.has_nan])
def test_encode_stays_on_the_device(fmt):
    """Formats with a NaN code encode without reading anything back (the others check for NaN on the host)."""
    codes = encode(torch.empty(5, 7, device="meta"), fmt)
    assert (codes.device.type, codes.dtype, codes.shape) == ("meta", torch.uint8, (5, 7))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_divide_is_the_cpu_division_by_the_rounded_divisor(dtype):
    """``divide`` (the kernels' division by a constant, a true division on CUDA too) is ``t / c`` bit for bit here:
    one rounding of ``t / fl(c)``, an overflowing ``c`` giving 0 as the Python scalar does; not ``t * (1 / c)``."""
    g = torch.Generator().manual_seed(0)
    t = torch.randn(1 << 14, generator=g, dtype=torch.float64).to(dtype) * 100
    for c in (6.0, 6 * 448.0, 6 * 256.0, 1 / 3, 7.0, 15 / 0.7, 1e39, 2.0**-140):
        assert torch.equal(divide(t, c).view(torch.int64 if dtype == torch.float64 else torch.int32),
                           (t / c).view(torch.int64 if dtype == torch.float64 else torch.int32)), c
    assert not torch.equal(divide(t, 6.0), t * (1 / 6.0))
    assert divide(torch.empty(4, device="meta", dtype=dtype), 6.0).device.type == "meta"


def test_exact_exp2_is_every_power_of_two_float32_has():
    """``exact_exp2`` (the E8M0 rules' ``2^n``, built from bits so that GPUs give the same) equals the correctly
    rounded ``2^n`` for every int32 exponent from far below the subnormals to beyond the overflow."""
    n = torch.arange(-400, 400, dtype=torch.int32)
    expected = torch.tensor([2.0**k if -150 < k < 128 else (0.0 if k <= -150 else float("inf")) for k in n.tolist()],
                            dtype=torch.float32)
    assert torch.equal(exact_exp2(n).view(torch.int32), expected.view(torch.int32))
    assert exact_exp2(torch.empty(3, device="meta", dtype=torch.int32)).device.type == "meta"
