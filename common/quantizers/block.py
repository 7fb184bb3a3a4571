"""Block quantization of tensors (:func:`quantize_tensor`, the one function that quantizes a tensor with a
:class:`common.recipes.QuantSpec`) and post-training fake quantization of selected Linear layers with a block
recipe, in place and reversibly, without changing any module class (:func:`apply_quantization`, the PTQ path of the
front door :func:`common.quantization.quantize_`).

Weights: each selected ``weight`` Parameter keeps its identity; its ``.data`` is replaced by ``quantize_tensor(W,
recipe.weights)`` along ``in_features`` (the last axis of the ``(out_features, in_features)`` weight) and the original
tensor is kept to be put back. Activations: a forward pre-hook replaces the layer input ``x`` by ``quantize_tensor(x,
recipe.activations)`` along its last (hidden) axis, i.e. per token in blocks, recomputed on every call (dynamic scales).
:meth:`QuantizationHandle.remove` restores the original tensors (the very same objects, so the model is bit-exactly as
before; moved to the parameter's device if the model moved meanwhile) and removes the hooks. The quantization runs on
the tensors' own device (:mod:`common.scaling`: no host synchronisation but for ``brute_force``), so a model on a GPU is
quantized there, its hooks included.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from types import TracebackType

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from common.recipes import QuantRecipe, QuantSpec
from common.scaling import BlockScales, quantize_blocks
from common.select import linear_modules


def quantize_tensor(x: torch.Tensor, spec: QuantSpec, *, return_scales: bool = False
                    ) -> torch.Tensor | tuple[torch.Tensor, BlockScales]:
    """Quantize-dequantize ``x`` in blocks along ``spec.axis`` as ``spec`` says:
    ``quantize_blocks(x, spec.elem, spec.scale, spec.block_size, spec.rule, prevent_zero=..., global_scale=...,
    global_target=..., axis=..., ties=..., compute_dtype=..., **spec.rule_options)``
    (:func:`common.scaling.quantize_blocks`; with ``return_scales`` also the :class:`common.scaling.BlockScales`).
    ValueError for a spec of learned scales (``rule=None``), which has no rule to choose scales from ``x``."""
    if spec.rule is None:
        raise ValueError(f"QuantSpec({spec.elem!r}, {spec.scale!r}, block_size={spec.block_size!r}, rule=None): "
                         "the scales are learned (QAT), not selected from data, so this spec cannot quantize a "
                         "tensor; store the learned codes and scales instead "
                         "(save_quantized_checkpoint(..., weight_scales=...))")
    return quantize_blocks(x, spec.elem, spec.scale, spec.block_size, spec.rule, prevent_zero=spec.prevent_zero,
                           global_scale=spec.global_scale, global_target=spec.global_target, axis=spec.axis,
                           return_scales=return_scales, ties=spec.ties, compute_dtype=spec.compute_dtype,
                           **dict(spec.rule_options))


class QuantizationHandle:
    """What :func:`apply_quantization` changed; ``remove()`` undoes it (idempotent). A context manager too:
    ``with apply_quantization(model, names, recipe): ...`` restores the model on exit."""

    def __init__(self, recipe: QuantRecipe, names: list[str]) -> None:
        self.recipe = recipe
        self.names = names
        self._originals: list[tuple[nn.Parameter, torch.Tensor]] = []
        self._hooks: list[RemovableHandle] = []

    @property
    def active(self) -> bool:
        """True until :meth:`remove` (False at once if nothing was changed)."""
        return bool(self._originals or self._hooks)

    def remove(self) -> None:
        """Put every original weight tensor back (on the parameter's current device) and remove every activation
        hook."""
        with torch.no_grad():
            for param, original in self._originals:
                param.data = original.to(param.device)
        for hook in self._hooks:
            hook.remove()
        self._originals.clear()
        self._hooks.clear()

    def __enter__(self) -> QuantizationHandle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.remove()


def apply_quantization(model: nn.Module, names: Sequence[str], recipe: QuantRecipe, *,
                       weights: bool = True) -> QuantizationHandle:
    """Fake-quantize the Linear modules ``names`` of ``model`` in place with ``recipe``; returns the handle.

    ``W <- quantize_tensor(W, recipe.weights)`` (blocks along ``in_features``) for each selected weight, once per
    Parameter (a weight shared by two names is quantized once); a forward pre-hook ``x <-
    quantize_tensor(x, recipe.activations)`` (blocks along the last axis) on each selected module, once per module.
    ``weights=False`` leaves the weights alone and attaches only the activation hooks (for a model whose weights
    already hold quantized values, e.g. :func:`common.ptq.load_quantized_checkpoint`). On an error, whatever was
    already changed is undone before the error propagates.
    """
    modules = linear_modules(model, names)
    handle = QuantizationHandle(recipe, list(names))
    try:
        seen_params: set[int] = set()
        seen_modules: set[int] = set()
        for module in modules.values():
            if weights and recipe.weights is not None and id(module.weight) not in seen_params:
                seen_params.add(id(module.weight))
                original = module.weight.data
                with torch.no_grad():
                    quantized = quantize_tensor(original, recipe.weights)
                handle._originals.append((module.weight, original))
                module.weight.data = quantized
            if recipe.activations is not None and id(module) not in seen_modules:
                seen_modules.add(id(module))
                handle._hooks.append(module.register_forward_pre_hook(partial(_quantize_input, recipe.activations)))
    except BaseException:
        handle.remove()
        raise
    return handle


def _quantize_input(spec: QuantSpec, module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Forward pre-hook: the first positional input quantized along its last axis, other inputs unchanged."""
    return (quantize_tensor(args[0], spec), *args[1:])
