"""python -m common.ptq checkpoint: writes the checkpoint and prints one JSON line; bad input exits naming it."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from ptq_testing import mlp_names, tiny_llama
from tokenizers import Tokenizer, models, pre_tokenizers

from common.ptq import QuantRecipe, QuantSpec, load_quantized_checkpoint
from common.ptq.cli import main
from common.quantization import quantize_
from common.recipes import get_recipe

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def model_dir(tmp_path):
    """A saved tiny Llama with a word-level tokenizer."""
    folder = tmp_path / "tiny"
    tiny_llama().save_pretrained(folder)
    words = Tokenizer(models.WordLevel({"<unk>": 0, "hello": 1, "world": 2}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>").save_pretrained(folder)
    return folder


def test_quantize_named_recipe(tmp_path, model_dir, capsys):
    out = tmp_path / "out"
    assert main(["checkpoint", "--model", str(model_dir), "--recipe", "NVFP4", "--activations", "--skip-first", "1",
                 "--skip-last", "2", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["out"] == str(out)
    assert summary["modules"] == 9
    assert summary["recipe"] == get_recipe("NVFP4", activations=True).to_dict()
    assert summary["checkpoint_bytes"] < summary["original_bytes"]
    assert transformers.AutoTokenizer.from_pretrained(out)("hello world")["input_ids"] == [1, 2]
    loaded, _ = load_quantized_checkpoint(out)
    source, input_ids = tiny_llama(), torch.tensor([[1, 2, 0, 1]])
    with quantize_(source, get_recipe("NVFP4", activations=True), names=mlp_names(range(1, 4))):
        assert torch.equal(loaded(input_ids).logits, source(input_ids).logits)


def test_quantize_json_recipe_and_include(tmp_path, model_dir, capsys):
    recipe = QuantRecipe(QuantSpec("int4", "ue4m3", 32, global_scale="row"))
    out, recipe_file = tmp_path / "out", tmp_path / "int4.json"
    recipe_file.write_text(json.dumps(recipe.to_dict()))
    main(["checkpoint", "--model", str(model_dir), "--recipe", str(recipe_file), "--include",
          r"self_attn\.o_proj$", "--out", str(out)])
    assert json.loads(capsys.readouterr().out)["modules"] == 6
    assert json.loads((out / "quantization_config.json").read_text())["modules"] == [
        f"model.layers.{i}.self_attn.o_proj" for i in range(6)]


def test_quantize_skip_proportion_rounds_to_blocks(tmp_path, model_dir, capsys):
    out = tmp_path / "out"
    main(["checkpoint", "--model", str(model_dir), "--recipe", "NVFP4", "--skip-proportion", str(3 / 26), str(2 / 26),
          "--out", str(out)])
    assert json.loads(capsys.readouterr().out)["modules"] == 15  # 6 blocks: skip round(0.69) = 1 and round(0.46) = 0
    assert json.loads((out / "quantization_config.json").read_text())["modules"] == mlp_names(range(1, 6))


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "{missing}", "--recipe", "NVFP4"], "--model '.*missing' is not a Hugging Face checkpoint folder"),
    (["--recipe", "NVFP9"], "unknown recipe 'NVFP9'; valid: a name \\(MXFP4, .*NVFP4"),
    (["--recipe", "{\"weights\": {\"elem\": \"e2m1\", \"scale\": \"ue4m3\", \"rule\": \"best\"}}"],
     "unknown scale rule 'best'"),
    (["--recipe", "{not json"], "JSON recipe is not valid JSON"),
    (["--recipe", "{\"weights\": null, \"activations\": null}"], "a QuantRecipe needs weights, activations or both"),
    (["--recipe", "{\"weights\": {\"elem\": \"int4\", \"scale\": \"ue4m3\"}}", "--activations"],
     "activations=True \\(--activations\\) applies to named recipes"),
    (["--recipe", "HIF8_W8A8"], "--recipe 'HIF8_W8A8' is a DelayedScalingRecipe: a quantized checkpoint stores a "
                                "block recipe"),
    (["--recipe", "NVFP4", "--out", "{model}"], "--out '.*tiny' is the --model folder"),
    (["--recipe", "NVFP4", "--include", "nothing$"], "no nn.Linear module matches include='nothing\\$'"),
    (["--recipe", "NVFP4", "--skip-first", "1", "--skip-proportion", "0.1", "0"], "give skip_proportion=.* not both"),
])
def test_bad_input_exits_naming_the_value(tmp_path, model_dir, capsys, args, message):
    args = [arg.replace("{missing}", str(tmp_path / "missing")).replace("{model}", str(model_dir)) for arg in args]
    if "--model" not in args:
        args = ["--model", str(model_dir), *args]
    if "--out" not in args:
        args = [*args, "--out", str(tmp_path / "out")]
    before = sorted(model_dir.iterdir())
    with pytest.raises(SystemExit) as exit_info:
        main(["checkpoint", *args])
    assert exit_info.value.code == 2
    assert re.search(f"python -m common.ptq checkpoint: error: {message}", capsys.readouterr().err)
    assert not (tmp_path / "out").exists()
    assert sorted(model_dir.iterdir()) == before


def test_module_entry_point(tmp_path):
    missing = tmp_path / "missing"
    run = subprocess.run([sys.executable, "-m", "common.ptq", "checkpoint", "--model", str(missing), "--recipe",
                          "MXFP4", "--out", str(tmp_path / "out")],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 2
    assert f"--model {str(missing)!r} is not a Hugging Face checkpoint folder" in run.stderr
    assert not (tmp_path / "out").exists()
