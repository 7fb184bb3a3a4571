"""Helpers shared by the PTQ tests: a tiny seeded Llama causal LM (6 blocks, hidden 32, MLP 64)."""

import torch
import transformers

TINY = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
MLP = ("gate_proj", "up_proj", "down_proj")


def tiny_llama(seed: int = 0, **overrides: object) -> transformers.LlamaForCausalLM:
    """The tiny Llama in float32 and eval mode, its weights drawn from ``seed``; ``overrides`` go to the config."""
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**TINY, **overrides})).eval()


def mlp_names(blocks: range | list[int]) -> list[str]:
    return [f"model.layers.{i}.mlp.{proj}" for i in blocks for proj in MLP]


def logits(model: torch.nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids).logits


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in model.state_dict().items()}


def assert_same_state(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
