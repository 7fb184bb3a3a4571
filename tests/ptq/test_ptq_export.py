"""compressed-tensors export (common.ptq.export): NVFP4 (4/6 included) and MXFP4 checkpoints that transformers loads
through compressed-tensors, offline; the stored codes and scales are ours bit for bit, and the decompressed weights
are ours (bit for bit, or rounded to bfloat16 where compressed-tensors' own decompression rounds)."""

import json

import pytest
import torch
import transformers
from ptq_testing import mlp_names
from safetensors.torch import load_file

from common.ptq import QuantRecipe, QuantSpec, load_quantized_checkpoint, save_quantized_checkpoint
from common.ptq.cli import main
from common.ptq.export import compressed_tensors_format, export_compressed_tensors
from common.recipes import get_recipe

EXPORTED = {  # recipe, layout, whether compressed-tensors' bfloat16 decompression is exact
    "NVFP4": (get_recipe("NVFP4"), "nvfp4-pack-quantized", False),
    "NVFP4_4over6": (get_recipe("NVFP4_4over6"), "nvfp4-pack-quantized", False),
    "NVFP4_no_global": (QuantRecipe(QuantSpec("e2m1", "ue4m3", 16)), "nvfp4-pack-quantized", True),
    "NVFP4_prevent_zero": (QuantRecipe(QuantSpec("e2m1", "ue4m3", 16, prevent_zero=True, global_scale="tensor")),
                           "nvfp4-pack-quantized", False),
    "MXFP4": (get_recipe("MXFP4"), "mxfp4-pack-quantized", True),
}


def load_with_compressed_tensors(folder):
    config = transformers.CompressedTensorsConfig(dequantize=True)
    return transformers.AutoModelForCausalLM.from_pretrained(folder, quantization_config=config, dtype=torch.float32)


@pytest.mark.parametrize("recipe_id", list(EXPORTED))
def test_compressed_tensors_loads_our_weights(tmp_path, model, recipe_id):
    recipe, layout, exact = EXPORTED[recipe_id]
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    export_compressed_tensors(tmp_path / "q", tmp_path / "ct")
    config = json.loads((tmp_path / "ct" / "config.json").read_text())["quantization_config"]
    assert (config["quant_method"], config["format"], config["quantization_status"]) == (
        "compressed-tensors", layout, "compressed")
    assert config["config_groups"]["group_0"]["targets"] == names
    ours, _ = load_quantized_checkpoint(tmp_path / "q")
    theirs = load_with_compressed_tensors(tmp_path / "ct")
    ours_state, theirs_state = ours.state_dict(), theirs.state_dict()
    for key, value in ours_state.items():
        expected = value.bfloat16().float() if not exact and key.removesuffix(".weight") in names else value
        assert torch.equal(theirs_state[key], expected), key
    assert any(not torch.equal(ours_state[f"{n}.weight"], ours_state[f"{n}.weight"].bfloat16().float())
               for n in names) != exact  # the bfloat16 rounding is real where it is claimed


@pytest.mark.parametrize("recipe_id", ["NVFP4", "MXFP4"])
def test_stored_codes_and_scales_are_ours_bit_for_bit(tmp_path, model, recipe_id):
    recipe, layout, _ = EXPORTED[recipe_id]
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    export_compressed_tensors(tmp_path / "q", tmp_path / "ct")
    ours, theirs = load_file(tmp_path / "q" / "model.safetensors"), load_file(tmp_path / "ct" / "model.safetensors")
    for name in names:
        assert torch.equal(theirs[f"{name}.weight_packed"], ours[f"{name}.qcodes"])
        scale = theirs[f"{name}.weight_scale"]
        # UE4M3 codes are E4M3 codes with the sign bit clear; E8M0 codes are compressed-tensors' biased exponents
        assert torch.equal(scale.view(torch.uint8) if layout.startswith("nvfp4") else scale, ours[f"{name}.qscales"])
        if layout.startswith("nvfp4"):
            assert theirs[f"{name}.weight_global_scale"].shape == (1,)
            assert theirs[f"{name}.weight_global_scale"].item() == pytest.approx(1 / ours[f"{name}.qglobal"].item(),
                                                                               rel=1e-7)
        assert f"{name}.weight" not in theirs
    assert torch.equal(theirs["model.layers.0.self_attn.q_proj.weight"], ours["model.layers.0.self_attn.q_proj.weight"])


def test_weights_blocked_along_another_axis_have_no_compressed_tensors_format():
    with pytest.raises(ValueError, match=r"e2m1/ue4m3 block 16 global 'tensor' axis 0 have no compressed-tensors"):
        compressed_tensors_format(QuantSpec("e2m1", "ue4m3", 16, global_scale="tensor", axis=0))
    assert compressed_tensors_format(QuantSpec("e2m1", "ue4m3", 16, global_scale="tensor")) == "nvfp4-pack-quantized"


@pytest.mark.parametrize(("recipe", "match"), [
    (QuantRecipe(QuantSpec("hif8", "fp32", None)), r"weights hif8/fp32 block None global None axis -1 have no "
                                                   r"compressed-tensors format"),
    (QuantRecipe(QuantSpec("e2m1", "ue5m3", 16)), r"e2m1/ue5m3 block 16 .* no compressed-tensors format"),
    (QuantRecipe(QuantSpec("e2m1", "ue4m3", 16, global_scale="row")), r"global 'row' axis -1 have no"),
    (get_recipe("NVFP4", activations=True), r"quantizes activations.*--weights-only"),
    (QuantRecipe(None, QuantSpec("e2m1", "ue4m3", 16)), r"stores no weight codes"),
])
def test_recipes_without_a_compressed_tensors_format_are_refused(tmp_path, model, recipe, match):
    save_quantized_checkpoint(model, None, recipe, mlp_names(range(6)), tmp_path / "q")
    with pytest.raises(ValueError, match=match):
        export_compressed_tensors(tmp_path / "q", tmp_path / "ct")
    assert not (tmp_path / "ct").exists()


def test_weights_only_export_of_an_activation_recipe(tmp_path, model):
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, get_recipe("MXFP4", activations=True), names, tmp_path / "q")
    export_compressed_tensors(tmp_path / "q", tmp_path / "ct", weights_only=True)
    config = json.loads((tmp_path / "ct" / "config.json").read_text())["quantization_config"]
    assert config["config_groups"]["group_0"]["input_activations"] is None
    ours, _ = load_quantized_checkpoint(tmp_path / "q")
    theirs = load_with_compressed_tensors(tmp_path / "ct")
    for name in names:
        assert torch.equal(theirs.get_submodule(name).weight, ours.get_submodule(name).weight)


def test_export_command(tmp_path, model, capsys):
    save_quantized_checkpoint(model, None, get_recipe("NVFP4"), mlp_names(range(6)), tmp_path / "q")
    assert main(["export", "--model", str(tmp_path / "q"), "--format", "compressed-tensors",
                 "--out", str(tmp_path / "ct")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["layout"] == "nvfp4-pack-quantized"
    assert summary["checkpoint_bytes"] == (tmp_path / "ct" / "model.safetensors").stat().st_size
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "--model", str(tmp_path / "q"), "--format", "compressed-tensors", "--out", str(tmp_path / "q")])
    assert exit_info.value.code == 2
    assert "is the --model folder" in capsys.readouterr().err
