"""Quantized checkpoints of learned scales (ParetoQ QAT): the caller's codes and per-row scales stored as packed
integer codes, rebuilt torch.equal to the trained effective weights Q(W); the weight_scales argument checked."""

import pytest
import torch
from ptq_testing import codes_and_materialize, learned_recipe, logits, mlp_names, trained_lowbit

from common.formats import get_format
from common.ptq import (
    QuantRecipe,
    load_quantized_checkpoint,
    read_quantization_config,
    save_quantized_checkpoint,
    size_report,
)
from common.quantizers import LOWBIT_CODES, lowbit_codes
from common.recipes import INT8_PER_TOKEN, LOWBIT_BITS
from common.scaling import BlockScales


@pytest.mark.parametrize("bits", LOWBIT_BITS)
@pytest.mark.parametrize("activation_bits", [None, 8])
def test_learned_codes_rebuild_the_trained_weights_and_logits(tmp_path, input_ids, bits, activation_bits):
    model, handle = trained_lowbit(bits, activation_bits)
    names = list(handle.names)
    expected_logits = logits(model, input_ids)  # quantizers (and A8 hooks) attached
    scales, effective = codes_and_materialize(handle)
    for name in names:
        assert torch.equal(model.get_submodule(name).weight, effective[name]), name
    recipe = learned_recipe(bits, activation_bits)
    save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q", weight_scales=scales)
    loaded, loaded_handle = load_quantized_checkpoint(tmp_path / "q")
    for name in names:
        assert torch.equal(loaded.get_submodule(name).weight, effective[name]), name
    assert len(loaded_handle._hooks) == (len(names) if activation_bits == 8 else 0)
    # same weights, same per-token int8 quantization (one implementation): the same logits to the last bit
    assert torch.equal(logits(loaded, input_ids), expected_logits)
    meta = read_quantization_config(tmp_path / "q")
    assert meta["recipe"]["weights"]["rule"] is None
    assert meta["scales"] == "learned"
    code_bits = get_format(LOWBIT_CODES[bits][0]).bits
    per_byte = {1: 8, 2: 4, 3: 2, 4: 2}[code_bits]
    assert meta["packing"]["codes_per_byte"] == per_byte
    shapes = [tuple(model.get_submodule(name).weight.shape) for name in names]
    report = size_report(model, tmp_path / "q")
    payload = sum(out * -(-inp // per_byte) + 4 * out for out, inp in shapes)
    assert report["selected_quantized_bytes"] == payload
    if bits == 1:  # every in_features (32, 64) is a multiple of 8: 1 bit per weight plus a float32 scale per row
        weights = sum(out * inp for out, inp in shapes)
        assert report["bits_per_weight"] == pytest.approx(1 + 32 * sum(out for out, _ in shapes) / weights, rel=1e-12)


def test_weight_scales_must_cover_exactly_the_selected_modules(tmp_path):
    model, handle = trained_lowbit(4)
    names = list(handle.names)
    scales, _ = codes_and_materialize(handle)
    recipe = learned_recipe(4)
    partial = {name: value for name, value in scales.items() if name != "model.layers.0.self_attn.q_proj"}
    with pytest.raises(ValueError, match=r"weight_scales has no codes and scales for the selected module "
                                         r"'model\.layers\.0\.self_attn\.q_proj'"):
        save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q", weight_scales=partial)
    with pytest.raises(ValueError, match=r"weight_scales holds 'model\.layers\.0\.self_attn\.q_proj', which is not "
                                         r"a selected module"):
        save_quantized_checkpoint(model, None, recipe, names[1:], tmp_path / "q", weight_scales=scales)
    with pytest.raises(ValueError, match=r"the weight spec has learned scales \(rule=None, elem 'int4_tc'\): pass"):
        save_quantized_checkpoint(model, None, recipe, names, tmp_path / "q")
    with pytest.raises(ValueError, match=r"weight_scales needs a recipe with a weight spec"):
        save_quantized_checkpoint(model, None, QuantRecipe(None, INT8_PER_TOKEN), names, tmp_path / "q",
                                  weight_scales=scales)
    assert list(tmp_path.iterdir()) == []


def test_scales_that_do_not_rebuild_the_weight_are_refused_before_writing(tmp_path):
    model, handle = trained_lowbit(2)
    names = list(handle.names)
    scales = {name: lowbit_codes(handle.latent_weight(name), handle.alphas()[name], 2)[1] for name in names}
    handle.remove()  # the latent weights, not Q(W)
    with pytest.raises(ValueError, match=r"weight 'model\.layers\.0\.self_attn\.q_proj\.weight' cannot be stored "
                                         r"exactly with midrise2/fp32 codes: the given codes and scales do not "
                                         r"rebuild the weight"):
        save_quantized_checkpoint(model, None, learned_recipe(2), names, tmp_path / "q", weight_scales=scales)
    name = names[0]
    bad = dict(scales)
    bad[name] = BlockScales(scales[name].block[:, :1].reshape(-1), None, scales[name].elements)
    with pytest.raises(ValueError, match=rf"weight_scales\['{name}'\]: elements \(32, 32\), block scales \(32,\), "
                                         r"global None; .* needs \(32, 32\), \(32, 1\), None"):
        save_quantized_checkpoint(model, None, learned_recipe(2), names, tmp_path / "q", weight_scales=bad)
    assert list(tmp_path.iterdir()) == []


def test_learned_spec_stores_selected_names_only(tmp_path, input_ids):
    """A subset of the trained layers may be stored (the rest stay float32 in the file)."""
    model, handle = trained_lowbit(3)
    scales, effective = codes_and_materialize(handle)
    names = mlp_names(range(2))
    save_quantized_checkpoint(model, None, learned_recipe(3), names, tmp_path / "q",
                              weight_scales={name: scales[name] for name in names})
    loaded, _ = load_quantized_checkpoint(tmp_path / "q")
    for name in effective:
        assert torch.equal(loaded.get_submodule(name).weight, effective[name]), name
    assert torch.equal(logits(loaded, input_ids), logits(model, input_ids))
