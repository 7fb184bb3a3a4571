"""QuantSpec / QuantRecipe: named constructors, dict round trip, validation naming the offending value."""

import json

import pytest
import torch

from common.quantizers import quantize_tensor
from common.recipes import QuantRecipe, QuantSpec, get_recipe
from common.scaling import quantize_blocks

MXFP4 = QuantSpec("e2m1", "e8m0", 32, "e8m0_floor")


def test_named_block_recipes():
    assert get_recipe("MXFP4") == QuantRecipe(MXFP4, None, "W:MXFP4")
    both = get_recipe("MXFP4", activations=True)
    assert both.weights == both.activations == MXFP4
    assert both.name == "W:MXFP4,A:MXFP4"
    nvfp4 = get_recipe("NVFP4", activations=True)
    assert nvfp4.weights == nvfp4.activations == QuantSpec("e2m1", "ue4m3", 16, "absmax", global_scale="tensor")


def test_dict_round_trip_through_json():
    recipe = QuantRecipe(QuantSpec("e2m1", "ue4m3", 16, "four_over_six", prevent_zero=True, global_scale="row",
                                   rule_options={"criterion": "mae"}),
                         QuantSpec("e4m3", "fp32", None), "custom")
    data = json.loads(json.dumps(recipe.to_dict()))
    assert data["weights"]["rule_options"] == {"criterion": "mae"}
    assert data["activations"]["block_size"] is None
    assert QuantRecipe.from_dict(data) == recipe
    assert hash(QuantRecipe.from_dict(data)) == hash(recipe)
    assert QuantRecipe.from_dict({"weights": {"elem": "int4", "scale": "ue4m3"}}).weights.block_size == 16


def test_spec_quantize_is_quantize_blocks_along_the_last_axis():
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    spec = QuantSpec("e2m1", "ue4m3", 16, "four_over_six", global_scale="tensor", rule_options={"criterion": "mae"})
    expected = quantize_blocks(x, "e2m1", "ue4m3", 16, "four_over_six", global_scale="tensor", criterion="mae")
    assert torch.equal(quantize_tensor(x, spec), expected)


def test_spec_axis_blocks_along_that_axis():
    """axis=0 of a [out, in] weight is the last-axis quantization of its transpose, transposed back (the layout a
    backward GEMM's transposed weight needs); the axis is part of the record, and an old record without one is -1."""
    w = torch.randn(48, 20, generator=torch.Generator().manual_seed(1))
    for spec in (QuantSpec("e2m1", "ue4m3", 16, global_scale="tensor"), QuantSpec("int4", "fp32", "row")):
        along_out = QuantSpec.from_dict({**spec.to_dict(), "axis": 0})
        assert torch.equal(quantize_tensor(w, along_out), quantize_tensor(w.T.contiguous(), spec).T)
        assert not torch.equal(quantize_tensor(w, along_out), quantize_tensor(w, spec))
        assert QuantSpec.from_dict(json.loads(json.dumps(along_out.to_dict()))) == along_out
    assert QuantSpec.from_dict({"elem": "e2m1", "scale": "ue4m3"}).axis == -1


