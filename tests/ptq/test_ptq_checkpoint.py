"""Quantized checkpoints: codes + scales on disk, rebuilt torch.equal to apply_quantization, atomically written;
k-bit code packing (1, 2, 3, 4, 8 bits) and reading version-1 and version-2 checkpoints."""

import json
import struct

import pytest
import torch
from ptq_testing import RECIPES, TINY, assert_same_state, logits, mlp_names, snapshot, tiny_llama
from safetensors.torch import load_file, save_file

from common.ptq import (
    QuantRecipe,
    QuantSpec,
    checkpoint_size_bytes,
    load_quantized_checkpoint,
    read_quantization_config,
    save_quantized_checkpoint,
    size_report,
)
from common.ptq.checkpoint import (
    CHECKPOINT_FORMAT_VERSION,
    QUANT_CONFIG_FILE,
    codes_per_byte,
    pack_codes,
    unpack_codes,
)
from common.quantization import quantize_
from common.recipes import get_recipe


def header(folder):
    """name -> (dtype, shape, bytes) from the safetensors header."""
    with open(folder / "model.safetensors", "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        entries = json.loads(handle.read(length))
    entries.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], v["data_offsets"][1] - v["data_offsets"][0]) for k, v in entries.items()}


@pytest.mark.parametrize("recipe_id", list(RECIPES))
def test_save_load_equals_apply_quantization(tmp_path, model, input_ids, recipe_id):
    recipe, names = RECIPES[recipe_id], mlp_names(range(1, 6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    loaded, handle = load_quantized_checkpoint(tmp_path / "q")
    with quantize_(model, recipe, names=names):
        assert_same_state(loaded.state_dict(), model.state_dict())
        assert torch.equal(logits(loaded, input_ids), logits(model, input_ids))
    assert len(handle._hooks) == (0 if recipe.activations is None else len(names))
    handle.remove()
    assert not any(m._forward_pre_hooks for m in loaded.modules())


def test_files_and_quantization_config(tmp_path, model):
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, RECIPES["NVFP4_act"], names, tmp_path / "q")
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == [
        "config.json", "model.safetensors", "quantization_config.json"]
    meta = read_quantization_config(tmp_path / "q")
    assert meta["modules"] == names
    assert meta["recipe"] == RECIPES["NVFP4_act"].to_dict()
    assert meta["weights"]["model.layers.0.mlp.down_proj"] == {"shape": [32, 64], "dtype": "float32"}
    assert meta["packing"]["packed"]
    assert meta["packing"]["codes_per_byte"] == 2
    assert meta["scale_storage"] == "codes"
    assert set(meta["versions"]) == {"lowbit-lab", "torch", "transformers"}
    entries = header(tmp_path / "q")
    assert entries["model.layers.0.mlp.down_proj.qcodes"] == ("U8", [32, 32], 32 * 32)
    assert entries["model.layers.0.mlp.down_proj.qscales"] == ("U8", [32, 4], 32 * 4)
    assert entries["model.layers.0.mlp.down_proj.qglobal"] == ("F32", [], 4)
    assert entries["model.layers.0.mlp.down_proj.weight"] == ("U8", [0], 0)  # the guard (common.ptq.hf)
    assert meta["tensors"]["model.layers.0.mlp.down_proj"] == {
        "weight": {"dtype": "uint8", "shape": [0]}, "qcodes": {"dtype": "uint8", "shape": [32, 32]},
        "qscales": {"dtype": "uint8", "shape": [32, 4]}, "qglobal": {"dtype": "float32", "shape": []}}
    config = json.loads((tmp_path / "q" / "config.json").read_text())
    assert config["quantization_config"] == {"quant_method": "lowbit-lab", **meta}
    assert entries["model.layers.0.self_attn.q_proj.weight"] == ("F32", [32, 32], 32 * 32 * 4)
    assert json.loads((tmp_path / "q" / "config.json").read_text())["num_hidden_layers"] == 6


def test_per_tensor_fp32_scale_storage(tmp_path, model):
    save_quantized_checkpoint(model, None, RECIPES["e4m3_per_tensor_fp32"], ["lm_head"], tmp_path / "q")
    entries = header(tmp_path / "q")
    assert entries["lm_head.qcodes"] == ("U8", [TINY["vocab_size"], 32], TINY["vocab_size"] * 32)
    assert entries["lm_head.qscales"] == ("F32", [1], 4)
    assert "lm_head.qglobal" not in entries
    assert read_quantization_config(tmp_path / "q")["scale_storage"] == "float32"


def test_packed_4bit_codes_halve_the_code_bytes(tmp_path, model):
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, get_recipe("MXFP4"), names, tmp_path / "fp4")
    save_quantized_checkpoint(model, None, get_recipe("MXFP8"), names, tmp_path / "fp8")
    fp4, fp8 = header(tmp_path / "fp4"), header(tmp_path / "fp8")
    for name in names:
        assert 2 * fp4[f"{name}.qcodes"][2] == fp8[f"{name}.qcodes"][2] == model.get_submodule(name).weight.numel()
    assert not read_quantization_config(tmp_path / "fp8")["packing"]["packed"]


