"""Function-preserving rescaling of a Llama-architecture causal LM: the weights of chosen linears times a factor
``c``, the network computing the same function (up to float rounding).

Each transform rescales one pair of adjacent maps in every decoder layer ``model.model.layers[i]`` so that their
composition is unchanged:

* ``mlp_input``: ``RMSNorm(x) = g * x / rms(x)`` is linear in the gain ``g``, so ``post_attention_layernorm`` with
  ``g / c`` and ``mlp.gate_proj``, ``mlp.up_proj`` with ``c W`` give ``(c W)(n / c) + b = W n + b``;
* ``mlp_inner``: ``down(act(gate(n)) * up(n))`` is linear in the output of ``up``, so ``mlp.up_proj`` with ``c W``,
  ``c b`` and ``mlp.down_proj`` with ``W / c`` give ``(W / c)(c u) + b = W u + b``;
* ``attn_input``: ``input_layernorm`` with ``g / c`` and ``self_attn.q_proj``, ``k_proj``, ``v_proj`` with ``c W``;
* ``attn_value``: the attention output ``softmax(q k^T / sqrt(d) + mask) v`` is linear in ``v`` (the attention
  weights do not depend on it; grouped-query attention repeats the ``v`` heads, which keeps it linear), so
  ``self_attn.v_proj`` with ``c W``, ``c b`` and ``self_attn.o_proj`` with ``W / c``.

Biases: a projection whose weight is scaled by ``c`` because its input is scaled by ``1 / c`` keeps its bias; one
whose *output* is scaled by ``c`` (its input unchanged) has its bias scaled by ``c`` too; one whose weight is
scaled by ``1 / c`` because its input is scaled by ``c`` keeps its bias. A norm with a bias (a LayerNorm) would have
it scaled with its gain; the RMSNorm of these models has none. Transforms compose (each preserves the function of
any model), so the weight of a module named by several is scaled by the product: ``mlp_input`` with ``mlp_inner``
scales ``mlp.up_proj`` by ``c^2``. The embeddings, the final norm and ``lm_head`` are never touched, so tied
embeddings stay tied.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from common.io import read_json

from . import METADATA_FILE, load_model, save_checkpoint
from .checkpoints import marked_kind

TRANSFORMS = ("mlp_input", "mlp_inner", "attn_input", "attn_value")
# model_type values whose decoder layer is the Llama layer: pre-norm RMSNorm (g * x / rms(x)) before attention and
# MLP, gate/up/down MLP, q/k/v/o attention (Gemma's (1 + g) norms and extra post-norms are not this layer)
LLAMA_MODEL_TYPES = ("llama", "mistral", "qwen2")
# transform -> (module path inside a decoder layer, exponent of c for its weight, exponent of c for its bias)
PLANS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "mlp_input": (("post_attention_layernorm", -1, -1), ("mlp.gate_proj", 1, 0), ("mlp.up_proj", 1, 0)),
    "mlp_inner": (("mlp.up_proj", 1, 1), ("mlp.down_proj", -1, 0)),
    "attn_input": (("input_layernorm", -1, -1), ("self_attn.q_proj", 1, 0), ("self_attn.k_proj", 1, 0),
                   ("self_attn.v_proj", 1, 0)),
    "attn_value": (("self_attn.v_proj", 1, 1), ("self_attn.o_proj", -1, 0)),
}
PROBE_SEED = 0
PROBE_SHAPE = (4, 64)  # (sequences, tokens) of the probe batch; tokens capped at max_position_embeddings
RECORD_FILE = "rescale.json"


def check_factor(factor: float) -> float:
    """``factor`` as a float; ValueError naming it unless it is finite and positive."""
    try:
        value = float(factor)
    except (TypeError, ValueError):
        raise ValueError(f"rescale factor {factor!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"rescale factor {factor!r} must be finite and positive")
    return value


def check_transforms(transforms: Sequence[str]) -> tuple[str, ...]:
    """``transforms`` as a tuple; ValueError naming an unknown or repeated name, or an empty list."""
    names = (transforms,) if isinstance(transforms, str) else tuple(transforms)
    if not names:
        raise ValueError(f"no transform given; valid transforms: {', '.join(TRANSFORMS)}")
    unknown = [name for name in names if name not in TRANSFORMS]
    if unknown:
        raise ValueError(f"unknown transform {', '.join(map(repr, unknown))}; valid transforms: "
                         f"{', '.join(TRANSFORMS)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"transform {', '.join(map(repr, repeated))} given more than once")
    return names


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """``model.model.layers``; ValueError when the model has no such non-empty ``ModuleList``."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise ValueError(f"{type(model).__name__} has no decoder layers at model.model.layers: rescaling needs a "
                         "Llama-architecture causal LM (e.g. LlamaForCausalLM)")
    return layers


def rescale_model(model: nn.Module, factor: float, transforms: Sequence[str]) -> None:
    """Rescale ``model`` in place by ``factor`` ``c`` with ``transforms`` (module docstring): every weight ``W``
    and bias ``b`` named by a transform becomes ``c^e W`` and ``c^f b``, ``e`` and ``f`` the summed exponents of
    :data:`PLANS` over ``transforms`` (a gain ``g`` becomes ``g / c`` per transform naming its norm).

    ValueError naming the value for a non-finite or non-positive factor, an unknown or repeated transform, a model
    type other than :data:`LLAMA_MODEL_TYPES` or a decoder layer without a module a transform needs; everything is
    checked before any parameter changes.
    """
    c = check_factor(factor)
    names = check_transforms(transforms)
    layers = decoder_layers(model)
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in LLAMA_MODEL_TYPES:
        raise ValueError(f"model_type {model_type!r} is not a Llama-architecture decoder; supported: "
                         f"{', '.join(LLAMA_MODEL_TYPES)}")
    exponents: dict[str, list[int]] = {}
    for name in names:
        for path, weight_exp, bias_exp in PLANS[name]:
            total = exponents.setdefault(path, [0, 0])
            total[0] += weight_exp
            total[1] += bias_exp
    scaled: list[tuple[torch.Tensor, int]] = []
    for index, layer in enumerate(layers):
        for path, (weight_exp, bias_exp) in exponents.items():
            module = _layer_module(layer, path, f"model.layers.{index}.{path}")
            scaled.append((module.weight, weight_exp))
            if getattr(module, "bias", None) is not None and bias_exp:
                scaled.append((module.bias, bias_exp))
    with torch.no_grad():
        for tensor, exponent in scaled:
            tensor.mul_(c**exponent)


