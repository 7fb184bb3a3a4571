"""The front door, shaped like torchao's ``quantize_`` and its QAT ``prepare``/``convert``: one call per path, a
recipe of :mod:`common.recipes` (or what :func:`common.recipes.resolve_recipe` reads: a name in
:data:`common.recipes.RECIPES`, a JSON object or a ``.json`` file) saying which numerics. Every caller of the project
that applies a recipe to a model goes through it: the papers, both command lines, the evaluation, the QAT run
skeleton and the loaders of quantized and low-bit checkpoints.

>>> handle = quantize_(model, "MXFP4")                      # PTQ, in place; handle.remove() restores  # doctest: +SKIP
>>> prepare(model, "PARETOQ_W2")                            # QAT: train the model as usual ...      # doctest: +SKIP
>>> convert(model)                                          # ... then the deployed form              # doctest: +SKIP

Layers: ``filter_fn(module, name) -> bool`` picks the ``nn.Linear`` modules (as torchao's ``filter_fn``), or
``names`` lists them; by default the recipe type's own selection (:attr:`RecipePath.select`): the transformer
blocks' MLP Linears (:func:`common.select.select_linears`) for block and delayed-scaling recipes, every block Linear
for low-bit QAT (:func:`common.quantizers.lowbit_selection`).

Dispatch. Recipes are data and know nothing of the code that applies them; :data:`RECIPE_PATHS` maps each recipe
type to the quantizers of :mod:`common.quantizers` that apply it (a :class:`RecipePath`):

* :func:`quantize_`: ``apply``, post-training quantization of a :class:`QuantRecipe`
  (:func:`common.quantizers.apply_quantization`: weights replaced by their fake-quantized values, inputs quantized by
  forward pre-hooks); a QAT recipe has no ``apply`` and refuses.
* :func:`prepare`: ``attach``; a :class:`QuantRecipe` trains with fake quantization and a straight-through estimator
  (:func:`common.quantizers.attach_fake_quant`), a :class:`DelayedScalingRecipe` with W8A8 delayed per-tensor
  scaling of all three GEMM operands (:func:`common.quantizers.attach_w8a8`), a :class:`LowBitRecipe` with
  ParetoQ's learned per-row scales (:func:`common.quantizers.attach_lowbit`).
* :func:`convert` ends QAT with ``convert``: a block recipe becomes its PTQ (the trained weights fake-quantized as
  the STE's forward used them, inputs hooked: the same forward values); a low-bit recipe keeps its effective
  weights ``Q(W)`` bit for bit (and int8 per-token input hooks for A8); a delayed-scaling recipe drops its
  quantizers and keeps the trained weights (the paper evaluates them in BF16; deploy them in HiF8 with
  :func:`quantize_` or a quantized checkpoint).
* :func:`release` ends QAT without deploying: the quantizers go and the layers keep the trained latent weights, what
  a QAT run checkpoints (:func:`common.qat.run.qat_run`).

A new recipe type: a dataclass in :mod:`common.recipes`, its quantizer in :mod:`common.quantizers`, and one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from common.quantizers import (
    LowBitHandle,
    QATHandle,
    QuantizationHandle,
    W8A8Handle,
    apply_quantization,
    attach_fake_quant,
    attach_lowbit,
    attach_w8a8,
    lowbit_selection,
)
from common.recipes import INT8_PER_TOKEN, DelayedScalingRecipe, LowBitRecipe, QuantRecipe, Recipe, resolve_recipe
from common.select import select_linears

PREPARED = "_lowbit_lab_qat"  # the model attribute holding (recipe, handle) between prepare and convert
FilterFn = Callable[[nn.Module, str], bool]


def _convert_block(model: nn.Module, handle: QATHandle, recipe: QuantRecipe) -> QuantizationHandle:
    """The PTQ of the trained latent weights: weights fake-quantized as the STE's forward used them, inputs hooked,
    so the forward values are those of QAT."""
    handle.remove()
    return apply_quantization(model, handle.names, recipe)


def _convert_delayed_scaling(model: nn.Module, handle: W8A8Handle, recipe: DelayedScalingRecipe) -> None:
    """The quantizers go and the trained weights stay (the paper evaluates them in BF16)."""
    handle.remove()


def _convert_lowbit(model: nn.Module, handle: LowBitHandle, recipe: LowBitRecipe) -> QuantizationHandle | None:
    """Plain Linear layers holding the effective weights ``Q(W)`` (``Q(W H) H^T`` with a rotation) bit for bit, and
    with 8-bit activations their :data:`common.recipes.INT8_PER_TOKEN` input hooks (the PTQ handle returned)."""
    handle.remove(materialize=True)
    if recipe.activation_bits is None:
        return None
    return apply_quantization(model, handle.names, QuantRecipe(None, INT8_PER_TOKEN, "int8 per token"))


@dataclass(frozen=True)
class RecipePath:
    """How the front door applies one recipe type, as functions of one signature each:

    * ``select(model) -> names``: the Linear layers quantized unless the caller picks them;
    * ``attach(model, names, recipe) -> handle``: the QAT quantizers (the handle has ``names`` and ``remove()``);
    * ``convert(model, handle, recipe)``: the deployed form once training ends; returns the PTQ handle of what stays
      quantized by hooks or in place (None when nothing does);
    * ``apply(model, names, recipe, weights=...) -> QuantizationHandle``: post-training quantization in place
      (None: a QAT-only recipe type).
    """

    select: Callable[[nn.Module], list[str]]
    attach: Callable[[nn.Module, Sequence[str], Any], Any]
    convert: Callable[[nn.Module, Any, Any], QuantizationHandle | None]
    apply: Callable[..., QuantizationHandle] | None = None


RECIPE_PATHS: dict[type[Recipe], RecipePath] = {
    QuantRecipe: RecipePath(select_linears, attach_fake_quant, _convert_block, apply_quantization),
    DelayedScalingRecipe: RecipePath(select_linears, attach_w8a8, _convert_delayed_scaling),
    LowBitRecipe: RecipePath(lowbit_selection, attach_lowbit, _convert_lowbit),
}


def recipe_path(recipe: Recipe) -> RecipePath:
    """The :class:`RecipePath` of ``recipe``'s type; ValueError naming a type the front door does not apply."""
    path = RECIPE_PATHS.get(type(recipe))
    if path is None:
        raise ValueError(f"no quantizer applies a {type(recipe).__name__}; known recipe types: "
                         f"{', '.join(kind.__name__ for kind in RECIPE_PATHS)}")
    return path


