"""QuantSpec's numerics fields (ties, compute_dtype) and the "slice" global scale: records, validation naming the
value, and the options reaching quantize_blocks for weights and activations."""

import json

import pytest
import torch
from torch import nn

from common.quantization import quantize_
from common.quantizers import quantize_tensor
from common.recipes import QuantRecipe, QuantSpec
from common.scaling import quantize_blocks

AUTHORS = QuantSpec("e2m1", "ue4m3", 4, "four_over_six", global_scale="slice", global_target=448.0, ties="down",
                    compute_dtype="bfloat16")


def test_records_without_the_fields_are_unchanged_and_read_back_at_the_defaults():
    spec = QuantSpec("e2m1", "ue4m3", 4, "four_over_six", global_scale="row", global_target=448.0)
    assert spec.to_dict() == {"elem": "e2m1", "scale": "ue4m3", "block_size": 4, "rule": "four_over_six",
                              "prevent_zero": False, "global_scale": "row", "rule_options": {},
                              "global_target": 448.0, "axis": -1}
    assert QuantSpec.from_dict(spec.to_dict()) == spec
    assert (spec.ties, spec.compute_dtype) == ("even", None)


def test_non_default_fields_round_trip_through_json():
    data = AUTHORS.to_dict()
    assert (data["ties"], data["compute_dtype"], data["global_scale"]) == ("down", "bfloat16", "slice")
    assert QuantSpec.from_dict(json.loads(json.dumps(data))) == AUTHORS
    recipe = QuantRecipe(AUTHORS, AUTHORS, "authors")
    assert QuantRecipe.from_dict(json.loads(json.dumps(recipe.to_dict()))) == recipe


def test_float32_is_the_default_compute_dtype():
    spec = QuantSpec("e2m1", "ue4m3", compute_dtype="float32")
    assert spec == QuantSpec("e2m1", "ue4m3")
    assert spec.compute_dtype is None
    assert "compute_dtype" not in spec.to_dict()


@pytest.mark.parametrize(("make", "message"), [
    (lambda: QuantSpec("e2m1", "ue4m3", ties="up"), "unknown ties 'up'"),
    (lambda: QuantSpec("e2m1", "ue4m3", compute_dtype="float16"), "unknown compute_dtype 'float16'"),
    (lambda: QuantSpec("e2m1", "ue4m3", global_scale="batch"), "unknown global_scale 'batch'"),
    (lambda: QuantSpec("e2m1", "ue4m3", None, global_scale="slice"), "global_scale='slice' needs blocks"),
    (lambda: QuantSpec("e2m1", "ue4m3", rule_options={"ties": "down"}), "unknown option 'ties'"),
    (lambda: QuantSpec("e2m1", "ue4m3", rule=None, ties="down"), "ties='down' needs a scale rule"),
    (lambda: QuantSpec("e2m1", "ue4m3", rule=None, compute_dtype="bfloat16"),
     "compute_dtype='bfloat16' needs a scale rule"),
    (lambda: QuantSpec.from_dict({"elem": "e2m1", "scale": "ue4m3", "rounding": "down"}),
     "unknown quantization spec key 'rounding'"),
])
def test_bad_values_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_e8m0_candidates_is_a_rule_option_of_four_over_six():
    spec = QuantSpec("e2m1", "e8m0", 32, "four_over_six", rule_options={"e8m0_candidates": "floor_ceil"})
    x = torch.tensor([[4.0] + [0.25] * 31])  # the floor candidate 0.5 wins (tests/scaling/test_numerics_options)
    assert quantize_tensor(x, spec).tolist() == [[3.0] + [0.25] * 31]


def test_spec_passes_the_fields_to_quantize_blocks():
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(0)).bfloat16()
    expected = quantize_blocks(x, "e2m1", "ue4m3", 4, "four_over_six", global_scale="slice", global_target=448.0,
                               ties="down", compute_dtype="bfloat16")
    assert torch.equal(quantize_tensor(x, AUTHORS), expected)
    row = QuantSpec("e2m1", "ue4m3", 4, "four_over_six", global_scale="row", global_target=448.0)
    assert not torch.equal(expected, quantize_tensor(x, row))


def test_fake_quantized_linear_uses_the_fields_for_weights_and_activations():
    """apply_quantization (the PTQ and evaluation path) quantizes the weight once and the (batch, seq, hidden)
    input on every call, both with the spec's ties, compute dtype and per-slice global scale."""
    layer = nn.Linear(32, 8, bias=False).to(torch.bfloat16)
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(2)).bfloat16()
    weight = layer.weight.detach().clone()
    with quantize_(layer, QuantRecipe(AUTHORS, AUTHORS), names=[""]):
        assert torch.equal(layer.weight, quantize_tensor(weight, AUTHORS))
        assert torch.equal(layer(x),
                           nn.functional.linear(quantize_tensor(x, AUTHORS), quantize_tensor(weight, AUTHORS)))
