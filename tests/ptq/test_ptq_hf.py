"""transformers' from_pretrained on quantized checkpoints (common.ptq.hf): after ``import common.ptq.hf`` it builds
exactly the model load_quantized_checkpoint builds, for every recipe family; without the registration plain
loading fails loudly instead of initialising the quantized weights at random."""

import subprocess
import sys

import pytest
import torch
import transformers
from ptq_testing import (
    RECIPES,
    assert_same_state,
    codes_and_materialize,
    learned_recipe,
    logits,
    mlp_names,
    trained_lowbit,
)
from transformers.quantizers import auto

from common.ptq import QuantRecipe, load_quantized_checkpoint, save_quantized_checkpoint
from common.ptq.checkpoint import QUANT_METHOD, rebuild_weight
from common.ptq.hf import LowbitLabConfig, LowbitLabHfQuantizer

HIF8_W8A8 = QuantRecipe.from_dict({  # the Max-Window pipeline's HiF8 W8A8 per-tensor checkpoint recipe
    "name": "HiF8 W8A8 per-tensor",
    "weights": {"elem": "hif8", "scale": "fp32", "block_size": None, "rule": "unit", "global_scale": "tensor",
                "global_target": 15.0},
    "activations": {"elem": "hif8", "scale": "fp32", "block_size": None, "rule": "unit", "global_scale": "tensor",
                    "global_target": 15.0},
})
FAMILIES = {**RECIPES, "hif8_w8a8": HIF8_W8A8}


def assert_same_model(a, b, input_ids):
    assert_same_state(a.state_dict(), b.state_dict())
    assert torch.equal(logits(a, input_ids), logits(b, input_ids))


@pytest.mark.parametrize("recipe_id", list(FAMILIES))
def test_from_pretrained_is_load_quantized_checkpoint(tmp_path, model, input_ids, recipe_id):
    recipe, names = FAMILIES[recipe_id], mlp_names(range(1, 6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    ours, handle = load_quantized_checkpoint(tmp_path / "q")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "q")
    assert isinstance(theirs.hf_quantizer, LowbitLabHfQuantizer)
    assert_same_model(ours, theirs, input_ids)
    assert len(theirs.hf_quantizer.handle._hooks) == len(handle._hooks) == (0 if recipe.activations is None
                                                                            else len(names))
    theirs.hf_quantizer.handle.remove()  # the activation quantization goes, the rebuilt weights stay
    handle.remove()
    assert_same_model(ours, theirs, input_ids)


@pytest.mark.parametrize(("bits", "activation_bits"), [(1, None), (2, 8), (4, None)])
def test_from_pretrained_of_learned_scales(tmp_path, input_ids, bits, activation_bits):
    trained, handle = trained_lowbit(bits, activation_bits)
    names = list(handle.names)
    scales, _ = codes_and_materialize(handle)
    save_quantized_checkpoint(trained, None, learned_recipe(bits, activation_bits), names, tmp_path / "q",
                              weight_scales=scales)
    ours, _ = load_quantized_checkpoint(tmp_path / "q")
    assert_same_model(ours, transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "q"), input_ids)


@pytest.mark.parametrize("recipe_id", ["NVFP4_act", "e2m3_e8m0_act_only"])
def test_plain_transformers_fails_loudly(tmp_path, model, monkeypatch, recipe_id):
    """Without the registration (a process that never imported common.ptq.hf) the guards make loading fail, also
    for an activation-only recipe, whose weights are kept in float but whose input quantization would be lost."""
    save_quantized_checkpoint(model, None, RECIPES[recipe_id], mlp_names(range(6)), tmp_path / "q")
    monkeypatch.delitem(auto.AUTO_QUANTIZER_MAPPING, QUANT_METHOD)
    monkeypatch.delitem(auto.AUTO_QUANTIZATION_CONFIG_MAPPING, QUANT_METHOD)
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "q")


def test_bfloat16_load_rounds_the_rebuilt_weights_once(tmp_path, model):
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, RECIPES["MXFP4"], names, tmp_path / "q")
    ours, _ = load_quantized_checkpoint(tmp_path / "q")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "q", dtype=torch.bfloat16)
    for name in names:
        assert torch.equal(theirs.get_submodule(name).weight, ours.get_submodule(name).weight.bfloat16()), name


def test_save_pretrained_of_a_loaded_model_is_refused(tmp_path, model):
    save_quantized_checkpoint(model, None, RECIPES["NVFP4_act"], mlp_names(range(6)), tmp_path / "q")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "q")
    with pytest.raises(ValueError, match="lowbit-lab and is not serializable"):
        loaded.save_pretrained(tmp_path / "again")


def test_quantizing_while_loading_is_refused(tmp_path, model):
    save_quantized_checkpoint(model, None, RECIPES["NVFP4_act"], mlp_names(range(6)), tmp_path / "q")
    model.save_pretrained(tmp_path / "plain")
    config = LowbitLabConfig(**transformers.AutoConfig.from_pretrained(tmp_path / "q").quantization_config)
    with pytest.raises(ValueError, match="pre-quantized"):
        transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "plain", quantization_config=config)


def test_unreadable_record_in_config_json_is_refused():
    with pytest.raises(ValueError, match=r"config.json quantization_config: unsupported format 'other' version 3"):
        LowbitLabConfig(quant_method=QUANT_METHOD, format="other", format_version=3)


def test_rebuild_weight_names_a_missing_tensor():
    meta = {"stored_quantized": True, "format_version": 3}
    with pytest.raises(ValueError, match=r"quantized module 'mlp.up' has no stored 'qscales' tensor"):
        rebuild_weight(meta, "mlp.up", {"qcodes": torch.zeros(1, dtype=torch.uint8)}, RECIPES["MXFP4"])


def test_only_importing_common_ptq_hf_registers(tmp_path, model):
    """In a fresh process: importing common.ptq registers nothing and leaves transformers' quantizer registry
    unloaded, so from_pretrained fails loudly; after ``import common.ptq.hf`` it loads the quantized model."""
    save_quantized_checkpoint(model, None, RECIPES["MXFP4"], mlp_names(range(6)), tmp_path / "q")
    script = ("import sys, common.ptq, transformers\n"
              "print('transformers.quantizers.auto' in sys.modules)\n"
              "try:\n"
              f"    transformers.AutoModelForCausalLM.from_pretrained({str(tmp_path / 'q')!r})\n"
              "except RuntimeError as error:\n"
              "    print('ignore_mismatched_sizes' in str(error))\n"
              "import common.ptq.hf\n"
              f"m = transformers.AutoModelForCausalLM.from_pretrained({str(tmp_path / 'q')!r})\n"
              "print(type(m.hf_quantizer).__name__)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True", "LowbitLabHfQuantizer"]
