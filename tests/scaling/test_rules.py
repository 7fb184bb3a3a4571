"""Scale rules: hand-computed blocks, the SSE ordering, brute force against an unpruned search, E8M0 rules."""

import math

import numpy as np
import pytest
import torch

from common.formats import get_format
from common.scaling import RULES, block_error, dequantize_blocks, quantize_blocks
from common.scaling.rules import brute_force

E2M1 = get_format("e2m1")


def scales_of(x, **kwargs):
    _, scales = quantize_blocks(x, return_scales=True, **kwargs)
    return scales.block


def blocks_sse(x, q, block_size):
    return ((x - q).double() ** 2).reshape(-1, block_size).sum(-1)


def exhaustive_search(blocks, scale_fmt, elem_fmt):
    """The unpruned brute force: every positive scale value, first minimum (the smallest scale) wins."""
    candidates = torch.tensor(scale_fmt.finite_values[scale_fmt.finite_values > 0], dtype=torch.float32)
    errors = torch.stack([block_error(blocks, dequantize_blocks(blocks, c.expand(blocks.shape[0], 1), elem_fmt))
                          .squeeze(1) for c in candidates], dim=1)
    return candidates[errors.argmin(dim=1)].unsqueeze(1)


def gaussian_blocks(sigma, n_blocks=2000, block_size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n_blocks, block_size, generator=g) * sigma


def test_absmax_hand_computed():
    x = torch.tensor([[0.1, -0.2, 0.3, 5.0]])
    # s = UE4M3(5/6 = 0.8333) = 0.8125; elements 0.123 -> 0, -0.246 -> -0, 0.369 -> 0.5, 6.15 -> 6
    q, scales = quantize_blocks(x, "e2m1", "ue4m3", 4, "absmax", return_scales=True)
    assert scales.block.tolist() == [[0.8125]]
    assert q.tolist() == [[0.0, -0.0, 0.40625, 4.875]]


def test_four_over_six_picks_four_when_strictly_better():
    x = torch.tensor([[4.0, 2.0, 1.0, 0.0]])
    # s6 = UE4M3(4/6) = 0.6875 leaves error on every element; s4 = UE4M3(4/4) = 1 is exact
    q, scales = quantize_blocks(x, "e2m1", "ue4m3", 4, "four_over_six", return_scales=True)
    assert scales.block.tolist() == [[1.0]]
    assert torch.equal(q, x)
    assert quantize_blocks(x, "e2m1", "ue4m3", 4, "absmax").tolist() == [[4.125, 2.0625, 1.03125, 0.0]]


def test_four_over_six_ties_go_to_six():
    x = torch.tensor([[6.0, 0.0, 0.0, 0.0]])  # s6 = 1 and s4 = 1.5 both exact: tie -> 6
    assert scales_of(x, block_size=4, rule="four_over_six").tolist() == [[1.0]]


def test_four_over_six_mae_criterion():
    x = gaussian_blocks(1.0, n_blocks=500)
    mse = quantize_blocks(x, block_size=16, rule="four_over_six")
    mae = quantize_blocks(x, block_size=16, rule="four_over_six", criterion="mae")
    absmax = quantize_blocks(x, block_size=16)
    abs_err = lambda q: (x - q).abs().double().sum(-1)  # noqa: E731
    assert (abs_err(mae) <= abs_err(absmax) + 1e-12).all()
    assert not torch.equal(mse, mae)
    with pytest.raises(ValueError, match="unknown criterion 'l1'"):
        quantize_blocks(x, rule="four_over_six", criterion="l1")


@pytest.mark.parametrize("scale", ["ue4m3", "ue5m3", "e8m0"])
@pytest.mark.parametrize("sigma", [1e-5, 3e-4, 5e-3, 0.1, 1.0, 300.0])
def test_brute_force_equals_unpruned_search(scale, sigma):
    scale_fmt = get_format(scale)
    blocks = gaussian_blocks(sigma, n_blocks=400)
    blocks[0] = 0.0  # all-zero: every scale ties, the smallest wins
    blocks[1] = blocks[1, 0]  # constant block: many exact scales tie
    assert torch.equal(brute_force(blocks, scale_fmt, E2M1), exhaustive_search(blocks, scale_fmt, E2M1))


@pytest.mark.parametrize("scale", ["ue4m3", "ue5m3", "e8m0"])
@pytest.mark.parametrize("block_size", [4, 8, 16, 32])
@pytest.mark.parametrize("sigma", [2e-4, 5e-3, 0.2, 3.0])
def test_sse_ordering_per_block(scale, block_size, sigma):
    """SSE(brute_force) <= SSE(four_over_six) <= SSE(absmax) for every block."""
    x = gaussian_blocks(sigma, n_blocks=300, block_size=block_size, seed=1)
    sse = {rule: blocks_sse(x, quantize_blocks(x, "e2m1", scale, block_size, rule), block_size)
           for rule in ("absmax", "four_over_six", "brute_force")}
    assert (sse["brute_force"] <= sse["four_over_six"]).all()
    assert (sse["four_over_six"] <= sse["absmax"]).all()


