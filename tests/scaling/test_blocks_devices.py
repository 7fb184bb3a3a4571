"""Block quantization stays on the input's device and off the host: every rule but brute force runs on PyTorch's
``meta`` device (no data: a CPU table or a value read back to the host raises there); the device path of
four_over_six (dense ``torch.where`` updates, :func:`common.scaling.rules.sparse_updates`) gives the CPU path's bits."""

import pytest
import torch
from scaling_testing import edge_blocks

from common.quantizers import quantize_tensor
from common.recipes import SPECS
from common.scaling import RULES, quantize_blocks, rules

# brute force reads the width of its candidate window on the host (documented in common.scaling.rules)
SYNC_FREE_RULES = [name for name in RULES if name != "brute_force"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("global_scale", [None, "tensor", "row"])
@pytest.mark.parametrize("prevent_zero", [False, True])
@pytest.mark.parametrize("rule", SYNC_FREE_RULES)
def test_quantize_blocks_stays_on_the_device(rule, prevent_zero, global_scale, dtype):
    x = torch.empty(6, 50, device="meta", dtype=dtype)
    out, scales = quantize_blocks(x, "e2m1", "ue4m3", 16, rule, prevent_zero=prevent_zero,
                                  global_scale=global_scale, return_scales=True)
    assert (out.device.type, out.dtype, out.shape) == ("meta", dtype, x.shape)
    assert scales.block.device.type == scales.elements.device.type == "meta"
    assert scales.block.shape == (6, 4)
    assert global_scale is None or scales.global_.device.type == "meta"


@pytest.mark.parametrize("name", list(SPECS))
def test_named_specs_and_per_tensor_hif8_stay_on_the_device(name):
    x = torch.empty(2, 8, 64, device="meta", dtype=torch.bfloat16)
    for out in (quantize_tensor(x, SPECS[name]), quantize_blocks(x, "hif8", "fp32", None),
                quantize_blocks(x, "hif8", "fp32", None, "unit", global_scale="tensor", global_target=15.0)):
        assert (out.device.type, out.dtype, out.shape) == ("meta", torch.bfloat16, x.shape)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    both_nan = a.isnan() & b.isnan()
    return torch.equal(torch.where(both_nan, 0, a.view(torch.int32)), torch.where(both_nan, 0, b.view(torch.int32)))


@pytest.mark.parametrize("criterion", ["mse", "mae"])
@pytest.mark.parametrize("global_scale", [None, "tensor"])
@pytest.mark.parametrize("prevent_zero", [False, True])
@pytest.mark.parametrize(("elem", "scale"), [("e2m1", "ue4m3"), ("e2m1", "e8m0"), ("e4m3", "ue5m3"), ("int4", "ue4m3")])
def test_four_over_six_device_path_equals_the_cpu_path(monkeypatch, elem, scale, prevent_zero, global_scale,
                                                       criterion):
    """The dense updates other devices take (every row through ``torch.where``, exact float64 errors for every
    row kept where the float32 decision is a near-tie) give the bits of the CPU's sparse updates."""
    x = edge_blocks(torch.float32)
    kwargs = {"prevent_zero": prevent_zero, "global_scale": global_scale, "criterion": criterion,
              "return_scales": True}
    cpu_out, cpu_scales = quantize_blocks(x, elem, scale, 16, "four_over_six", **kwargs)
    monkeypatch.setattr(rules, "sparse_updates", lambda t: False)
    out, scales = quantize_blocks(x, elem, scale, 16, "four_over_six", **kwargs)
    assert same_bits(out, cpu_out)
    assert same_bits(scales.block, cpu_scales.block)
    assert same_bits(scales.elements, cpu_scales.elements)
