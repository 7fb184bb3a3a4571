"""Function-preserving rescaling (common.models.rescale): same logits, weight sigmas moved by the factor, the CLI.

Tolerance: the rescaled logits may differ from the original ones by at most ``TOLERANCE * max |logit|``, 2e-5 of
the logit scale, about 170 float32 epsilons (2^-23 = 1.2e-7). Each rescaled weight and gain is rounded once to
float32 (relative error at most 2^-24), and those roundings propagate through three layers of matmuls (sums of
32-48 products), RMSNorm and softmax; measured differences are at most 3e-6 of the logit scale. Errors the test
must catch are far larger: a bias left unscaled, or one weight off by 1e-3, moves the logits by about 1e-3 of it.
"""

import copy
import json
import math
import re

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import nn

from common.models import load_model, save_checkpoint
from common.models.__main__ import main
from common.models.rescale import PROBE_SHAPE, RECORD_FILE, TRANSFORMS, linear_sigmas, probe_ids, rescale_model

TOLERANCE = 2e-5  # of max |logit| (module docstring)
TINY = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
        "num_attention_heads": 4, "max_position_embeddings": 48, "initializer_range": 0.2}
VARIANTS = {  # grouped-query attention with every bias; multi-head attention with tied embeddings, no biases
    "gqa_bias": {"num_key_value_heads": 2, "attention_bias": True, "mlp_bias": True},
    "tied": {"num_key_value_heads": 4, "tie_word_embeddings": True},
}
# transform -> {parameter path inside a decoder layer: exponent of c} (the specification, written out)
EXPECTED = {
    "mlp_input": {"post_attention_layernorm.weight": -1, "mlp.gate_proj.weight": 1, "mlp.up_proj.weight": 1},
    "mlp_inner": {"mlp.up_proj.weight": 1, "mlp.up_proj.bias": 1, "mlp.down_proj.weight": -1},
    "attn_input": {"input_layernorm.weight": -1, "self_attn.q_proj.weight": 1, "self_attn.k_proj.weight": 1,
                   "self_attn.v_proj.weight": 1},
    "attn_value": {"self_attn.v_proj.weight": 1, "self_attn.v_proj.bias": 1, "self_attn.o_proj.weight": -1},
}
SETS = [[name] for name in TRANSFORMS] + [list(TRANSFORMS)]
LAYER_PARAMETER = re.compile(r"model\.layers\.\d+\.(.+)")


