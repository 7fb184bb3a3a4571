"""apply_quantization: weights become quantize_blocks of themselves, inputs are quantized by a pre-hook, and
remove() gives the model back bit-exactly."""

import pytest
import torch
from ptq_testing import assert_same_state, logits, mlp_names, snapshot

from common.ptq import QuantRecipe, QuantSpec
from common.quantizers import apply_quantization
from common.recipes import get_recipe
from common.scaling import quantize_blocks

NVFP4_ACT = get_recipe("NVFP4", activations=True)


def test_weights_are_quantized_along_in_features_and_restored_bit_exactly(model, input_ids):
    names = mlp_names(range(1, 5))
    before, params, reference = snapshot(model), dict(model.named_parameters()), logits(model, input_ids)
    handle = apply_quantization(model, names, NVFP4_ACT)
    assert handle.active
    for key, value in model.state_dict().items():
        if key.removesuffix(".weight") in names:
            expected = quantize_blocks(before[key], "e2m1", "ue4m3", 16, "absmax", global_scale="tensor", axis=1)
            assert torch.equal(value, expected), key
        else:
            assert torch.equal(value, before[key]), key
    assert not torch.equal(logits(model, input_ids), reference)

    handle.remove()
    assert not handle.active
    assert_same_state(model.state_dict(), before)
    assert all(param is params[name] for name, param in model.named_parameters())
    assert not any(module._forward_pre_hooks for module in model.modules())
    assert torch.equal(logits(model, input_ids), reference)
    handle.remove()  # idempotent


def test_context_manager_restores(model, input_ids):
    before, reference = snapshot(model), logits(model, input_ids)
    with apply_quantization(model, mlp_names(range(6)), get_recipe("MXFP4")):
        assert not torch.equal(logits(model, input_ids), reference)
    assert_same_state(model.state_dict(), before)
    assert torch.equal(logits(model, input_ids), reference)


def test_activation_hook_quantizes_the_input_exactly(model, input_ids):
    module = model.model.layers[2].mlp.down_proj
    seen = {}
    module.register_forward_pre_hook(lambda _, args: seen.__setitem__("raw", args[0].clone()))  # runs first
    module.register_forward_hook(lambda _, args, out: seen.update(used=args[0], out=out))
    spec = QuantSpec("e2m1", "ue4m3", 16, "four_over_six", global_scale="row")
    with apply_quantization(model, ["model.layers.2.mlp.down_proj"], QuantRecipe(None, spec)):
        logits(model, input_ids)
    expected = quantize_blocks(seen["raw"], "e2m1", "ue4m3", 16, "four_over_six", global_scale="row", axis=-1)
    assert seen["raw"].shape == (2, 12, 64)
    assert torch.equal(seen["used"], expected)
    assert not torch.equal(seen["used"], seen["raw"])
    assert torch.equal(seen["out"], torch.nn.functional.linear(expected, module.weight))


def test_weights_false_attaches_only_hooks(model):
    before = snapshot(model)
    handle = apply_quantization(model, mlp_names([0]), NVFP4_ACT, weights=False)
    assert_same_state(model.state_dict(), before)
    assert sum(len(m._forward_pre_hooks) for m in model.modules()) == 3
    handle.remove()
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_a_failure_half_way_undoes_everything(model):
    model.model.layers[3].mlp.up_proj.half()  # quantize_blocks refuses float16: fails at the 11th module
    before = snapshot(model)
    with pytest.raises(ValueError, match=r"unsupported dtype torch\.float16"):
        apply_quantization(model, mlp_names(range(6)), NVFP4_ACT)
    assert_same_state(model.state_dict(), before)
    assert not any(m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize(("names", "message"), [
    (["model.layers.0.mlp"], "module 'model.layers.0.mlp' is not an nn.Linear of the model \\(LlamaMLP\\)"),
    (["model.layers.9.mlp.up_proj"], "'model.layers.9.mlp.up_proj' is not an nn.Linear .*no such module"),
    ([], "names must be a non-empty list"),
    ("lm_head", "names must be a non-empty list of module names, got 'lm_head'"),
])
def test_bad_names(model, names, message):
    with pytest.raises(ValueError, match=message):
        apply_quantization(model, names, NVFP4_ACT)
