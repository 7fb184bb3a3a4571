"""common.recipes: the named specs quantize as quantize_blocks does, the QAT recipe types validate on construction
(naming the value), every recipe round-trips through its typed record, and the registry names each path."""

import json

import pytest
import torch

from common.quantizers import quantize_tensor
from common.recipes import (
    RECIPE_TYPES,
    RECIPES,
    SPECS,
    DelayedScalingRecipe,
    LowBitRecipe,
    QuantRecipe,
    QuantSpec,
    Recipe,
    get_recipe,
    recipe_from_dict,
    recipe_to_dict,
    resolve_recipe,
)
from common.scaling import quantize_blocks


def test_named_specs():
    assert (SPECS["MXFP4"].elem, SPECS["MXFP4"].scale, SPECS["MXFP4"].block_size) == ("e2m1", "e8m0", 32)
    assert (SPECS["MXFP8"].elem, SPECS["MXFP8"].scale, SPECS["MXFP8"].block_size) == ("e4m3", "e8m0", 32)
    nvfp4 = SPECS["NVFP4"]
    assert (nvfp4.elem, nvfp4.scale, nvfp4.block_size, nvfp4.global_scale) == ("e2m1", "ue4m3", 16, "tensor")
    assert SPECS["NVFP4_4over6"].rule == "four_over_six"


def test_named_spec_quantize_is_quantize_blocks():
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    for spec in SPECS.values():
        expected = quantize_blocks(x, spec.elem, spec.scale, spec.block_size, spec.rule, global_scale=spec.global_scale)
        assert torch.equal(quantize_tensor(x, spec), expected)


def test_nvfp4_4over6_is_more_accurate_than_nvfp4():
    x = torch.randn(256, 256, generator=torch.Generator().manual_seed(1))
    err = {name: ((quantize_tensor(x, SPECS[name]) - x) ** 2).mean().item() for name in ("NVFP4", "NVFP4_4over6")}
    assert err["NVFP4_4over6"] < err["NVFP4"]


def test_registry_covers_every_path():
    assert RECIPES["NVFP4"] == QuantRecipe(SPECS["NVFP4"], None, "W:NVFP4")
    assert RECIPES["HIF8_W8A8"] == DelayedScalingRecipe("hif8", 15.0, "max_window", (("window", 64),), "call",
                                                        ("input", "weight", "grad_output"), "HIF8_W8A8")
    assert RECIPES["PARETOQ_W2"] == LowBitRecipe(2, None, False, "PARETOQ_W2")
    assert RECIPES["PARETOQ_W1.58"].bits == 1.58
    assert RECIPES["PARETOQ_W2A8"].activation_bits == 8
    with pytest.raises(ValueError, match=r"unknown recipe 'NVFP5'; valid recipes: MXFP4"):
        get_recipe("NVFP5")


def test_every_recipe_type_derives_from_one_base():
    assert list(RECIPE_TYPES.items()) == [("block", QuantRecipe), ("delayed_scaling", DelayedScalingRecipe),
                                          ("lowbit", LowBitRecipe)]
    assert all(issubclass(kind, Recipe) for kind in RECIPE_TYPES.values())
    assert all(isinstance(recipe, Recipe) for recipe in RECIPES.values())
    with pytest.raises(TypeError, match="abstract"):
        Recipe()
    with pytest.raises(ValueError, match=r"expected a Recipe, got 'NVFP4'"):
        recipe_to_dict("NVFP4")
    assert json.dumps(LowBitRecipe(2.0).to_dict()) == json.dumps(LowBitRecipe(2).to_dict())  # 2.0 is stored as 2


def test_resolve_recipe_reads_names_json_and_files(tmp_path):
    recipe = DelayedScalingRecipe(observer="most_recent", name="mine")
    assert resolve_recipe(recipe) is recipe
    assert resolve_recipe("PARETOQ_W2") == RECIPES["PARETOQ_W2"]
    assert resolve_recipe("MXFP4", activations=True) == get_recipe("MXFP4", activations=True)
    assert resolve_recipe(json.dumps(recipe_to_dict(recipe))) == recipe
    assert resolve_recipe(json.dumps(RECIPES["NVFP4"].to_dict())) == RECIPES["NVFP4"]  # no "type": a block recipe
    path = tmp_path / "r.json"
    path.write_text(json.dumps(recipe_to_dict(recipe)))
    assert resolve_recipe(str(path)) == recipe


