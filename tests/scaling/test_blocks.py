"""quantize_blocks geometry, two-level scaling, non-finite input and bad arguments."""

import math

import pytest
import torch

from common.formats import get_format, round_to_format
from common.scaling import quantize_blocks


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_padding_equals_explicit_zero_padding():
    x = randn(5, 10)
    padded = torch.nn.functional.pad(x, (0, 2))
    expected = quantize_blocks(padded, block_size=4)[:, :10]
    assert torch.equal(quantize_blocks(x, block_size=4), expected)


@pytest.mark.parametrize("rule", ["absmax", "four_over_six", "brute_force", "e8m0_floor"])
def test_axis_equals_transpose(rule):
    x = randn(32, 12)
    along_0 = quantize_blocks(x, block_size=8, rule=rule, axis=0)
    assert torch.equal(along_0, quantize_blocks(x.t(), block_size=8, rule=rule).t())


def test_three_dimensional_and_one_dimensional():
    x = randn(3, 4, 32)
    flat = quantize_blocks(x.reshape(-1, 32), block_size=16).reshape(x.shape)
    assert torch.equal(quantize_blocks(x, block_size=16), flat)
    v = randn(48)
    assert torch.equal(quantize_blocks(v, block_size=16), quantize_blocks(v.reshape(3, 16), block_size=16).reshape(48))


def test_per_tensor_equals_the_formula_on_a_large_tensor():
    x = randn(700, 1000)  # more elements than one processing chunk
    for elem, scale in [("e4m3", "fp32"), ("hif8", "fp32"), ("e2m1", "ue4m3")]:
        s = round_to_format(x.abs().amax() / get_format(elem).max, scale)
        expected = round_to_format(x / s, elem) * s
        assert torch.equal(quantize_blocks(x, elem, scale, block_size=None), expected)


def test_per_tensor_and_oversized_blocks():
    x = randn(4, 8)
    q, scales = quantize_blocks(x, block_size=None, return_scales=True)
    assert scales.block.numel() == 1
    assert scales.block.item() == round_to_format(x.abs().amax() / 6, "ue4m3").item()
    assert torch.equal(q, quantize_blocks(x.reshape(1, -1), block_size=32).reshape(4, 8))
    assert torch.equal(quantize_blocks(x, block_size=100), quantize_blocks(x, block_size=8))  # one block per row


def test_block_size_one_is_per_element_scaling():
    x = randn(100)
    x = x[x.abs() > 0.1]  # scales in UE4M3's normal range
    q, scales = quantize_blocks(x, block_size=1, return_scales=True)
    assert scales.block.shape == x.shape
    assert torch.equal(q.abs(), 6 * scales.block)  # every element maps to the top value +-6
    assert ((q - x).abs() <= x.abs() * 2.0**-4).all()  # only the scale's rounding remains


def test_bfloat16_in_bfloat16_out():
    x = randn(8, 32).bfloat16()
    q = quantize_blocks(x, block_size=16)
    assert q.dtype == torch.bfloat16
    assert torch.equal(q.float(), quantize_blocks(x.float(), block_size=16))


def test_nvfp4_global_scale():
    x = randn(16, 64) * 3
    q, scales = quantize_blocks(x, block_size=16, global_scale="tensor", return_scales=True)
    amax = x.abs().amax()
    assert scales.global_.item() == pytest.approx((amax / (6 * 448)).item(), rel=1e-7)
    _, scales46 = quantize_blocks(x, block_size=16, rule="four_over_six", global_scale="tensor", return_scales=True)
    assert scales46.global_.item() == pytest.approx((amax / (6 * 256)).item(), rel=1e-7)
    assert scales.block.max().item() == 448.0  # the block holding amax uses the top of the scale range
    expected = quantize_blocks(x / scales.global_, block_size=16) * scales.global_
    assert torch.equal(q, expected)


def test_row_global_scale():
    x = randn(6, 64) * torch.logspace(-3, 1, 6).unsqueeze(1)
    q, scales = quantize_blocks(x, block_size=16, global_scale="row", return_scales=True)
    assert scales.global_.shape == (6, 1)
    for row in range(6):
        expected = quantize_blocks(x[row : row + 1], block_size=16, global_scale="tensor")
        assert torch.equal(q[row : row + 1], expected)


def test_hierarchical_rescues_tiny_tensors():
    x = randn(64, 64) * 1e-5  # abs-max UE4M3 scales underflow here; the global scale lifts them
    plain = ((quantize_blocks(x, block_size=16) - x) ** 2).mean()
    two_level = ((quantize_blocks(x, block_size=16, global_scale="tensor") - x) ** 2).mean()
    assert two_level < plain / 100


def test_nan_poisons_only_its_block():
    x = randn(4, 32)
    x[1, 3] = math.nan
    for global_scale in (None, "tensor", "row"):
        q = quantize_blocks(x, block_size=16, global_scale=global_scale)
        assert q[1, :16].isnan().all()
        assert not q[1, 16:].isnan().any()
        assert not q[[0, 2, 3]].isnan().any()
        clean = x.clone()
        clean[1, :16] = 0.0
        reference = quantize_blocks(clean, block_size=16, global_scale=global_scale)
        assert torch.equal(q[[0, 2, 3]], reference[[0, 2, 3]])


