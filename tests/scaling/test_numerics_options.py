"""The numerics options of quantize_blocks and the rules, each on hand-made values where the conventions disagree:
ties (elements, UE5M3 scales; UE4M3 scales stay nearest-even), the per-slice global scale, bf16 arithmetic, and
four_over_six's E8M0 candidates."""

import pytest
import torch

from common.formats import get_format
from common.scaling import GLOBAL_SCALES, RULES, quantize_blocks
from common.scaling.rules import Arithmetic, dequantize_blocks

UE4M3, E2M1 = get_format("ue4m3"), get_format("e2m1")


def test_element_ties_go_down():
    """s = UE4M3(6/6) = 1: the elements 0.75, -1.75 and 3.5 are E2M1 midpoints."""
    x = torch.tensor([[6.0, 0.75, -1.75, 3.5]])
    assert quantize_blocks(x, block_size=4).tolist() == [[6.0, 1.0, -2.0, 4.0]]
    assert quantize_blocks(x, block_size=4, ties="down").tolist() == [[6.0, 0.5, -1.5, 3.0]]


def test_ue5m3_tie_scale_goes_down_and_ue4m3_stays_even():
    """bmax / 6 = 7.125 / 6 = 1.1875, midway between 1.125 and 1.25 on both scale grids: UE5M3 (midpoint
    bucketing in the authors' code) takes 1.125 with ties down; UE4M3 (their float8 cast) stays at 1.25."""
    x = torch.tensor([[7.125, 0.0, 0.0, 0.0]])

    def scale_and_values(scale, ties):
        q, scales = quantize_blocks(x, "e2m1", scale, 4, ties=ties, return_scales=True)
        return scales.block.item(), q[0, 0].item()

    assert scale_and_values("ue5m3", "even") == (1.25, 7.5)
    assert scale_and_values("ue5m3", "down") == (1.125, 6.75)
    assert scale_and_values("ue4m3", "down") == (1.25, 7.5)


@pytest.mark.parametrize("rule", ["absmax", "prevent_zero", "four_over_six", "brute_force", "e8m0_floor",
                                  "e8m0_rceil", "unit"])
def test_every_rule_takes_and_checks_the_options(rule):
    blocks = torch.tensor([[6.0, 0.75, -1.75, 3.5]])
    scale = get_format("e8m0" if rule.startswith("e8m0") else "ue4m3")
    assert RULES[rule].select(blocks, scale, E2M1, ties="down", compute_dtype="bfloat16").shape == (1, 1)
    with pytest.raises(ValueError, match="unknown ties 'up'"):
        RULES[rule].select(blocks, scale, E2M1, ties="up")
    with pytest.raises(ValueError, match="unknown compute_dtype 'float16'"):
        RULES[rule].select(blocks, scale, E2M1, compute_dtype="float16")


def test_per_sequence_and_per_token_global_scales_differ_on_a_3d_activation():
    """(batch 1, 2 tokens, hidden 4), c = amax / 448: per token c = 28/448 and 6/448; per sequence (dim-0 slice)
    c = 28/448 = 1/16 for both. Token 1 / (1/16) = [96, 16]: s = 16, exact; / (6/448) = [448, 74.7]: s = 72, and
    448/72 = 6.2 and 74.7/72 = 1.04 round to 6 and 1, i.e. 432 c and 72 c. Token 0 is 432 / 16 = 27 in both."""
    x = torch.tensor([[[28.0, 0.0, 0.0, 0.0], [6.0, 1.0, 0.0, 0.0]]])
    per_token, token_scales = quantize_blocks(x, block_size=4, global_scale="row", global_target=448.0,
                                              return_scales=True)
    per_sequence, sequence_scales = quantize_blocks(x, block_size=4, global_scale="slice", global_target=448.0,
                                                    return_scales=True)
    assert sequence_scales.global_.tolist() == [[[1 / 16], [1 / 16]]]
    assert token_scales.global_.tolist() == [[[1 / 16], [torch.tensor(6 / 448).item()]]]
    assert per_sequence[0].tolist() == [[27.0, 0.0, 0.0, 0.0], [6.0, 1.0, 0.0, 0.0]]
    c = torch.tensor(6.0) / 448
    assert per_token[0].tolist() == [[27.0, 0.0, 0.0, 0.0], [(432 * c).item(), (72 * c).item(), 0.0, 0.0]]


