"""Helpers shared by the PTQ tests: a tiny seeded Llama causal LM (6 blocks, hidden 32, MLP 64), and the same model
with ParetoQ quantizers as if trained (learned scales)."""

import torch
import transformers

from common.ptq import QuantRecipe, QuantSpec
from common.quantizers import LOWBIT_CODES, attach_lowbit, lowbit_codes, lowbit_selection
from common.recipes import INT8_PER_TOKEN, LowBitRecipe, get_recipe

TINY = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
MLP = ("gate_proj", "up_proj", "down_proj")
# one recipe of each block-recipe family the checkpoint tests cover
RECIPES = {
    "e2m1_ue4m3_16_absmax": QuantRecipe(QuantSpec("e2m1", "ue4m3", 16, "absmax")),
    "NVFP4_act": get_recipe("NVFP4", activations=True),
    "MXFP4": get_recipe("MXFP4"),
    "e4m3_per_tensor_fp32": QuantRecipe(QuantSpec("e4m3", "fp32", None), QuantSpec("e4m3", "fp32", None)),
    "NVFP4_4over6_row": QuantRecipe(QuantSpec("e2m1", "ue4m3", 16, "four_over_six", global_scale="row")),
    "int4_ragged_24_prevent_zero": QuantRecipe(QuantSpec("int4", "ue4m3", 24, prevent_zero=True)),
    "e2m3_e8m0_act_only": QuantRecipe(None, QuantSpec("e2m3", "e8m0", 32, "e8m0_rceil")),
}


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


def trained_lowbit(bits, activation_bits=None, seed=0):
    """A tiny Llama with ParetoQ quantizers on every block Linear and perturbed (as if trained) scales: ``(model,
    handle)`` in eval mode."""
    model = tiny_llama(seed)
    handle = attach_lowbit(model, lowbit_selection(model), LowBitRecipe(bits, activation_bits=activation_bits))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for alpha in handle.alphas().values():
            alpha.mul_(0.5 + torch.rand(alpha.shape, generator=g))
    return model.eval(), handle


def learned_recipe(bits, activation_bits=None):
    return QuantRecipe(QuantSpec(LOWBIT_CODES[bits][0], "fp32", "row", rule=None),
                       INT8_PER_TOKEN if activation_bits == 8 else None, f"paretoq-w{bits:g}")


def codes_and_materialize(handle):
    """``({name: BlockScales}, {name: Q(W)})`` of every layer, then the handle removed keeping ``Q(W)``."""
    scales = {name: lowbit_codes(handle.latent_weight(name), handle.alphas()[name], handle.bits)[1]
              for name in handle.names}
    effective = {name: handle.quantized_weight(name) for name in handle.names}
    handle.remove(materialize=True)
    return scales, effective