def randomize(model: nn.Module) -> nn.Module:
    """Gains uniform in [0.5, 1.5) and biases N(0, 0.2^2) (a fresh model has gains 1 and biases 0, which would
    hide a wrong gain or bias rule)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(torch.rand(param.shape, generator=generator) + 0.5)
            elif name.endswith(".bias"):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    return model.eval()


def tiny(config_class=transformers.LlamaConfig, model_class=transformers.AutoModelForCausalLM, **fields):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return randomize(model_class.from_config(config_class(**{**TINY, **fields})))


@pytest.fixture(params=list(VARIANTS), scope="module")
def variant(request):
    return request.param, tiny(**VARIANTS[request.param])


def logits(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(probe_ids(model)).logits


def assert_same_function(original: nn.Module, rescaled: nn.Module) -> float:
    reference, new = logits(original), logits(rescaled)
    difference = (new - reference).abs().max().item()
    assert difference <= TOLERANCE * reference.abs().max().item()
    return difference


def exponents(transforms):
    total: dict[str, int] = {}
    for name in transforms:
        for path, exponent in EXPECTED[name].items():
            total[path] = total.get(path, 0) + exponent
    return total


@pytest.mark.parametrize("factor", [0.01, 0.3, 7.0])
@pytest.mark.parametrize("transforms", SETS, ids="+".join)
def test_logits_are_preserved(variant, transforms, factor):
    _, model = variant
    rescaled = copy.deepcopy(model)
    rescale_model(rescaled, factor, transforms)
    assert_same_function(model, rescaled)


@pytest.mark.parametrize(("config_class", "fields"), [
    (transformers.Qwen2Config, {"num_key_value_heads": 2}),  # q/k/v biases of its own
    (transformers.MistralConfig, {"num_key_value_heads": 2}),
])
def test_other_llama_architectures(config_class, fields):
    model = tiny(config_class, **fields)
    rescaled = copy.deepcopy(model)
    rescale_model(rescaled, 0.1, TRANSFORMS)
    assert_same_function(model, rescaled)


def test_tolerance_catches_an_unscaled_bias():
    model = tiny(**VARIANTS["gqa_bias"])
    rescaled = copy.deepcopy(model)
    rescale_model(rescaled, 0.1, ["mlp_inner"])
    with torch.no_grad():
        for layer in rescaled.model.layers:
            layer.mlp.up_proj.bias.div_(0.1)  # the bias as a rule that ignores biases would leave it
    reference = logits(model)
    assert (logits(rescaled) - reference).abs().max().item() > 100 * TOLERANCE * reference.abs().max().item()


@pytest.mark.parametrize("transforms", SETS, ids="+".join)
def test_weights_and_gains_move_by_the_factor(variant, transforms):
    name, model = variant
    factor = 0.1
    rescaled = copy.deepcopy(model)
    rescale_model(rescaled, factor, transforms)
    expected = exponents(transforms)
    before, after = dict(model.named_parameters()), dict(rescaled.named_parameters())
    assert before.keys() == after.keys()
    for key, old in before.items():
        match = LAYER_PARAMETER.fullmatch(key)
        exponent = expected.get(match.group(1), 0) if match else 0
        if exponent == 0:
            assert torch.equal(after[key], old), key  # untouched: bit for bit
        else:  # gains g / c (per transform), weights and the output-side biases c^e W
            torch.testing.assert_close(after[key], old * factor**exponent, rtol=1e-6, atol=0, msg=key)
    sigma_before, sigma_after = linear_sigmas(model), linear_sigmas(rescaled)
    for key, sigma in sigma_before.items():
        ratio = factor ** expected.get(f"{LAYER_PARAMETER.fullmatch(key).group(1)}.weight", 0)
        assert sigma_after[key] == pytest.approx(sigma * ratio, rel=1e-6), key
    if name == "tied":
        assert rescaled.lm_head.weight is rescaled.model.embed_tokens.weight


def test_rescale_then_inverse_restores_the_weights(variant):
    _, model = variant
    rescaled = copy.deepcopy(model)
    rescale_model(rescaled, 0.03, TRANSFORMS)
    rescale_model(rescaled, 1 / 0.03, TRANSFORMS)
    for (key, old), new in zip(model.named_parameters(), rescaled.parameters(), strict=True):
        # a few float32 roundings (each at most 2^-24 relative) of c^e and of the products
        torch.testing.assert_close(new, old, rtol=1e-6, atol=0, msg=key)


def test_linear_sigmas():
    model = tiny(**VARIANTS["gqa_bias"])
    sigmas = linear_sigmas(model)
    assert len(sigmas) == 7 * TINY["num_hidden_layers"]
    assert next(iter(sigmas)) == "model.layers.0.self_attn.q_proj"
    weight = model.model.layers[2].mlp.down_proj.weight.detach().double()
    population = math.sqrt(((weight - weight.mean()) ** 2).mean().item())  # float64, divided by n
    assert sigmas["model.layers.2.mlp.down_proj"] == pytest.approx(population, rel=1e-12)
    assert list(linear_sigmas(model, r"mlp\.up_proj$")) == [f"model.layers.{i}.mlp.up_proj" for i in range(3)]
    with pytest.raises(ValueError, match=r"include 'lm_head' matches no nn.Linear in the decoder layers"):
        linear_sigmas(model, "lm_head")
    with pytest.raises(ValueError, match=r"include 'mlp\(' is not a valid regex"):
        linear_sigmas(model, "mlp(")


@pytest.mark.parametrize(("factor", "message"), [
    (0, "rescale factor 0 must be finite and positive"), (-0.5, "rescale factor -0.5 must be finite"),
    (math.inf, "rescale factor inf must be"), (math.nan, "rescale factor nan must be"),
    ("big", "rescale factor 'big' is not a number"),
])
def test_bad_factor_is_named(factor, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        rescale_model(tiny(), factor, ["mlp_input"])


@pytest.mark.parametrize(("transforms", "message"), [
    (["mlp_input", "mlp_outer"], "unknown transform 'mlp_outer'; valid transforms: mlp_input, mlp_inner, "
                                 "attn_input, attn_value"),
    (["attn_value", "attn_value"], "transform 'attn_value' given more than once"),
    ([], "no transform given"),
])
def test_bad_transforms_are_named(transforms, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        rescale_model(tiny(), 0.1, transforms)


def test_models_without_the_modules_are_refused():
    with pytest.raises(ValueError, match=r"Linear has no decoder layers at model\.model\.layers"):
        rescale_model(nn.Linear(4, 4), 0.1, ["mlp_input"])
    gemma = tiny(transformers.GemmaConfig, head_dim=8)  # same module names, (1 + g) norms
    with pytest.raises(ValueError, match="model_type 'gemma' is not a Llama-architecture decoder; supported: llama"):
        rescale_model(gemma, 0.1, ["mlp_input"])
    broken = tiny()
    broken.model.layers[2].mlp.down_proj = nn.Identity()
    original = copy.deepcopy(broken)
    with pytest.raises(ValueError, match=r"'model.layers.2.mlp.down_proj' \(Identity\) is not an nn.Linear"):
        rescale_model(broken, 0.1, ["mlp_input", "mlp_inner"])
    for (key, old), new in zip(original.named_parameters(), broken.parameters(), strict=True):
        assert torch.equal(new, old), key  # everything is checked before anything changes
    del broken.model.layers[1].post_attention_layernorm
    with pytest.raises(ValueError, match=r"decoder layer has no module 'model.layers.1.post_attention_layernorm'"):
        rescale_model(broken, 0.1, ["mlp_input"])


# the command line
@pytest.fixture
def checkpoint(tmp_path):
    """A saved tiny GQA Llama with biases and a word-level tokenizer."""
    words = Tokenizer(models.WordLevel({"<unk>": 0, "hello": 1, "world": 2}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>")
    save_checkpoint(tiny(**VARIANTS["gqa_bias"]), tokenizer, tmp_path / "source", {"note": "the source"})
    return tmp_path / "source"


def rescale_cli(model, out, factor, *transforms) -> int:
    return main(["rescale", "--model", str(model), "--factor", str(factor), "--transforms", *transforms,
                 "--out", str(out)])


def test_cli_writes_the_folder_and_its_record(tmp_path, checkpoint, capsys):
    out = tmp_path / "sweep" / "c0.1"
    assert rescale_cli(checkpoint, out, 0.1, "mlp_input", "attn_input") == 0
    printed = json.loads(capsys.readouterr().out)
    record = json.loads((out / RECORD_FILE).read_text())
    assert record["source"] == str(checkpoint)
    assert (record["factor"], record["transforms"]) == (0.1, ["mlp_input", "attn_input"])
    scaled = ("gate_proj", "up_proj", "q_proj", "k_proj", "v_proj")
    assert len(record["sigma"]) == 21
    for key, sigma in record["sigma"].items():
        assert sigma["after"] == pytest.approx(sigma["before"] * (0.1 if key.endswith(scaled) else 1), rel=1e-6)
        assert sigma["ratio"] == sigma["after"] / sigma["before"]
    probe = record["probe"]
    assert probe["shape"] == [PROBE_SHAPE[0], TINY["max_position_embeddings"]]
    assert 0 < probe["max_abs_logit_difference"] <= TOLERANCE * probe["max_abs_logit"]
    assert printed == {"out": str(out), **probe}
    source, _ = load_model(checkpoint)
    rescaled, tokenizer = load_model(out)
    assert assert_same_function(source, rescaled) == probe["max_abs_logit_difference"]
    assert tokenizer("hello world")["input_ids"] == [1, 2]
    metadata = json.loads((out / "lowbit_metadata.json").read_text())
    assert metadata == {"rescale": {"source": str(checkpoint), "factor": 0.1, "transforms": ["mlp_input",
                                                                                              "attn_input"]},
                        "source_metadata": {"note": "the source"}}


def test_cli_rerun_replaces_the_folder_atomically(tmp_path, checkpoint, monkeypatch, capsys):
    out = tmp_path / "out"
    assert rescale_cli(checkpoint, out, 0.1, "mlp_input") == 0
    assert rescale_cli(checkpoint, out, 0.5, "mlp_inner") == 0
    record = json.loads((out / RECORD_FILE).read_text())
    assert (record["factor"], record["transforms"]) == (0.5, ["mlp_inner"])
    assert record["sigma"]["model.layers.0.mlp.gate_proj"]["ratio"] == 1.0  # no trace of the first run
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "source"]

    def disk_full(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", disk_full)
    capsys.readouterr()
    assert rescale_cli(checkpoint, out, 0.01, "attn_input") == 2
    assert capsys.readouterr().err.endswith("error: disk full\n")  # after the progress bars of loading
    assert json.loads((out / RECORD_FILE).read_text())["factor"] == 0.5  # the old folder, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "source"]  # no temporary sibling left


@pytest.mark.parametrize(("args", "message"), [
    ({"model": "{tmp}/missing"}, "--model '{tmp}/missing' does not exist"),
    ({"model": "{tmp}"}, "--model '{tmp}' is not a Hugging Face checkpoint folder (no config.json)"),
    ({"factor": "0"}, "rescale factor 0.0 must be finite and positive"),
    ({"out": "{source}"}, "--out '{source}' is the --model folder: it would be replaced"),
])
def test_cli_bad_input_exits_2_naming_the_value(tmp_path, checkpoint, capsys, args, message):
    given = {"model": str(checkpoint), "factor": "0.1", "out": str(tmp_path / "out")} | args
    given = {k: v.format(tmp=tmp_path, source=checkpoint) for k, v in given.items()}
    assert rescale_cli(given["model"], given["out"], given["factor"], "mlp_input") == 2
    assert capsys.readouterr().err == f"error: {message.format(tmp=tmp_path, source=checkpoint)}\n"
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_quantized_checkpoint_and_unknown_transforms(tmp_path, checkpoint, capsys):
    with pytest.raises(SystemExit):
        rescale_cli(checkpoint, tmp_path / "out", 0.1, "mlp_outer")
    assert "invalid choice: 'mlp_outer'" in capsys.readouterr().err
    (checkpoint / "quantization_config.json").write_text("{}")
    assert rescale_cli(checkpoint, tmp_path / "out", 0.1, "mlp_input") == 2
    assert "is a quantized checkpoint: rescale the full-precision model" in capsys.readouterr().err