def test_nibble_packing_round_trip_odd_length():
    codes = torch.randint(0, 16, (3, 7), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    packed = pack_codes(codes, 2)
    assert packed.shape == (3, 4)
    assert packed[0, 0] == codes[0, 0] | codes[0, 1] << 4
    assert packed[0, 3] == codes[0, 6]
    assert torch.equal(unpack_codes(packed, 7, 2), codes)


@pytest.mark.parametrize(("bits", "per_byte"), [(1, 8), (2, 4), (3, 2), (4, 2), (5, 1), (8, 1)])
def test_codes_per_byte(bits, per_byte):
    assert codes_per_byte(bits) == per_byte


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("length", [1, 7, 8, 13, 64])
def test_packing_round_trip_and_byte_layout(bits, length):
    """``byte[j] = sum_i code[n j + i] << (i 8 / n)``, low bits first, zero-padded; unpack inverts it."""
    per_byte = codes_per_byte(bits)
    codes = torch.randint(0, 2**bits, (3, length), dtype=torch.uint8, generator=torch.Generator().manual_seed(bits))
    packed = pack_codes(codes, per_byte)
    assert packed.dtype == torch.uint8
    assert packed.shape == (3, -(-length // per_byte))
    padded = torch.nn.functional.pad(codes.long(), (0, -length % per_byte)).reshape(3, -1, per_byte)
    expected = sum(padded[..., i] << (i * 8 // per_byte) for i in range(per_byte))
    assert torch.equal(packed.long(), expected)
    assert torch.equal(unpack_codes(packed, length, per_byte), codes)


def test_bad_packing_arguments():
    with pytest.raises(ValueError, match=r"element codes have 1 to 8 bits, got 9"):
        codes_per_byte(9)
    with pytest.raises(ValueError, match=r"codes_per_byte must be 1, 2, 4 or 8, got 3"):
        pack_codes(torch.zeros(2, dtype=torch.uint8), 3)


# element formats of 1, 1.58 (2-bit codes), 2, 3, 4 and 8 bits, one fp32 scale per row
ROW_FORMATS = {"binary": 8, "ternary": 4, "midrise2": 4, "int2": 4, "int3_tc": 2, "int4_tc": 2, "e2m1": 2,
               "int8": 1}


@pytest.mark.parametrize(("elem", "per_byte"), list(ROW_FORMATS.items()))
def test_per_row_codes_of_every_width_round_trip(tmp_path, model, input_ids, elem, per_byte):
    recipe = QuantRecipe(QuantSpec(elem, "fp32", "row", "absmax"), QuantSpec("int8", "fp32", "row", "absmax"))
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    meta = read_quantization_config(tmp_path / "q")
    assert meta["format_version"] == CHECKPOINT_FORMAT_VERSION == 3
    assert meta["packing"]["codes_per_byte"] == per_byte
    assert meta["packing"]["bits_per_code"] == 8 // per_byte
    assert meta["packing"]["packed"] == (per_byte > 1)
    assert meta["recipe"]["weights"]["block_size"] == "row"
    entries = header(tmp_path / "q")
    assert entries["model.layers.0.mlp.down_proj.qcodes"] == ("U8", [32, 64 // per_byte], 32 * 64 // per_byte)
    assert entries["model.layers.0.mlp.down_proj.qscales"] == ("F32", [32, 1], 32 * 4)
    loaded, _ = load_quantized_checkpoint(tmp_path / "q")
    with quantize_(model, recipe, names=names):
        assert_same_state(loaded.state_dict(), model.state_dict())
        assert torch.equal(logits(loaded, input_ids), logits(model, input_ids))
    report = size_report(model, tmp_path / "q")
    rows = 6 * (64 + 64 + 32)  # gate, up (64 x 32), down (32 x 64)
    weights = 6 * 3 * 32 * 64
    assert report["selected_quantized_bytes"] == weights // per_byte + 4 * rows
    assert report["bits_per_weight"] == pytest.approx(8 / per_byte + 32 * rows / weights, rel=1e-12)  # 1-bit: 1.83


def rewrite_as_version_2(folder):
    """Turn a version-3 checkpoint into what the version-2 writer made: no ``<name>.weight`` guards, an
    activation-only recipe's weights under ``<name>.weight`` (not ``.qweight``), no ``tensors`` record and no
    ``quantization_config`` in ``config.json``."""
    meta = json.loads((folder / QUANT_CONFIG_FILE).read_text())
    tensors = load_file(folder / "model.safetensors")
    for name in meta["modules"]:
        del tensors[f"{name}.weight"]
        if f"{name}.qweight" in tensors:
            tensors[f"{name}.weight"] = tensors.pop(f"{name}.qweight")
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    del meta["tensors"]
    meta["format_version"] = 2
    (folder / QUANT_CONFIG_FILE).write_text(json.dumps(meta))
    config = json.loads((folder / "config.json").read_text())
    del config["quantization_config"]
    (folder / "config.json").write_text(json.dumps(config))


def rewrite_as_version_1(folder, per_byte_v1):
    """Turn a version-3 checkpoint into what the version-1 writer made: version 2's layout, ``per_byte_v1`` codes
    per byte (2 for formats of 4 bits or fewer, else 1) and its ``packing`` record."""
    rewrite_as_version_2(folder)
    meta = json.loads((folder / QUANT_CONFIG_FILE).read_text())
    tensors = load_file(folder / "model.safetensors")
    for name in meta["modules"]:
        key, length = f"{name}.qcodes", meta["weights"][name]["shape"][-1]
        tensors[key] = pack_codes(unpack_codes(tensors[key], length, meta["packing"]["codes_per_byte"]), per_byte_v1)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    meta.pop("scales")
    meta["format_version"] = 1
    meta["packing"] = {"codes_per_byte": 2, "for_elem_bits_at_most": 4, "axis": -1, "order": "low nibble first",
                       "padding": "zero-padded to an even length along the axis", "packed": per_byte_v1 == 2}
    (folder / QUANT_CONFIG_FILE).write_text(json.dumps(meta))


@pytest.mark.parametrize(("recipe", "per_byte_v1"), [
    (get_recipe("NVFP4", activations=True), 2),  # 4 bits: nibbles in both versions
    (QuantRecipe(QuantSpec("int2", "ue4m3", 16)), 2),  # 2 bits: version 1 packed 2 per byte, version 2 packs 4
    (QuantRecipe(QuantSpec("hif8", "fp32", None)), 1),  # 8 bits: one per byte
])
def test_version_1_checkpoints_are_still_read(tmp_path, model, input_ids, recipe, per_byte_v1):
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    rewrite_as_version_1(tmp_path / "q", per_byte_v1)
    assert read_quantization_config(tmp_path / "q")["format_version"] == 1
    loaded, _ = load_quantized_checkpoint(tmp_path / "q")
    with quantize_(model, recipe, names=names):
        assert_same_state(loaded.state_dict(), model.state_dict())
        assert torch.equal(logits(loaded, input_ids), logits(model, input_ids))


@pytest.mark.parametrize("recipe_id", ["NVFP4_act", "e2m3_e8m0_act_only"])
def test_version_2_checkpoints_are_still_read(tmp_path, model, input_ids, recipe_id):
    recipe, names = RECIPES[recipe_id], mlp_names(range(6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    rewrite_as_version_2(tmp_path / "q")
    assert read_quantization_config(tmp_path / "q")["format_version"] == 2
    loaded, _ = load_quantized_checkpoint(tmp_path / "q")
    with quantize_(model, recipe, names=names):
        assert_same_state(loaded.state_dict(), model.state_dict())
        assert torch.equal(logits(loaded, input_ids), logits(model, input_ids))


def test_unknown_versions_are_refused(tmp_path, model):
    save_quantized_checkpoint(model, None, get_recipe("NVFP4"), mlp_names(range(6)), tmp_path / "q")
    meta = json.loads((tmp_path / "q" / QUANT_CONFIG_FILE).read_text())
    (tmp_path / "q" / QUANT_CONFIG_FILE).write_text(json.dumps({**meta, "format_version": 4}))
    with pytest.raises(ValueError, match=r"unsupported format 'lowbit-lab-ptq' version 4; this reader: "
                                         r"lowbit-lab-ptq versions 1, 2, 3"):
        load_quantized_checkpoint(tmp_path / "q")


def test_sizes_smaller_than_the_fp32_original(tmp_path, model):
    model.save_pretrained(tmp_path / "orig")
    names = mlp_names(range(6))
    save_quantized_checkpoint(model, None, RECIPES["NVFP4_act"], names, tmp_path / "q")
    report = size_report(model, tmp_path / "q")
    weights = 6 * 3 * 32 * 64
    assert report["selected_original_bytes"] == 4 * weights
    assert report["selected_quantized_bytes"] == weights // 2 + weights // 16 + 4 * len(names)
    assert 4.5 < report["bits_per_weight"] < 4.52
    assert report["checkpoint_bytes"] == checkpoint_size_bytes(tmp_path / "q")
    assert report["checkpoint_bytes"] < checkpoint_size_bytes(tmp_path / "orig")
    header_bytes = report["checkpoint_bytes"] - (report["original_bytes"] - report["selected_original_bytes"]
                                                 + report["selected_quantized_bytes"])
    with open(tmp_path / "q" / "model.safetensors", "rb") as handle:
        assert header_bytes == 8 + struct.unpack("<Q", handle.read(8))[0]  # the rest: the safetensors header
    assert report["ratio"] == report["checkpoint_bytes"] / report["original_bytes"]


def test_tied_embeddings_are_stored_once_and_stay_tied(tmp_path, input_ids):
    model = tiny_llama(tie_word_embeddings=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    recipe, names = get_recipe("NVFP4"), mlp_names(range(6))
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    assert read_quantization_config(tmp_path / "q")["tied"] == {"lm_head.weight": "model.embed_tokens.weight"}
    assert "lm_head.weight" not in header(tmp_path / "q")
    loaded, _ = load_quantized_checkpoint(tmp_path / "q")
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    with quantize_(model, recipe, names=names):
        assert torch.equal(logits(loaded, input_ids), logits(model, input_ids))
    with pytest.raises(ValueError, match=r"weight 'lm_head\.weight' is tied to another tensor"):
        save_quantized_checkpoint(model, None, recipe, ["lm_head"], tmp_path / "tied")
    assert not (tmp_path / "tied").exists()


class FailingTokenizer:
    def save_pretrained(self, folder):
        (folder / "tokenizer.json").write_text("{")
        raise RuntimeError("disk full")


def test_failed_save_leaves_no_output_folder(tmp_path, model):
    recipe, names = get_recipe("NVFP4"), mlp_names(range(6))
    with pytest.raises(RuntimeError, match="disk full"):
        save_quantized_checkpoint(model, FailingTokenizer(), recipe, names, tmp_path / "q")
    assert list(tmp_path.iterdir()) == []
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    before = sorted(p.name for p in (tmp_path / "q").iterdir())
    with pytest.raises(RuntimeError, match="disk full"):
        save_quantized_checkpoint(model, FailingTokenizer(), recipe, names, tmp_path / "q")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q"]
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == before


def test_save_leaves_the_model_untouched(tmp_path, model):
    before = snapshot(model)
    save_quantized_checkpoint(model, None, RECIPES["NVFP4_act"], mlp_names(range(6)), tmp_path / "q")
    assert_same_state(model.state_dict(), before)
    assert not any(m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize(("recipe", "names", "message"), [
    (QuantRecipe(QuantSpec("bf16", "e8m0", 32)), ["lm_head"], "element format 'bf16' has 16 bits"),
    (get_recipe("NVFP4"), ["model.norm"], "'model.norm' is not an nn.Linear"),
    (QuantRecipe(QuantSpec("e2m1", "ue4m3", 16, axis=0)), ["lm_head"],
     r"weights blocked along axis 0: a quantized checkpoint stores weights blocked along in_features \(axis -1\)"),
])
def test_bad_saves_raise_before_writing(tmp_path, model, recipe, names, message):
    with pytest.raises(ValueError, match=message):
        save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    assert list(tmp_path.iterdir()) == []


def test_load_rejects_a_plain_folder(tmp_path, model):
    model.save_pretrained(tmp_path / "orig")
    with pytest.raises(ValueError, match=r"'.*orig' is not a quantized checkpoint"):
        load_quantized_checkpoint(tmp_path / "orig")


def test_bfloat16_source_loads_as_the_float32_quantization(tmp_path, model):
    recipe, names = get_recipe("NVFP4"), mlp_names(range(6))
    save_quantized_checkpoint(model.to(torch.bfloat16), None, recipe, names, tmp_path / "q")
    assert read_quantization_config(tmp_path / "q")["weights"][names[0]]["dtype"] == "bfloat16"
    loaded, _ = load_quantized_checkpoint(tmp_path / "q")
    with quantize_(model.float(), recipe, names=names):
        assert_same_state(loaded.state_dict(), model.state_dict())
