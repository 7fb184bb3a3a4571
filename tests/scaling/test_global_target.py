"""quantize_blocks' ``global_target``: g = amax / global_target replaces the rule's default divisor."""

import math

import pytest
import torch

from common.scaling import quantize_blocks


def rows_of_mixed_magnitude():
    # rows spanning 1e-6 .. 10: without a global scale the small rows' UE4M3 block scales underflow
    z = torch.randn(6, 64, generator=torch.Generator().manual_seed(7))
    magnitudes = torch.tensor([1e-6, 1e-4, 1e-2, 1.0, 3.0, 10.0]).reshape(-1, 1)
    return z * magnitudes


@pytest.mark.parametrize("rule", ["absmax", "four_over_six", "brute_force"])
@pytest.mark.parametrize("block_size", [4, 16, 20])
def test_row_target_448_is_quantizing_x_over_c_then_multiplying_by_c(rule, block_size):
    x = rows_of_mixed_magnitude()
    c = x.abs().amax(dim=-1, keepdim=True) / 448.0
    expected = quantize_blocks(x / c, "e2m1", "ue4m3", block_size, rule) * c
    q, scales = quantize_blocks(x, "e2m1", "ue4m3", block_size, rule, global_scale="row", global_target=448.0,
                                return_scales=True)
    assert torch.equal(q, expected)
    assert torch.equal(scales.global_, c)


def test_row_target_maps_every_row_max_to_448():
    x = rows_of_mixed_magnitude()
    q, scales = quantize_blocks(x, block_size=16, global_scale="row", global_target=448.0, return_scales=True)
    # the block holding the row max gets block scale E4M3(448 / 6) = 72 (nearest UE4M3 value of 74.67)
    row_max_block = x.abs().reshape(6, 4, 16).amax(dim=-1).argmax(dim=-1)
    assert scales.block[torch.arange(6), row_max_block].tolist() == [72.0] * 6
    # so the row max, 448 after dividing by c, clips to 6 * 72 = 432: Q(max) = 432 c
    at_max = x.abs().argmax(dim=-1)
    assert torch.equal(q[torch.arange(6), at_max].abs(), 432.0 * scales.global_[:, 0])
    # and no block scale underflows, even in the 1e-6 row
    assert bool((scales.block > 0).all())
    unscaled = quantize_blocks(x, block_size=16, return_scales=True)[1]
    assert bool((unscaled.block[0] == 0).all())  # the 1e-6 row flushes to zero without the global scale


def test_tensor_target_is_one_scale_for_the_whole_tensor():
    x = rows_of_mixed_magnitude()
    c = x.abs().amax() / 100.0
    q, scales = quantize_blocks(x, block_size=8, global_scale="tensor", global_target=100.0, return_scales=True)
    assert torch.equal(q, quantize_blocks(x / c, block_size=8) * c)
    assert scales.global_.shape == ()
    assert scales.global_.item() == c.item()


@pytest.mark.parametrize(("rule", "default"), [("absmax", 6 * 448), ("four_over_six", 6 * 256)])
def test_default_target_equals_the_explicit_rule_divisor(rule, default):
    x = rows_of_mixed_magnitude()
    implicit, s_implicit = quantize_blocks(x, block_size=16, rule=rule, global_scale="row", return_scales=True)
    explicit, s_explicit = quantize_blocks(x, block_size=16, rule=rule, global_scale="row",
                                           global_target=float(default), return_scales=True)
    assert torch.equal(implicit, explicit)
    assert torch.equal(s_implicit.global_, x.abs().amax(dim=-1, keepdim=True) / default)
    assert torch.equal(s_implicit.global_, s_explicit.global_)
    other = quantize_blocks(x, block_size=16, rule=rule, global_scale="row", global_target=448.0)
    assert not torch.equal(other, implicit)  # the target really changes the result


def test_target_with_an_all_zero_row_uses_g_one():
    x = rows_of_mixed_magnitude()
    x[2] = 0.0
    q, scales = quantize_blocks(x, block_size=16, global_scale="row", global_target=448.0, return_scales=True)
    assert scales.global_[2].item() == 1.0
    assert torch.equal(q[2], torch.zeros(64))


@pytest.mark.parametrize(("options", "message"), [
    ({"global_target": 448.0}, r"global_target must be a finite number > 0 and needs a global_scale mode, got "
                                r"448\.0 with global_scale=None"),
    ({"global_target": 0.0, "global_scale": "row"}, r"must be a finite .*got 0\.0 with global_scale='row'"),
    ({"global_target": -448.0, "global_scale": "tensor"}, r"got -448\.0 with global_scale='tensor'"),
    ({"global_target": math.nan, "global_scale": "row"}, r"global_target must be a finite .*got nan"),
    ({"global_target": math.inf, "global_scale": "row"}, r"global_target must be a finite .*got inf"),
    ({"global_target": True, "global_scale": "row"}, r"global_target must be a finite .*got True"),
])
def test_bad_global_target(options, message):
    with pytest.raises(ValueError, match=message):
        quantize_blocks(torch.ones(2, 16), block_size=16, **options)
