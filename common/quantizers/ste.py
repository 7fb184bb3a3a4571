"""Differentiable fake quantization for QAT.

``ste_quantize(x, quantizer)``: the forward value is exactly ``quantizer(x)``; the backward pass is the identity
(straight-through estimator, Bengio et al. 2013): ``dL/dx = dL/dq``. Written as an autograd Function so that
the forward value is bit-exactly the quantized tensor (``x + (q - x).detach()`` is not, in floating point).

``attach_fake_quant(model, names, recipe)`` makes the selected Linear layers train with quantized weights and
inputs (a :class:`common.recipes.QuantRecipe` and a selection): the weight through a ``torch.nn.utils.parametrize``
parametrization, the input through a forward pre-hook, both with the STE. ``handle.remove()`` restores the
plain layers; the latent (unquantized) weights are what the optimizer updates and what is restored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import nn
from torch.nn.utils import parametrize

from common.recipes import QuantRecipe, check_recipe
from common.select import linear_modules

from .block import quantize_tensor


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, quantizer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return quantizer(x.detach())

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


def ste_quantize(x: torch.Tensor, quantizer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``quantizer(x)`` forward, identity backward."""
    return _StraightThrough.apply(x, quantizer)


class _FakeQuantWeight(nn.Module):
    def __init__(self, quantizer: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.quantizer = quantizer

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return ste_quantize(weight, self.quantizer)


class QATHandle:
    """Undo :func:`attach_fake_quant` (parametrizations and hooks); also a context manager."""

    def __init__(self, model: nn.Module, names: list[str], hooks: list):
        self.model, self.names, self._hooks = model, names, hooks

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        modules = dict(self.model.named_modules())
        for name in self.names:
            if parametrize.is_parametrized(modules[name], "weight"):
                parametrize.remove_parametrizations(modules[name], "weight", leave_parametrized=False)

    def __enter__(self) -> QATHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def attach_fake_quant(model: nn.Module, names: Sequence[str], recipe: QuantRecipe) -> QATHandle:
    """Fake-quantize the weights and/or inputs of the named Linear layers with ``recipe`` (a
    :class:`common.recipes.QuantRecipe`) and the STE (module docstring); the front door is
    :func:`common.quantization.prepare`. ValueError for a recipe of another type or a name that is not an
    ``nn.Linear``."""
    check_recipe(recipe, QuantRecipe)
    modules = linear_modules(model, names)
    hooks = []
    for module in modules.values():
        if recipe.weights is not None:
            parametrize.register_parametrization(module, "weight",
                                                 _FakeQuantWeight(partial(quantize_tensor, spec=recipe.weights)))
        if recipe.activations is not None:
            quantize_input = partial(quantize_tensor, spec=recipe.activations)
            hooks.append(module.register_forward_pre_hook(
                lambda _module, args, q=quantize_input: (ste_quantize(args[0], q), *args[1:])))
    return QATHandle(model, list(names), hooks)