def _layer_module(layer: nn.Module, path: str, full_name: str) -> nn.Module:
    """The module ``path`` of a decoder layer: an ``nn.Linear`` for a projection, a module with a 1-D ``weight``
    (the gain) for a norm; ValueError naming ``full_name`` otherwise."""
    try:
        module = layer.get_submodule(path)
    except AttributeError:
        raise ValueError(f"decoder layer has no module {full_name!r}: not a Llama-architecture layer") from None
    if path.endswith("_proj"):
        if not isinstance(module, nn.Linear):
            raise ValueError(f"{full_name!r} ({type(module).__name__}) is not an nn.Linear")
    elif not isinstance(getattr(module, "weight", None), torch.Tensor) or module.weight.dim() != 1:
        raise ValueError(f"{full_name!r} ({type(module).__name__}) has no 1-D gain 'weight'")
    return module


def linear_sigmas(model: nn.Module, include: str | None = None) -> dict[str, float]:
    """``{name: sigma}`` for every ``nn.Linear`` in the decoder layers (``model.layers.<i>.<path>``) whose name
    ``re.search(include, name)`` matches (all of them when ``include`` is None), in module order; ``sigma`` is the
    population standard deviation over all elements of the weight, ``sqrt(mean((W - mean W)^2))``, in float64.

    ValueError naming ``include`` when it is not a valid regex or matches no such Linear.
    """
    try:
        pattern = None if include is None else re.compile(include)
    except re.error as err:
        raise ValueError(f"include {include!r} is not a valid regex: {err}") from None
    sigmas = {
        name: module.weight.detach().to(torch.float64).std(correction=0).item()
        for name, module in decoder_layers(model).named_modules(prefix="model.layers")
        if isinstance(module, nn.Linear) and (pattern is None or pattern.search(name))
    }
    if not sigmas:
        raise ValueError(f"include {include!r} matches no nn.Linear in the decoder layers")
    return sigmas


def probe_ids(model: nn.Module, seed: int = PROBE_SEED, shape: tuple[int, int] = PROBE_SHAPE) -> torch.Tensor:
    """A fixed batch of token ids, uniform over the input embedding's vocabulary (``torch.Generator`` seeded with
    ``seed``), ``shape[1]`` tokens capped at the config's ``max_position_embeddings``."""
    vocab = model.get_input_embeddings().num_embeddings
    length = min(shape[1], getattr(model.config, "max_position_embeddings", shape[1]))
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(vocab, (shape[0], length), generator=generator)


def rescale_checkpoint(model_dir: str | Path, factor: float, transforms: Sequence[str], out: str | Path
                       ) -> dict[str, Any]:
    """Load the HF checkpoint ``model_dir`` (float32), :func:`rescale_model` it, and save model, tokenizer and
    metadata to ``out`` atomically (one folder, written beside it and renamed), with :data:`RECORD_FILE`:
    ``source``, ``factor``, ``transforms``, ``sigma`` (per decoder Linear: ``before``, ``after`` and
    ``ratio = after / before``) and ``probe`` (seed, shape, ``max_abs_logit`` of the original model and
    ``max_abs_logit_difference`` = ``max |logits_rescaled - logits_original|`` on :func:`probe_ids`). Returns that
    record. ValueError for bad input (a quantized or low-bit QAT checkpoint, ``out`` equal to ``model_dir``), before
    writing.
    """

    c = check_factor(factor)
    names = check_transforms(transforms)
    source = Path(model_dir)
    if not (source / "config.json").is_file():
        raise ValueError(f"--model {str(model_dir)!r} is not a Hugging Face checkpoint folder (no config.json)")
    kind = marked_kind(source)
    if kind is not None:
        raise ValueError(f"--model {str(model_dir)!r} is a {kind} checkpoint: rescale the full-precision model")
    if Path(out).resolve() == source.resolve():
        raise ValueError(f"--out {str(out)!r} is the --model folder: it would be replaced")
    model, tokenizer = load_model(source)
    ids = probe_ids(model)
    before = linear_sigmas(model)
    with torch.no_grad():
        original = model(ids).logits
    rescale_model(model, c, names)
    after = linear_sigmas(model)
    with torch.no_grad():
        difference = (model(ids).logits - original).abs().max().item()
    record = {
        "source": str(model_dir), "factor": c, "transforms": list(names),
        "sigma": {name: {"before": before[name], "after": after[name], "ratio": after[name] / before[name]}
                  for name in before},
        "probe": {"seed": PROBE_SEED, "shape": list(ids.shape), "max_abs_logit": original.abs().max().item(),
                  "max_abs_logit_difference": difference},
    }
    metadata_file = source / METADATA_FILE
    metadata = {"rescale": {"source": str(model_dir), "factor": c, "transforms": list(names)},
                "source_metadata": read_json(metadata_file) if metadata_file.is_file() else None}
    save_checkpoint(model, tokenizer, out, metadata, files={RECORD_FILE: record})
    return record