def test_slice_is_row_for_a_weight_and_is_the_dim0_amax_elsewhere():
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(64, 48, generator=g) * torch.logspace(-3, 0, 64).unsqueeze(1)
    options = {"block_size": 16, "rule": "four_over_six"}
    target = {"global_target": 448.0}
    assert torch.equal(quantize_blocks(weight, global_scale="slice", **options, **target),
                       quantize_blocks(weight, global_scale="row", **options, **target))
    activations = torch.randn(3, 5, 32, generator=g)
    q, scales = quantize_blocks(activations, global_scale="slice", return_scales=True, **options, **target)
    c = activations.abs().amax(dim=(1, 2), keepdim=True) / 448
    assert torch.equal(scales.global_, c.expand(3, 5, 1))
    assert torch.equal(q, quantize_blocks(activations / c, **options) * c)
    assert not torch.equal(q, quantize_blocks(activations, global_scale="row", **options, **target))
    one_d = torch.randn(32, generator=g)  # fewer than 2 dims: one slice, as the authors' amax over no other axis
    assert torch.equal(quantize_blocks(one_d, global_scale="slice", **options, **target),
                       quantize_blocks(one_d, global_scale="tensor", **options, **target))


def test_slice_is_a_global_scale_mode_and_its_geometry_is_checked():
    assert "slice" in GLOBAL_SCALES
    with pytest.raises(ValueError, match="global_scale='slice' needs blocks within rows"):
        quantize_blocks(torch.ones(4, 4), block_size=None, global_scale="slice")
    with pytest.raises(ValueError, match="needs blocks along another axis, got axis 0"):
        quantize_blocks(torch.ones(4, 4), block_size=4, global_scale="slice", axis=0)


def test_bf16_arithmetic_rounds_the_hierarchical_scale_and_the_result():
    """c = 11.625 / 448 = 0.0259487 in float32, 0.0260010 in bf16; both give s = 72 and elements [6, 1, 1, 6],
    so the results are bf16(432 c) and bf16(72 c): 11.1875 and 1.8671875 against 11.25 and 1.875."""
    x = torch.tensor([[10.875, 2.0, 1.6875, 11.625]], dtype=torch.bfloat16)
    options = {"block_size": 4, "global_scale": "slice", "global_target": 448.0, "return_scales": True}
    q32, s32 = quantize_blocks(x, **options)
    q16, s16 = quantize_blocks(x, compute_dtype="bfloat16", **options)
    assert s32.global_.item() == torch.tensor(11.625 / 448, dtype=torch.float32).item()
    assert s16.global_.item() == 0.0260009765625
    assert s32.block.item() == s16.block.item() == 72.0
    assert q32.float().tolist() == [[11.1875, 1.8671875, 1.8671875, 11.1875]]
    assert q16.float().tolist() == [[11.25, 1.875, 1.875, 11.25]]


