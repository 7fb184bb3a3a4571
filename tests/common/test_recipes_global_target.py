"""QuantSpec.global_target: dict round trip, validation naming the value, quantize == quantize_blocks."""

import json

import pytest
import torch

from common.quantizers import quantize_tensor
from common.recipes import SPECS, QuantRecipe, QuantSpec
from common.scaling import quantize_blocks

HIER = QuantSpec("e2m1", "ue4m3", 4, "four_over_six", global_scale="row", global_target=448.0)


def test_to_dict_has_global_target_and_round_trips_through_json():
    data = HIER.to_dict()
    assert data == {"elem": "e2m1", "scale": "ue4m3", "block_size": 4, "rule": "four_over_six",
                    "prevent_zero": False, "global_scale": "row", "rule_options": {}, "global_target": 448.0,
                    "axis": -1}
    back = QuantSpec.from_dict(json.loads(json.dumps(data)))
    assert back == HIER
    assert hash(back) == hash(HIER)
    recipe = QuantRecipe(HIER, HIER, "hier")
    assert QuantRecipe.from_dict(json.loads(json.dumps(recipe.to_dict()))) == recipe


def test_old_dicts_without_global_target_default_to_none():
    spec = QuantSpec.from_dict({"elem": "e2m1", "scale": "ue4m3", "global_scale": "tensor"})
    assert spec.global_target is None
    assert spec.to_dict()["global_target"] is None
    assert SPECS["NVFP4"].global_target is None


def test_target_is_part_of_equality():
    assert QuantSpec("e2m1", "ue4m3", 16, global_scale="row", global_target=448.0) != QuantSpec(
        "e2m1", "ue4m3", 16, global_scale="row")
    assert QuantSpec("e2m1", "ue4m3", 16, global_scale="row", global_target=448) == QuantSpec(
        "e2m1", "ue4m3", 16, global_scale="row", global_target=448.0)


@pytest.mark.parametrize(("spec", "options"), [
    (HIER, {"rule": "four_over_six", "block_size": 4, "global_scale": "row", "global_target": 448.0}),
    (QuantSpec("e2m1", "ue4m3", 16, "absmax", True, "tensor", (), 100.0),
     {"rule": "absmax", "block_size": 16, "prevent_zero": True, "global_scale": "tensor", "global_target": 100.0}),
])
def test_quantize_equals_quantize_blocks(spec, options):
    magnitudes = torch.tensor([1e-6, 1e-3, 1, 10, 1e-4])[:, None]
    x = torch.randn(5, 48, generator=torch.Generator().manual_seed(2)) * magnitudes
    expected = quantize_blocks(x, "e2m1", "ue4m3", **options)
    assert torch.equal(quantize_tensor(x, spec), expected)
    default = quantize_blocks(x, "e2m1", "ue4m3", **{**options, "global_target": None})
    assert not torch.equal(expected, default)  # the target reaches quantize_blocks
    q, scales = quantize_tensor(x, spec, return_scales=True)
    assert torch.equal(q, expected)
    divisor = options["global_target"]
    amax = x.abs().amax() if options["global_scale"] == "tensor" else x.abs().amax(dim=-1, keepdim=True)
    assert torch.equal(scales.global_, amax / divisor)


@pytest.mark.parametrize(("fields", "message"), [
    ({"global_scale": "row", "global_target": True},
     r"global_target must be a finite number > 0 and needs a global_scale mode, got True"),
    ({"global_scale": "row", "global_target": -448.0}, r"global_target must be a finite number > 0 .*got -448\.0 with"),
    ({"global_scale": "tensor", "global_target": 0},
     r"global_target must be a finite number > 0 .*got 0 with global_scale='tensor'"),
    ({"global_scale": "row", "global_target": "448"}, r"got '448'"),
    ({"global_target": 448.0},
     r"global_target must be a finite number > 0 and needs a global_scale mode, got 448\.0 with global_scale=None"),
])
def test_bad_global_target(fields, message):
    with pytest.raises(ValueError, match=message):
        QuantSpec("e2m1", "ue4m3", 16, **fields)
    with pytest.raises(ValueError, match=message):
        QuantSpec.from_dict({"elem": "e2m1", "scale": "ue4m3", **fields})