def selected_linears(model: nn.Module, recipe: Recipe, filter_fn: FilterFn | None = None,
                     names: Sequence[str] | None = None) -> list[str]:
    """``names``, or the names of the ``nn.Linear`` modules ``filter_fn`` accepts, or the recipe's default selection
    (module docstring); ValueError when both ``filter_fn`` and ``names`` are given or ``filter_fn`` selects none."""
    if names is not None:
        if filter_fn is not None:
            raise ValueError("give filter_fn or names, not both")
        return list(names)
    if filter_fn is None:
        return recipe_path(recipe).select(model)
    selected = [name for name, module in model.named_modules()
                if isinstance(module, nn.Linear) and filter_fn(module, name)]
    if not selected:
        raise ValueError("filter_fn selected no nn.Linear module")
    return selected


def quantize_(model: nn.Module, recipe: QuantRecipe | str, filter_fn: FilterFn | None = None, *,
              names: Sequence[str] | None = None, weights: bool = True) -> QuantizationHandle:
    """Post-training fake quantization of ``model`` in place with a block recipe (module docstring); returns the
    handle whose ``remove()`` restores the original weights and drops the input hooks. ``weights=False`` attaches
    only the input hooks, for a model whose weights hold quantized values already (a quantized checkpoint, rebuilt
    from its codes). ValueError for a QAT recipe (use :func:`prepare`)."""
    recipe = resolve_recipe(recipe)
    path = recipe_path(recipe)
    if path.apply is None:
        raise ValueError(f"{type(recipe).__name__} {recipe.name!r} is a QAT recipe, and post-training quantization "
                         "(quantize_) applies block recipes: use prepare(model, recipe) and, after training, "
                         "convert(model)")
    return path.apply(model, selected_linears(model, recipe, filter_fn, names), recipe, weights=weights)


def prepare(model: nn.Module, recipe: Recipe | str, filter_fn: FilterFn | None = None, *,
            names: Sequence[str] | None = None) -> Any:
    """Attach the QAT quantizers of ``recipe`` to ``model`` (module docstring) and return their handle (telemetry,
    scales, noise switches: :class:`common.quantizers.QATHandle`, :class:`common.quantizers.W8A8Handle` or
    :class:`common.quantizers.LowBitHandle`). ValueError for a model prepared already (convert it first)."""
    recipe = resolve_recipe(recipe)
    if getattr(model, PREPARED, None) is not None:
        raise ValueError("the model is prepared for QAT already: convert(model) before preparing it again")
    handle = recipe_path(recipe).attach(model, selected_linears(model, recipe, filter_fn, names), recipe)
    setattr(model, PREPARED, (recipe, handle))
    return handle


def convert(model: nn.Module) -> QuantizationHandle | None:
    """End the QAT that :func:`prepare` started and leave the deployed form (module docstring); returns the PTQ
    handle of what stays quantized by hooks or in place (None when nothing does). ValueError for a model that was
    not prepared."""
    prepared = getattr(model, PREPARED, None)
    if prepared is None:
        raise ValueError("the model was not prepared for QAT (prepare(model, recipe) first)")
    recipe, handle = prepared
    result = recipe_path(recipe).convert(model, handle, recipe)
    delattr(model, PREPARED)
    return result


def release(model: nn.Module) -> None:
    """End the QAT that :func:`prepare` started without deploying (module docstring): the quantizers are removed and
    the layers keep their trained latent weights. Nothing happens to a model that was not prepared (an unquantized
    run) or was released already."""
    prepared = getattr(model, PREPARED, None)
    if prepared is not None:
        prepared[1].remove()
        delattr(model, PREPARED)