@pytest.mark.parametrize(("given", "activations", "message"), [
    ("NVFP9", False, r"unknown recipe 'NVFP9'; valid: a name \(MXFP4, .*HIF8_W8A8, .*\), a JSON object or a \.json "
                     r"file"),
    ("{not json", False, r"JSON recipe is not valid JSON"),
    ('{"type": "lowbit", "bits": 5}', False, r"unknown weight bit width 5"),
    ('{"weights": null, "activations": {"elem": "int8", "scale": "fp32"}}', True,
     r"activations=True \(--activations\) applies to named recipes"),
    (3, False, r"recipe must be a common\.recipes recipe or its name, got 3"),
    (RECIPES["MXFP4"], True, r"got QuantRecipe\(.* with activations=True \(which applies to names\)"),
])
def test_resolve_recipe_names_what_it_cannot_read(given, activations, message):
    with pytest.raises(ValueError, match=message):
        resolve_recipe(given, activations=activations)


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_named_recipe_round_trips_through_json(name):
    record = json.loads(json.dumps(recipe_to_dict(RECIPES[name])))
    assert record["type"] in ("block", "delayed_scaling", "lowbit")
    assert recipe_from_dict(record) == RECIPES[name]


def test_a_record_without_a_type_is_a_block_recipe():
    """Quantized checkpoints store QuantRecipe.to_dict, which has no type."""
    assert recipe_from_dict(RECIPES["MXFP4"].to_dict()) == RECIPES["MXFP4"]


@pytest.mark.parametrize(("make", "message"), [
    (lambda: DelayedScalingRecipe(format="hif9"), r"unknown format 'hif9'"),
    (lambda: DelayedScalingRecipe(max_val=0), r"max_val must be finite and > 0, got 0"),
    (lambda: DelayedScalingRecipe(max_val=True), r"max_val must be finite and > 0, got True"),
    (lambda: DelayedScalingRecipe(observer="max"), r"unknown observer 'max'; valid observers: most_recent"),
    (lambda: DelayedScalingRecipe(observer_options={"alpha": 0.1}), r"unknown option 'alpha' for observer "
                                                                     r"'max_window'; valid options: window"),
    (lambda: DelayedScalingRecipe(history_unit="batch"), r"unknown history_unit 'batch'; valid: call, step"),
    (lambda: DelayedScalingRecipe(amax_reduction="world"), r"unknown amax_reduction 'world'; valid: none, "
                                                           r"data_parallel"),
    (lambda: DelayedScalingRecipe(amax_reduction=None), r"unknown amax_reduction None"),
    (lambda: DelayedScalingRecipe(roles=("input", "input")), r"roles must be a non-empty subset of input, weight, "
                                                             r"grad_output without repeats, got \('input', 'input'\)"),
    (lambda: DelayedScalingRecipe(roles="input"), r"roles must be a non-empty subset .*got 'input'"),
    (lambda: LowBitRecipe(5), r"unknown weight bit width 5; valid: 1, 1.58, 2, 3, 4"),
    (lambda: LowBitRecipe(True), r"unknown weight bit width True"),
    (lambda: LowBitRecipe(2, activation_bits=4), r"unknown activation bit width 4; valid: None \(A16\), 8"),
    (lambda: LowBitRecipe(2, hadamard=1), r"hadamard must be a bool, got 1"),
    (lambda: recipe_from_dict({"type": "sparse"}), r"unknown recipe type 'sparse'; valid recipe types: block"),
    (lambda: LowBitRecipe.from_dict({"type": "block", "bits": 2}), r"recipe type 'block' is not 'lowbit'"),
    (lambda: LowBitRecipe.from_dict({"bits": 2, "group": 64}), r"unknown low-bit recipe key 'group'"),
    (lambda: DelayedScalingRecipe.from_dict({"window": 64}), r"unknown delayed-scaling recipe key 'window'"),
])
def test_invalid_recipes_name_the_value(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_observer_options_are_stored_sorted_and_hashable():
    recipe = DelayedScalingRecipe(observer="exp_smooth", observer_options={"alpha": 0.25})
    assert recipe.observer_options == (("alpha", 0.25),)
    assert recipe.to_dict()["observer_options"] == {"alpha": 0.25}
    assert hash(recipe) == hash(DelayedScalingRecipe.from_dict(recipe.to_dict()))


def test_roles_are_stored_in_gemm_order():
    recipe = DelayedScalingRecipe(roles=["weight", "input"])
    assert recipe.roles == ("input", "weight")
    assert recipe.to_dict()["roles"] == ["input", "weight"]
    assert DelayedScalingRecipe.from_dict(recipe.to_dict()) == recipe


def test_amax_reduction_is_part_of_the_record():
    recipe = DelayedScalingRecipe(amax_reduction="data_parallel", name="dp")
    record = json.loads(json.dumps(recipe_to_dict(recipe)))
    assert record["amax_reduction"] == "data_parallel"
    assert recipe_from_dict(record) == recipe
    assert RECIPES["HIF8_W8A8"].amax_reduction == "none"  # per rank by default, as the authors' code
    old = {key: value for key, value in recipe_to_dict(RECIPES["HIF8_W8A8"]).items() if key != "amax_reduction"}
    assert recipe_from_dict(old) == RECIPES["HIF8_W8A8"]  # a record written before the field reads as "none"


def test_learned_scales_spec_is_a_block_recipe_too():
    spec = QuantSpec("midrise2", "fp32", "row", rule=None)
    assert recipe_from_dict(recipe_to_dict(QuantRecipe(spec, None, "paretoq-w2"))).weights == spec