def test_bf16_arithmetic_forms_the_second_4over6_candidate_as_max_over_6_times_1_5():
    """bmax = 0.455078125: bf16(bmax / 6) = 0.07568359375, times 1.5 = 0.113525390625, a bf16 tie that goes to
    0.11328125, itself a UE4M3 tie that goes to 0.109375; in float32 bmax / 4 = 0.11376953125 rounds to 0.1171875.
    The 4 candidate wins both times (s6 = 0.078125 errs more on 0.0625)."""
    x = torch.tensor([[0.455078125, 0.0, 0.0625, 0.0]], dtype=torch.bfloat16)
    q32, s32 = quantize_blocks(x, block_size=4, rule="four_over_six", return_scales=True)
    q16, s16 = quantize_blocks(x, block_size=4, rule="four_over_six", compute_dtype="bfloat16", return_scales=True)
    assert (s32.block.item(), s16.block.item()) == (0.1171875, 0.109375)
    assert q32.float().tolist() == [[0.46875, 0.0, 0.05859375, 0.0]]
    assert q16.float().tolist() == [[0.4375, 0.0, 0.0546875, 0.0]]


def test_bf16_arithmetic_takes_the_input_as_bf16():
    x = torch.tensor([[1 + 2**-9, 0.0, 0.0, 6.0]])  # 1 + 2^-9 is not a bf16 value: it rounds to 1 first
    q = quantize_blocks(x, block_size=4, compute_dtype="bfloat16", ties="down")
    assert q.dtype == torch.float32
    assert q.tolist() == [[1.0, 0.0, 0.0, 6.0]]


def test_bf16_quotient_is_rounded_only_for_cast_rounded_scales():
    """b / s = 1.2509766 (float32) rounds to the bf16 value 1.25, an E2M1 tie, only when the scale is UE4M3 (the
    authors' scale tensor is then bf16); with a UE5M3 scale the quotient stays float32 and rounds up to 1.5."""
    blocks, scales = torch.tensor([[1.2509765625 * 0.875]]), torch.tensor([[0.875]])
    bf16 = {"ties": "down", "compute_dtype": "bfloat16"}
    assert dequantize_blocks(blocks, scales, E2M1, scale_fmt=UE4M3, **bf16).item() == 0.875
    assert dequantize_blocks(blocks, scales, E2M1, scale_fmt=get_format("ue5m3"), **bf16).item() == 1.5 * 0.875
    with pytest.raises(ValueError, match="needs scale_fmt"):
        dequantize_blocks(blocks, scales, E2M1, compute_dtype="bfloat16")


def test_e8m0_floor_ceil_candidates_choose_the_clipping_floor():
    """bmax = 4: ceil(4/6) = 1 on the power-of-two grid, the OCP floor 2^(2-2) = 1 too, so OCP has one candidate;
    the authors' floor(4/6) = 0.5 clips the max to 3 (error 1) but makes the 31 values 0.25 exact (at s = 1 each
    is an E2M1 tie going to 0: error 31/16): 1 < 1.9375 picks 0.5."""
    x = torch.tensor([[4.0] + [0.25] * 31])
    q_ocp, s_ocp = quantize_blocks(x, "e2m1", "e8m0", 32, "four_over_six", return_scales=True)
    q_fc, s_fc = quantize_blocks(x, "e2m1", "e8m0", 32, "four_over_six", e8m0_candidates="floor_ceil",
                                 return_scales=True)
    assert (s_ocp.block.item(), s_fc.block.item()) == (1.0, 0.5)
    assert q_ocp.tolist() == [[4.0] + [0.0] * 31]
    assert q_fc.tolist() == [[3.0] + [0.25] * 31]
    with pytest.raises(ValueError, match="unknown e8m0_candidates 'round'"):
        quantize_blocks(x, "e2m1", "e8m0", 32, "four_over_six", e8m0_candidates="round")


def test_arithmetic_rounding_split():
    """Elements follow the ties; scales too, except the cast-rounded E4M3/BF16 formats."""
    down = Arithmetic("down")
    assert down.element_rounding == "half_down"
    assert Arithmetic().element_rounding == "rne"
    assert [down.scale_rounding(get_format(n)) for n in ("ue4m3", "e4m3", "bf16", "ue5m3", "e8m0")] == [
        "rne", "rne", "rne", "half_down", "half_down"]
    assert Arithmetic.of("even", None) == Arithmetic("even", "float32")
