"""The unit scale rule: no block scaling, so with a global scale it is per-tensor qdq Q(x / g) * g (HiF8 W8A8
with g = amax / 15), and a quantized checkpoint stores it as 8-bit codes that decode bit-exactly."""

import torch

from common.formats import round_to_format
from common.ptq import QuantSpec
from common.ptq.checkpoint import dequantize_weight, encode_weight
from common.quantizers import quantize_tensor
from common.scaling import quantize_blocks


def weights():
    return torch.randn(48, 96, generator=torch.Generator().manual_seed(5)) * 0.02


def test_unit_with_a_tensor_scale_is_per_tensor_qdq():
    x = weights()
    g = x.abs().amax() / 15.0
    expected = round_to_format(x / g, "hif8") * g
    out = quantize_blocks(x, "hif8", "fp32", None, "unit", global_scale="tensor", global_target=15.0)
    assert torch.equal(out, expected)
    assert not torch.equal(out, x)


def test_unit_default_target_maps_amax_to_the_element_max():
    x = weights()
    g = x.abs().amax() / 6.0  # E2M1's largest value
    assert torch.equal(quantize_blocks(x, "e2m1", "fp32", None, "unit", global_scale="tensor"),
                       round_to_format(x / g, "e2m1") * g)


def test_unit_without_a_global_scale_quantizes_the_values_directly():
    x = weights() * 100
    assert torch.equal(quantize_blocks(x, "e4m3", "ue4m3", 16, "unit"), round_to_format(x, "e4m3"))


def test_hif8_weight_codes_round_trip_through_the_checkpoint_encoding():
    spec = QuantSpec("hif8", "fp32", None, "unit", global_scale="tensor", global_target=15.0)
    x = weights()
    q, scales = quantize_tensor(x, spec, return_scales=True)
    stored = encode_weight(scales, spec)
    assert stored["qcodes"].dtype == torch.uint8
    assert stored["qcodes"].shape == x.shape  # one 8-bit HiF8 code per weight
    assert torch.equal(dequantize_weight(stored["qcodes"], stored["qscales"], stored["qglobal"], spec, x.shape[1]), q)
