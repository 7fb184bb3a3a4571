"""Embedded architectures, checkpoint save/load, SmolLM2 conversion."""

import pytest
import torch

from common.data.tokenizer import train_tokenizer
from common.models import (
    ARCHITECTURES,
    SMOLLM2_NOTE,
    build_model,
    count_parameters,
    load_model,
    save_checkpoint,
)


class Vocab:
    bos_token_id = eos_token_id = 0

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


def test_small_is_a_ten_million_parameter_llama():
    model = build_model("small", Vocab(8192), seed=0)
    assert type(model).__name__ == "LlamaForCausalLM"
    assert 9.5e6 < count_parameters(model) < 10.5e6
    assert model.config.num_hidden_layers >= 8
    names = {name for name, _ in model.named_modules()}
    assert {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"} <= names
    assert type(model.model.norm).__name__ == "LlamaRMSNorm"


def test_build_is_seeded():
    a, b, c = (build_model("smoke", Vocab(300), seed=s) for s in (1, 1, 2))
    assert torch.equal(a.model.embed_tokens.weight, b.model.embed_tokens.weight)
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)


def test_save_and_load_round_trip(tmp_path):
    tokenizer = train_tokenizer(["some text to learn from " * 50], 320)
    model = build_model("smoke", tokenizer, seed=0)
    save_checkpoint(model, tokenizer, tmp_path / "ckpt", {"note": "test"})
    loaded, loaded_tokenizer = load_model(tmp_path / "ckpt")
    ids = torch.tensor([tokenizer("some text", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model.eval()(ids).logits, loaded(ids).logits)
    assert loaded_tokenizer.get_vocab() == tokenizer.get_vocab()
    assert (tmp_path / "ckpt" / "model.safetensors").is_file()


def test_bad_names_and_paths():
    with pytest.raises(ValueError, match="unknown model size 'huge'; valid model sizes: smoke, small, tiny, tiny_tied"):
        build_model("huge", Vocab(300), seed=0)
    with pytest.raises(ValueError, match="no checkpoint folder at 'nowhere/model'"):
        load_model("nowhere/model")
    assert set(ARCHITECTURES) == {"smoke", "small", "tiny", "tiny_tied"}


@pytest.mark.slow
def test_smollm2_conversion(smollm2_checkpoint):
    model, tokenizer = load_model(smollm2_checkpoint)
    assert 130e6 < count_parameters(model) < 140e6
    assert model.config.model_type == "llama"
    ids = torch.tensor([tokenizer("The capital of France is", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        logits = model(ids).logits
    assert torch.isfinite(logits).all()
    assert tokenizer.decode(logits[0, -1].argmax()).strip() in {"Paris", "the", "a"}
    assert "dequantized Q4_1" in SMOLLM2_NOTE
    assert "dequantized Q4_1" in (smollm2_checkpoint / "lowbit_metadata.json").read_text()
