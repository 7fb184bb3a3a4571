"""The front door, shaped like torchao's ``quantize_`` and its QAT ``prepare``/``convert``: one call per path, a
recipe of :mod:`common.recipes` (or its name in :data:`common.recipes.RECIPES`) saying which numerics.

>>> handle = quantize_(model, "MXFP4")                      # PTQ, in place; handle.remove() restores  # doctest: +SKIP
>>> prepare(model, "PARETOQ_W2")                            # QAT: train the model as usual ...      # doctest: +SKIP
>>> convert(model)                                          # ... then the deployed form              # doctest: +SKIP

Layers: ``filter_fn(module, name) -> bool`` picks the ``nn.Linear`` modules (as torchao's ``filter_fn``); by
default the recipe's own selection: the transformer blocks' Linears (:func:`common.select.select_linears`) for
block and delayed-scaling recipes, every block Linear for low-bit QAT (:func:`common.qat.lowbit_selection`).

The paths behind the door (each recipe type validated by its own dataclass, the one validator):

* :func:`quantize_` with a :class:`QuantRecipe`: :func:`common.ptq.apply_quantization` (weights replaced by their
  fake-quantized values, inputs quantized by forward pre-hooks);
* :func:`prepare` with a :class:`QuantRecipe`: fake-quant QAT with a straight-through estimator
  (:func:`common.qat.attach_fake_quant`); with a :class:`DelayedScalingRecipe`: W8A8 QAT with delayed per-tensor
  scaling of all three GEMM operands (:func:`common.qat.attach_w8a8`); with a :class:`LowBitRecipe`: ParetoQ QAT
  with learned per-row scales (:func:`common.qat.attach_lowbit`).
* :func:`convert` ends QAT: a block recipe becomes its PTQ (the trained weights fake-quantized as the STE's forward
  used them, inputs hooked: the same forward values); a low-bit recipe keeps its effective weights ``Q(W)`` bit for
  bit (and int8 per-token input hooks for A8); a delayed-scaling recipe drops its quantizers and keeps the trained
  weights (the paper evaluates them in BF16; deploy them in HiF8 with :func:`quantize_` or a quantized checkpoint).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from common.ptq import QuantizationHandle, apply_quantization
from common.qat import INT8_PER_TOKEN, attach_fake_quant, attach_lowbit, attach_w8a8, lowbit_selection
from common.recipes import DelayedScalingRecipe, LowBitRecipe, QuantRecipe, Recipe, get_recipe
from common.select import select_linears

PREPARED = "_lowbit_lab_qat"  # the model attribute holding (recipe, names, handle) between prepare and convert
FilterFn = Callable[[nn.Module, str], bool]


def resolve_recipe(recipe: Recipe | str) -> Recipe:
    """``recipe``, or the named recipe of :data:`common.recipes.RECIPES`; ValueError naming anything else."""
    if isinstance(recipe, str):
        return get_recipe(recipe)
    if not isinstance(recipe, QuantRecipe | DelayedScalingRecipe | LowBitRecipe):
        raise ValueError(f"recipe must be a common.recipes recipe or its name, got {recipe!r}")
    return recipe


def selected_linears(model: nn.Module, recipe: Recipe, filter_fn: FilterFn | None = None) -> list[str]:
    """The names of the ``nn.Linear`` modules ``filter_fn`` accepts, or the recipe's default selection (module
    docstring); ValueError when none is selected."""
    if filter_fn is None:
        return lowbit_selection(model) if isinstance(recipe, LowBitRecipe) else select_linears(model)
    names = [name for name, module in model.named_modules()
             if isinstance(module, nn.Linear) and filter_fn(module, name)]
    if not names:
        raise ValueError("filter_fn selected no nn.Linear module")
    return names


def quantize_(model: nn.Module, recipe: QuantRecipe | str, filter_fn: FilterFn | None = None) -> QuantizationHandle:
    """Post-training fake quantization of ``model`` in place with a block recipe (module docstring); returns the
    handle whose ``remove()`` restores the original weights and drops the input hooks. ValueError for a QAT
    recipe (use :func:`prepare`)."""
    recipe = resolve_recipe(recipe)
    if not isinstance(recipe, QuantRecipe):
        raise ValueError(f"quantize_ applies block recipes (PTQ); {type(recipe).__name__} {recipe.name!r} is a QAT "
                         "recipe: use prepare(model, recipe) and, after training, convert(model)")
    return apply_quantization(model, recipe, selected_linears(model, recipe, filter_fn))


def prepare(model: nn.Module, recipe: Recipe | str, filter_fn: FilterFn | None = None) -> Any:
    """Attach the QAT quantizers of ``recipe`` to ``model`` (module docstring) and return their handle (telemetry,
    scales, noise switches: :class:`common.qat.QATHandle`, :class:`common.qat.W8A8Handle` or
    :class:`common.qat.LowBitHandle`). ValueError for a model prepared already (convert it first)."""
    recipe = resolve_recipe(recipe)
    if getattr(model, PREPARED, None) is not None:
        raise ValueError("the model is prepared for QAT already: convert(model) before preparing it again")
    names = selected_linears(model, recipe, filter_fn)
    if isinstance(recipe, QuantRecipe):
        handle = attach_fake_quant(model, recipe, names)
    elif isinstance(recipe, DelayedScalingRecipe):
        handle = attach_w8a8(model, names, recipe.format, recipe.observer, dict(recipe.observer_options),
                             recipe.max_val, recipe.history_unit, recipe.roles, recipe.amax_reduction)
    else:
        handle = attach_lowbit(model, names, recipe.bits, activation_bits=recipe.activation_bits,
                               hadamard=recipe.hadamard)
    setattr(model, PREPARED, (recipe, names, handle))
    return handle


def convert(model: nn.Module) -> QuantizationHandle | None:
    """End the QAT that :func:`prepare` started and leave the deployed form (module docstring); returns the PTQ
    handle of what stays quantized by hooks or in place (None when nothing does). ValueError for a model that was
    not prepared."""
    prepared = getattr(model, PREPARED, None)
    if prepared is None:
        raise ValueError("the model was not prepared for QAT (prepare(model, recipe) first)")
    recipe, names, handle = prepared
    if isinstance(recipe, QuantRecipe):
        handle.remove()  # the trained latent weights, plain Linears
        result = apply_quantization(model, recipe, names)
    elif isinstance(recipe, DelayedScalingRecipe):
        handle.remove()
        result = None
    else:
        handle.remove(materialize=True)  # Q(W) (Q(W H) H^T with a rotation), bit for bit
        result = None
        if recipe.activation_bits is not None:
            result = apply_quantization(model, QuantRecipe(None, INT8_PER_TOKEN, "int8 per token"), names,
                                        weights=False)
    delattr(model, PREPARED)
    return result
