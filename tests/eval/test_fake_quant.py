"""fake_quant_perplexity: the unquantized reference and a fake-quantized cell equal a direct computation."""

import shutil

import pytest

from common.data import read_jsonl, token_stream
from common.eval import fake_quant_perplexity, perplexity
from common.models import load_causal_lm
from common.ptq import QuantRecipe, QuantSpec, apply_quantization, select_linears

INCLUDE = r"mlp\.(gate_proj|up_proj|down_proj)$"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, saved):
    folder = tmp_path_factory.mktemp("fq") / "model"
    shutil.copytree(saved["model"], folder)
    for item in saved["tokenizer"].iterdir():
        shutil.copy2(item, folder / item.name)
    return folder


def direct(checkpoint, split, tokenizer, recipe, max_tokens):
    model = load_causal_lm(checkpoint)
    stream = token_stream(tokenizer, read_jsonl(split))[:max_tokens]
    if recipe is not None:
        apply_quantization(model, recipe, select_linears(model, include=INCLUDE))
    return perplexity(model, stream, window=32, stride=16, batch_size=4)["perplexity"]


@pytest.mark.parametrize("spec", [None, QuantSpec("e2m1", "ue4m3", 4, "four_over_six", True),
                                  QuantSpec("e2m1", "ue4m3", 8, "absmax", False, "row", (), 448.0)])
def test_matches_a_direct_computation(checkpoint, saved, tokenizer, spec):
    recipe = None if spec is None else QuantRecipe(spec, spec, "cell")
    record = fake_quant_perplexity(checkpoint, saved["split"], recipe, include=INCLUDE, window=32, stride=16,
                                   max_tokens=256, batch_size=4)
    assert record["metrics"]["perplexity"]["perplexity"] == direct(checkpoint, saved["split"], tokenizer, recipe, 256)
    assert record["data"]["split"]["tokens"] == 256
    if spec is None:
        assert record["quantization"] is None
    else:
        assert record["quantization"]["recipe"] == recipe.to_dict()
        assert record["quantization"]["layers"] == [f"model.layers.{i}.mlp.{p}_proj" for i in range(2)
                                                    for p in ("gate", "up", "down")]


def test_max_tokens_shorter_than_the_window_is_refused(checkpoint, saved):
    with pytest.raises(ValueError, match="max_tokens 16 is shorter than the window 32"):
        fake_quant_perplexity(checkpoint, saved["split"], None, include=INCLUDE, window=32, stride=16, max_tokens=16)