@pytest.mark.parametrize(("make", "message"), [
    (lambda: QuantSpec("e9m9", "ue4m3"), "unknown format 'e9m9'; valid formats: e4m3"),
    (lambda: QuantSpec("e2m1", "ue9m3"), "unknown format 'ue9m3'"),
    (lambda: QuantSpec("e2m1", "ue4m3", 16, "best"), "unknown scale rule 'best'; valid scale rules: absmax"),
    (lambda: QuantSpec("e2m1", "ue4m3", 0), "block_size must be an integer >= 1 or None .*got 0"),
    (lambda: QuantSpec("e2m1", "ue4m3", global_scale="col"), "unknown global_scale 'col'; valid: None, tensor, row"),
    (lambda: QuantSpec("e2m1", "ue4m3", None, global_scale="row"), "global_scale='row' needs blocks"),
    (lambda: QuantSpec("e2m1", "ue4m3", rule_options={"criterion": "mae"}),
     "unknown option 'criterion' of scale rule 'absmax'; valid options: none"),
    (lambda: QuantSpec("e2m1", "ue4m3", rule="four_over_six", rule_options={"crit": "mae"}),
     "unknown option 'crit' of scale rule 'four_over_six'; valid options: criterion"),
    (lambda: QuantSpec("int8", "fp32", "col"), "block_size must be an integer >= 1 or None .*'row'.*got 'col'"),
    (lambda: QuantSpec("int4_tc", "fp32", "row", None, prevent_zero=True),
     r"prevent_zero=True needs a scale rule: with rule=None \(learned scales\) it must be False"),
    (lambda: QuantSpec("int4_tc", "fp32", 16, None, global_scale="tensor"),
     r"global_scale='tensor' needs a scale rule: with rule=None \(learned scales\) it must be None"),
    (lambda: QuantSpec("int4_tc", "fp32", "row", None, rule_options={"criterion": "mae"}),
     r"rule_options=\{'criterion': 'mae'\} needs a scale rule"),
    (lambda: QuantRecipe(None, QuantSpec("int8", "fp32", "row", None)),
     r"activations are quantized .* spec needs a scale rule, got rule=None"),
    (lambda: QuantSpec("e2m1", "ue4m3", axis=True), "axis must be an integer .*got True"),
    (lambda: QuantSpec("e2m1", "ue4m3", axis="0"), "axis must be an integer .*got '0'"),
    (lambda: QuantRecipe(None, None), "needs weights, activations or both"),
    (lambda: QuantRecipe("NVFP4"), "weights must be a QuantSpec or None, got 'NVFP4'"),
    (lambda: get_recipe("NVFP9"), "unknown recipe 'NVFP9'; valid recipes: MXFP4"),
    (lambda: get_recipe("NVFP4", activations="MXFP8"), "activations must be a bool, got 'MXFP8'"),
    (lambda: get_recipe("PARETOQ_W2", activations=True), "activations=True quantizes the inputs with a block "
                                                         "recipe's weight spec; 'PARETOQ_W2' is a LowBitRecipe"),
    (lambda: QuantRecipe.from_dict({"weights": None, "acts": None}), "unknown recipe key 'acts'; valid keys"),
    (lambda: QuantRecipe.from_dict({"weights": {"elem": "e2m1", "scale": "e8m0", "size": 32}}),
     "unknown quantization spec key 'size'"),
])
def test_invalid_recipes_name_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_row_blocks_and_learned_scales_round_trip_through_json():
    recipe = QuantRecipe(QuantSpec("int4_tc", "fp32", "row", rule=None), QuantSpec("int8", "fp32", "row", "absmax"),
                         "paretoq-w4a8")
    data = json.loads(json.dumps(recipe.to_dict()))
    assert data["weights"]["block_size"] == data["activations"]["block_size"] == "row"
    assert data["weights"]["rule"] is None
    assert QuantRecipe.from_dict(data) == recipe


def test_row_spec_is_one_block_per_row():
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    spec = QuantSpec("int8", "fp32", "row", "absmax")
    assert torch.equal(quantize_tensor(x, spec), quantize_blocks(x, "int8", "fp32", 40, "absmax"))
    _, scales = quantize_tensor(x, spec, return_scales=True)
    assert torch.equal(scales.block, x.abs().amax(dim=-1, keepdim=True) / 127)


def test_learned_scales_cannot_quantize():
    spec = QuantSpec("midrise2", "fp32", "row", rule=None)
    with pytest.raises(ValueError, match=r"QuantSpec\('midrise2', 'fp32', block_size='row', rule=None\): the scales "
                                         r"are learned \(QAT\), not selected from data"):
        quantize_tensor(torch.ones(2, 4), spec)