def test_all_zero_blocks_give_zeros_never_nan():
    x = torch.zeros(3, 32)
    for rule in ("absmax", "prevent_zero", "four_over_six", "brute_force", "e8m0_floor", "e8m0_rceil"):
        for scale in ("ue4m3", "e8m0", "ue5m3"):
            q = quantize_blocks(x, scale=scale, block_size=16, rule=rule, global_scale="tensor")
            assert torch.equal(q, x), (rule, scale)


def test_inf_saturates_its_block():
    x = torch.full((2, 16), 6.0)  # scale 1: exact
    x[0, 0] = math.inf
    q = quantize_blocks(x, block_size=16)
    assert q[0, 0].item() == 6 * 448.0
    assert torch.equal(q[1], x[1])


def test_empty_tensor():
    x = torch.empty(0, 16)
    assert quantize_blocks(x).shape == (0, 16)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rule": "amax"}, "unknown scale rule 'amax'"),
    ({"elem": "fp4"}, "unknown format 'fp4'"),
    ({"scale": "e4m4"}, "unknown format 'e4m4'"),
    ({"block_size": 0}, "block_size must be an integer >= 1 or None"),
    ({"block_size": -4}, "got -4"),
    ({"block_size": 2.5}, "got 2.5"),
    ({"block_size": True}, "got True"),
    ({"global_scale": "channel"}, "unknown global_scale 'channel'"),
    ({"axis": 2}, "axis 2 is out of range"),
    ({"block_size": None, "global_scale": "row"}, "global_scale='row'"),
])
def test_bad_arguments_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        quantize_blocks(randn(4, 16), **kwargs)


@pytest.mark.parametrize("x", [torch.ones(4, 16, dtype=torch.int64), torch.ones(4, 16, dtype=torch.float64)])
def test_bad_dtypes(x):
    with pytest.raises(ValueError, match=str(x.dtype)):
        quantize_blocks(x)


@pytest.mark.parametrize(("elem", "scale", "block_size", "rule", "global_scale"), [
    ("e2m1", "ue4m3", 16, "absmax", None),
    ("e2m1", "ue4m3", 16, "four_over_six", "tensor"),
    ("e2m1", "e8m0", 32, "e8m0_floor", None),
    ("e2m1", "ue5m3", 8, "brute_force", "row"),
    ("e4m3", "fp32", None, "absmax", None),
    ("int4", "ue4m3", 10, "prevent_zero", None),
])
def test_scales_and_elements_rebuild_the_result_exactly(elem, scale, block_size, rule, global_scale):
    x = randn(24, 40) * 0.05
    q, parts = quantize_blocks(x, elem, scale, block_size, rule, global_scale=global_scale, return_scales=True)
    assert torch.equal(round_to_format(parts.elements, elem), parts.elements)  # on the element grid
    assert torch.equal(round_to_format(parts.block, scale), parts.block)  # on the scale grid
    size = x.numel() if block_size is None else block_size
    if block_size is None:
        s = parts.block.reshape(1, 1)
    else:
        s = parts.block.repeat_interleave(size, dim=-1)[..., : x.shape[-1]]
    rebuilt = parts.elements * s
    if parts.global_ is not None:
        rebuilt = rebuilt * parts.global_
    assert torch.equal(rebuilt, q)


@pytest.mark.parametrize(("shape", "axis"), [((5, 37), -1), ((3, 4, 20), -1), ((37, 5), 0), ((40,), -1)])
@pytest.mark.parametrize(("elem", "scale", "rule", "global_scale"), [
    ("int8", "fp32", "absmax", None), ("e2m1", "ue4m3", "four_over_six", "row"), ("int4_tc", "fp32", "absmax", None),
    ("midrise2", "fp32", "absmax", None),
])
def test_row_blocks_are_one_block_spanning_the_axis(shape, axis, elem, scale, rule, global_scale):
    """``block_size="row"`` is ``block_size = len(axis)`` (whatever the length): one scale per row."""
    x = randn(*shape)
    length = x.shape[axis]
    q, parts = quantize_blocks(x, elem, scale, "row", rule, global_scale=global_scale, axis=axis, return_scales=True)
    expected, expected_parts = quantize_blocks(x, elem, scale, length, rule, global_scale=global_scale, axis=axis,
                                               return_scales=True)
    assert torch.equal(q, expected)
    assert torch.equal(parts.block, expected_parts.block)
    assert parts.block.shape == (*x.movedim(axis, -1).shape[:-1], 1)
    s = parts.block if axis in (-1, x.dim() - 1) else parts.block.movedim(-1, axis)
    rebuilt = parts.elements * s if parts.global_ is None else parts.elements * s * parts.global_.movedim(-1, axis)
    assert torch.equal(rebuilt, q)


def test_bad_block_size_string_names_the_value():
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1 or None \(per tensor\) or 'row' "
                                         r"\(one block per row\), got 'col'"):
        quantize_blocks(randn(4, 16), block_size="col")
