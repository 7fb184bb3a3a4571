"""common.quantization, the front door: quantize_ is apply_quantization on the default selection; prepare/convert
run each QAT path and leave the deployed form (the same forward values as the QAT forward, bit for bit); release
ends QAT keeping the latent weights."""

import json

import pytest
import torch
from ptq_testing import TINY, logits, mlp_names, snapshot, tiny_llama

from common.ptq import select_linears
from common.quantization import PREPARED, convert, prepare, quantize_, release
from common.quantizers import apply_quantization, lowbit_selection
from common.recipes import RECIPES, DelayedScalingRecipe, LowBitRecipe, get_recipe, recipe_to_dict

INPUT = torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(3))


def test_quantize_is_apply_quantization_on_the_default_selection():
    ours, reference = tiny_llama(), tiny_llama()
    original = snapshot(ours)
    handle = quantize_(ours, "NVFP4")
    with apply_quantization(reference, select_linears(reference), RECIPES["NVFP4"]):
        assert torch.equal(logits(ours, INPUT), logits(reference, INPUT))
    handle.remove()
    assert all(torch.equal(value, original[key]) for key, value in ours.state_dict().items())


def test_filter_fn_or_names_pick_the_layers():
    model = tiny_llama()
    handle = quantize_(model, "MXFP4", filter_fn=lambda module, name: name.endswith("mlp.down_proj"))
    down = [f"model.layers.{i}.mlp.down_proj" for i in range(TINY["num_hidden_layers"])]
    assert handle.names == down
    handle.remove()
    assert quantize_(model, "MXFP4", names=down[:2]).names == down[:2]
    with pytest.raises(ValueError, match=r"filter_fn selected no nn\.Linear module"):
        quantize_(tiny_llama(), "MXFP4", filter_fn=lambda module, name: False)
    with pytest.raises(ValueError, match=r"give filter_fn or names, not both"):
        prepare(tiny_llama(), "MXFP4", filter_fn=lambda module, name: True, names=down)
    with pytest.raises(ValueError, match=r"module 'model\.norm' is not an nn\.Linear"):
        quantize_(tiny_llama(), "MXFP4", names=["model.norm"])


def test_quantize_refuses_a_qat_recipe():
    with pytest.raises(ValueError, match=r"LowBitRecipe 'PARETOQ_W2' is a QAT recipe, and post-training quantization "
                                         r"\(quantize_\) applies block recipes: use prepare"):
        quantize_(tiny_llama(), "PARETOQ_W2")


def test_recipes_are_resolved_as_the_command_lines_resolve_them(tmp_path):
    """A JSON object and a .json file name a recipe too (common.recipes.resolve_recipe)."""
    recipe = get_recipe("NVFP4", activations=True)
    path = tmp_path / "recipe.json"
    path.write_text(json.dumps(recipe.to_dict()))
    for given in (json.dumps(recipe.to_dict()), str(path)):
        model = tiny_llama()
        assert quantize_(model, given).recipe == recipe
    assert prepare(tiny_llama(), json.dumps(recipe_to_dict(RECIPES["PARETOQ_W2"]))).recipe == RECIPES["PARETOQ_W2"]


def test_block_qat_converts_to_its_ptq():
    """STE fake-quant QAT forward == the converted model's forward == PTQ of the trained weights."""
    model = tiny_llama()
    recipe = get_recipe("NVFP4", activations=True)
    prepare(model, recipe, filter_fn=lambda module, name: name in mlp_names(range(6)))
    qat_logits = logits(model, INPUT)
    handle = convert(model)
    assert torch.equal(logits(model, INPUT), qat_logits)
    assert handle.names == mlp_names(range(6))
    assert not hasattr(model, PREPARED)


@pytest.mark.parametrize(("bits", "activation_bits", "hadamard"), [(1, None, False), (2, 8, False), (4, 8, True)])
def test_lowbit_qat_converts_to_its_effective_weights(bits, activation_bits, hadamard):
    model = tiny_llama()  # power-of-two widths (32, 64): the Hadamard rotation applies
    handle = prepare(model, LowBitRecipe(bits, activation_bits, hadamard))
    assert handle.names == lowbit_selection(model)
    effective = {name: handle.quantized_weight(name) for name in handle.names}
    qat_logits = logits(model, INPUT)
    hooks = convert(model)
    for name, weight in effective.items():
        assert torch.equal(model.get_submodule(name).weight, weight), name
    assert torch.equal(logits(model, INPUT), qat_logits)
    assert (hooks is None) == (activation_bits is None)


def test_delayed_scaling_prepares_w8a8_and_converts_to_the_trained_weights():
    model = tiny_llama()
    weights = snapshot(model)
    handle = prepare(model, "HIF8_W8A8")
    layer = next(iter(handle.layers.values()))
    assert layer.quantizers["input"].observer.window == 64
    model.train()
    model(INPUT).logits.sum().backward()
    assert convert(model) is None
    assert all("forward" not in module.__dict__ for module in model.modules())
    assert all(torch.equal(value, weights[key]) for key, value in model.state_dict().items())


@pytest.mark.parametrize("recipe", ["NVFP4", "HIF8_W8A8", "PARETOQ_W2A8"])
def test_release_keeps_the_latent_weights(recipe):
    """What a QAT run checkpoints: the quantizers go, the layers keep their (here untrained) latent weights."""
    model, reference = tiny_llama(), tiny_llama()
    prepare(model, recipe)
    assert release(model) is None
    assert not hasattr(model, PREPARED)
    assert all(not hasattr(module, "parametrizations") and "forward" not in module.__dict__
               for module in model.modules())
    assert all(not module._forward_pre_hooks for module in model.modules())
    assert torch.equal(logits(model, INPUT), logits(reference, INPUT))
    assert release(model) is None  # nothing prepared: nothing happens
    prepare(model, recipe)  # released: the model may be prepared again


def test_prepare_twice_and_convert_unprepared_are_refused():
    model = tiny_llama()
    prepare(model, DelayedScalingRecipe(observer="most_recent"))
    with pytest.raises(ValueError, match="prepared for QAT already: convert"):
        prepare(model, "PARETOQ_W2")
    convert(model)
    with pytest.raises(ValueError, match=r"not prepared for QAT \(prepare\(model, recipe\) first\)"):
        convert(model)
    with pytest.raises(ValueError, match=r"recipe must be a common\.recipes recipe or its name, got 3"):
        prepare(model, 3)
