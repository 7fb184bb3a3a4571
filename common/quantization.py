"""The front door, shaped like torchao's ``quantize_`` and its QAT ``prepare``/``convert``: one call per path, a
recipe of :mod:`common.recipes` (or what :func:`common.recipes.resolve_recipe` reads: a name in
:data:`common.recipes.RECIPES`, a JSON object or a ``.json`` file) saying which numerics. Every paper and both
command lines apply quantization through it.

>>> handle = quantize_(model, "MXFP4")                      # PTQ, in place; handle.remove() restores  # doctest: +SKIP
>>> prepare(model, "PARETOQ_W2")                            # QAT: train the model as usual ...      # doctest: +SKIP
>>> convert(model)                                          # ... then the deployed form              # doctest: +SKIP

Layers: ``filter_fn(module, name) -> bool`` picks the ``nn.Linear`` modules (as torchao's ``filter_fn``), or
``names`` lists them; by default the recipe's own selection (:meth:`common.recipes.Recipe.select`): the transformer
blocks' MLP Linears (:func:`common.select.select_linears`) for block and delayed-scaling recipes, every block Linear
for low-bit QAT (:func:`common.qat.lowbit_selection`).

Each call dispatches on the recipe (:class:`common.recipes.Recipe`), which knows its path:

* :func:`quantize_`: :meth:`~common.recipes.Recipe.apply`, post-training quantization of a :class:`QuantRecipe`
  (:func:`common.ptq.apply_quantization`: weights replaced by their fake-quantized values, inputs quantized by
  forward pre-hooks); a QAT recipe refuses.
* :func:`prepare`: :meth:`~common.recipes.Recipe.attach`; a :class:`QuantRecipe` trains with fake quantization and a
  straight-through estimator (:func:`common.qat.attach_fake_quant`), a :class:`DelayedScalingRecipe` with W8A8
  delayed per-tensor scaling of all three GEMM operands (:func:`common.qat.attach_w8a8`), a :class:`LowBitRecipe`
  with ParetoQ's learned per-row scales (:func:`common.qat.attach_lowbit`).
* :func:`convert` ends QAT with :meth:`~common.recipes.Recipe.convert`: a block recipe becomes its PTQ (the trained
  weights fake-quantized as the STE's forward used them, inputs hooked: the same forward values); a low-bit recipe
  keeps its effective weights ``Q(W)`` bit for bit (and int8 per-token input hooks for A8); a delayed-scaling recipe
  drops its quantizers and keeps the trained weights (the paper evaluates them in BF16; deploy them in HiF8 with
  :func:`quantize_` or a quantized checkpoint).
* :func:`release` ends QAT without deploying: the quantizers go and the layers keep the trained latent weights, what
  a QAT run checkpoints (:func:`common.qat.run.qat_run`).

This module imports neither ``common.ptq`` nor ``common.qat``: the recipe imports its path when it is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from torch import nn

from common.recipes import QuantRecipe, Recipe, resolve_recipe

if TYPE_CHECKING:
    from common.ptq.apply import QuantizationHandle

PREPARED = "_lowbit_lab_qat"  # the model attribute holding (recipe, handle) between prepare and convert
FilterFn = Callable[[nn.Module, str], bool]


def selected_linears(model: nn.Module, recipe: Recipe, filter_fn: FilterFn | None = None,
                     names: Sequence[str] | None = None) -> list[str]:
    """``names``, or the names of the ``nn.Linear`` modules ``filter_fn`` accepts, or the recipe's default selection
    (module docstring); ValueError when both ``filter_fn`` and ``names`` are given or ``filter_fn`` selects none."""
    if names is not None:
        if filter_fn is not None:
            raise ValueError("give filter_fn or names, not both")
        return list(names)
    if filter_fn is None:
        return recipe.select(model)
    selected = [name for name, module in model.named_modules()
                if isinstance(module, nn.Linear) and filter_fn(module, name)]
    if not selected:
        raise ValueError("filter_fn selected no nn.Linear module")
    return selected


def quantize_(model: nn.Module, recipe: QuantRecipe | str, filter_fn: FilterFn | None = None, *,
              names: Sequence[str] | None = None) -> QuantizationHandle:
    """Post-training fake quantization of ``model`` in place with a block recipe (module docstring); returns the
    handle whose ``remove()`` restores the original weights and drops the input hooks. ValueError for a QAT
    recipe (use :func:`prepare`)."""
    recipe = resolve_recipe(recipe)
    return recipe.apply(model, selected_linears(model, recipe, filter_fn, names))


def prepare(model: nn.Module, recipe: Recipe | str, filter_fn: FilterFn | None = None, *,
            names: Sequence[str] | None = None) -> Any:
    """Attach the QAT quantizers of ``recipe`` to ``model`` (module docstring) and return their handle (telemetry,
    scales, noise switches: :class:`common.qat.QATHandle`, :class:`common.qat.W8A8Handle` or
    :class:`common.qat.LowBitHandle`). ValueError for a model prepared already (convert it first)."""
    recipe = resolve_recipe(recipe)
    if getattr(model, PREPARED, None) is not None:
        raise ValueError("the model is prepared for QAT already: convert(model) before preparing it again")
    handle = recipe.attach(model, selected_linears(model, recipe, filter_fn, names))
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
    result = recipe.convert(model, handle)
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
