"""Trained low-bit runs through the shared checkpoint CLI (``python -m common.ptq checkpoint --recipe learned``):
packed integer codes + the learned per-row scales, rebuilt bit for bit to the trained effective weights Q(W), the
same logits as the low-bit model (A8 included), sizes that reflect the packing, and the refusals named."""

import json
import shutil

import pytest
import torch
from paper_testing import build_tiny_setup
from winq_testing import train_config

from common.io import read_json
from common.ptq import QuantRecipe, QuantSpec, load_quantized_checkpoint, read_quantization_config
from common.ptq.cli import main
from common.qat.lowbit_io import load_lowbit_model
from common.recipes import INT8_PER_TOKEN

# setting -> (bits, activation_bits, element format of the codes, codes per byte)
SETTINGS = {"w1.58": (1.58, None, "ternary", 4), "w4": (4, None, "int4_tc", 2), "w2a8": (2, 8, "midrise2", 4)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return build_tiny_setup(tmp_path_factory.mktemp("winq_quantized"))


@pytest.fixture(scope="module")
def runs(setup):
    """One 2-step baseline run per setting: ``{setting: low-bit QAT checkpoint folder}``."""
    from papers.winq.run import winq_run

    folders = {}
    for setting, (bits, activation_bits, _, _) in SETTINGS.items():
        out = setup / "models" / setting
        winq_run(setup / "base", setup / "train.jsonl", setup / "valid.jsonl", train_config(max_steps=2),
                 setup / "runs" / setting, out, bits=bits, activation_bits=activation_bits, method="baseline")
        folders[setting] = out
    return folders


def batch():
    return torch.randint(3, 300, (2, 16), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_learned_recipe_stores_the_trained_low_bit_model_exactly(tmp_path, runs, setting, capsys):
    bits, activation_bits, elem, per_byte = SETTINGS[setting]
    out = tmp_path / "q"
    assert main(["checkpoint", "--model", str(runs[setting]), "--recipe", "learned", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    a8 = activation_bits == 8
    recipe = QuantRecipe(QuantSpec(elem, "fp32", "row", rule=None), INT8_PER_TOKEN if a8 else None,
                         f"paretoq-w{bits:g}{'a8' if a8 else ''}")
    assert summary["recipe"] == recipe.to_dict()
    assert read_json(out / "size_report.json") == summary

    model, _, handle = load_lowbit_model(runs[setting])
    loaded, loaded_handle = load_quantized_checkpoint(out)
    meta = read_quantization_config(out)
    assert meta["modules"] == handle.names
    assert summary["modules"] == len(handle.names) == 28
    assert meta["packing"]["codes_per_byte"] == per_byte
    for name in handle.names:  # the trained effective weights, bit for bit
        assert torch.equal(loaded.get_submodule(name).weight, handle.quantized_weight(name)), name
    assert len(loaded_handle._hooks) == (len(handle.names) if a8 else 0)
    # every other tensor is the latent checkpoint's (embeddings, norms, lm_head)
    quantized = {f"{name}.weight" for name in handle.names}
    reference = {key.replace("parametrizations.weight.original", "weight"): value
                 for key, value in model.state_dict().items() if not key.endswith(".alpha")}
    for key, value in loaded.state_dict().items():
        if key not in quantized:
            assert torch.equal(value, reference[key]), key
    # the same forward: same weights and (A8) the same per-token int8 quantization, so exactly the same logits
    with torch.no_grad():
        assert torch.equal(loaded(batch()).logits, model(batch()).logits)
    # sizes: codes_per_byte codes and one float32 scale per row
    shapes = [tuple(loaded.get_submodule(name).weight.shape) for name in handle.names]
    weights = sum(o * i for o, i in shapes)
    payload = sum(o * -(-i // per_byte) + 4 * o for o, i in shapes)
    assert summary["selected_quantized_bytes"] == payload
    assert summary["bits_per_weight"] == pytest.approx(8 * payload / weights, rel=1e-12)
    assert 8 / per_byte < summary["bits_per_weight"] < 8 / per_byte + 32 * 3 / 64  # in_features >= 64 here


def test_learned_recipe_refusals_name_the_value(tmp_path, setup, runs, capsys):
    def refused(*argv):
        with pytest.raises(SystemExit) as exit_info:
            main(["checkpoint", *argv, "--out", str(tmp_path / "q")])
        assert exit_info.value.code == 2
        return capsys.readouterr().err

    assert "--recipe learned: '" in refused("--model", str(setup / "base"), "--recipe", "learned")
    assert "is not a low-bit QAT checkpoint: no lowbit_scales.safetensors" in refused(
        "--model", str(setup / "base"), "--recipe", "learned")
    for flags in (["--include", "mlp"], ["--exclude", "mlp"], ["--skip-first", "0"], ["--skip-last", "1"],
                  ["--skip-proportion", "0.1", "0.1"], ["--activations"]):
        err = refused("--model", str(runs["w4"]), "--recipe", "learned", *flags)
        assert f"{flags[0]} does not apply to --recipe learned" in err, flags
    rotated = tmp_path / "rotated"
    shutil.copytree(runs["w4"], rotated)
    metadata = read_json(rotated / "lowbit_metadata.json")
    metadata["qat"]["hadamard"] = True
    (rotated / "lowbit_metadata.json").write_text(json.dumps(metadata))
    err = refused("--model", str(rotated), "--recipe", "learned")
    assert f"--recipe learned: {str(rotated)!r} was trained with a Hadamard rotation" in err
    assert "cannot be stored as codes of the unrotated weight" in err
    assert not (tmp_path / "q").exists()