def test_prevent_zero_never_zeroes_a_nonzero_block():
    x = gaussian_blocks(1e-4, n_blocks=2000, block_size=4)
    absmax_scales = scales_of(x, block_size=4)
    assert (absmax_scales == 0).any()  # the test can fail: abs-max does zero some blocks here
    for rule in ("prevent_zero", "absmax", "four_over_six"):
        scales = scales_of(x, block_size=4, rule=rule, prevent_zero=True)
        assert (scales > 0).all(), rule
    assert (scales_of(x, block_size=4, rule="prevent_zero") == 2.0**-9).any()


def test_every_scale_is_a_scale_format_value():
    x = gaussian_blocks(0.01, n_blocks=500)
    for scale in ("ue4m3", "ue5m3", "e8m0"):
        grid = get_format(scale).finite_values
        for rule in RULES:
            values = scales_of(x, scale=scale, rule=rule).double().numpy()
            assert np.isin(values, grid).all(), (scale, rule)


def test_e8m0_floor_and_rceil_formulas():
    x = gaussian_blocks(1.0, n_blocks=3000, block_size=32, seed=2)
    bmax = x.abs().amax(dim=-1, keepdim=True).double()
    floor_scales = scales_of(x, scale="e8m0", block_size=32, rule="e8m0_floor").double()
    assert torch.equal(floor_scales, torch.exp2(torch.floor(torch.log2(bmax)) - 2))
    rceil_scales = scales_of(x, scale="e8m0", block_size=32, rule="e8m0_rceil").double()
    assert (bmax / rceil_scales <= 6).all()  # never saturates
    assert (bmax / (rceil_scales / 2) > 6).all()  # and is the smallest power of two that does not
    ratio = bmax / floor_scales
    assert ((ratio >= 4) & (ratio < 8)).all()


def test_e8m0_floor_matches_torchao_mxfp4():
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(3)) * 0.37
    scale, data = mx.to_mx(x, torch.float4_e2m1fn_x2, 32)
    theirs = mx.to_dtype(data, scale, torch.float4_e2m1fn_x2, 32, torch.float32)
    ours = quantize_blocks(x, "e2m1", "e8m0", 32, "e8m0_floor")
    assert torch.equal(ours, theirs)


def test_four_over_six_on_power_of_two_scales_chooses_floor_or_rceil():
    x = gaussian_blocks(1.0, n_blocks=1000, block_size=32)
    chosen = scales_of(x, scale="e8m0", block_size=32, rule="four_over_six")
    floor = scales_of(x, scale="e8m0", block_size=32, rule="e8m0_floor")
    rceil = scales_of(x, scale="e8m0", block_size=32, rule="e8m0_rceil")
    assert ((chosen == floor) | (chosen == rceil)).all()
    assert (chosen == floor).any()
    assert (chosen == rceil).any()


def test_scale_rounding_saturates_at_scale_max():
    x = torch.full((1, 16), 1e6)
    s = scales_of(x, block_size=16)
    assert s.item() == 448.0
    assert quantize_blocks(x, block_size=16).unique().item() == 6 * 448.0
    assert math.isfinite(quantize_blocks(x, block_size=16, rule="brute_force").unique().item())


def test_fused_four_over_six_equals_select_then_dequantize():
    blocks = gaussian_blocks(0.02, n_blocks=500)
    scale_fmt = get_format("ue4m3")
    scales, values = RULES["four_over_six"].select_with_values(blocks, scale_fmt, E2M1)
    assert torch.equal(scales, RULES["four_over_six"].select(blocks, scale_fmt, E2M1))
    assert torch.equal(values, dequantize_blocks(blocks, scales, E2M1))


@pytest.mark.parametrize("scale", ["ue4m3", "ue5m3", "e8m0"])
@pytest.mark.parametrize("criterion", ["mse", "mae"])
def test_four_over_six_decision_equals_float64_errors(scale, criterion):
    """The choice is exactly 'second candidate iff its float64 block error is strictly smaller'."""
    from common.scaling.rules import e8m0_floor, e8m0_rceil, round_scale

    scale_fmt = get_format(scale)
    blocks = torch.cat([gaussian_blocks(s, n_blocks=500, seed=4) for s in (1e-4, 3e-3, 0.1, 2.0)])
    blocks[:50] = blocks[:50].round()  # integer blocks: exact ties between candidates are common
    blocks[50:60] = 0.0
    if scale == "e8m0":
        s_top, s_second = e8m0_rceil(blocks, scale_fmt, E2M1), e8m0_floor(blocks, scale_fmt, E2M1)
    else:
        bmax = blocks.abs().amax(dim=-1, keepdim=True)
        s_top, s_second = round_scale(bmax / 6, scale_fmt, False), round_scale(bmax / 4, scale_fmt, False)
    err_top = block_error(blocks, dequantize_blocks(blocks, s_top, E2M1), criterion)
    err_second = block_error(blocks, dequantize_blocks(blocks, s_second, E2M1), criterion)
    expected = torch.where(err_second < err_top, s_second, s_top)
    assert torch.equal(RULES["four_over_six"].select(blocks, scale_fmt, E2M1, criterion=criterion), expected)
