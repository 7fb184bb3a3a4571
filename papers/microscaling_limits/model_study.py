"""Perplexity and zero-shot cells of FP4 microscaling per scale variant (UE4M3, UE4M3-S, UE5M3; :mod:`.settings`)
and block size, on the Linear layers matching ``model.include``: every Linear of the transformer blocks for the
base model's study, the moved linears for a sweep point (:mod:`.sweep`); lm_head and embeddings stay in full
precision.

A cell name is ``<element>-<variant>-b<n>`` (weights and activations, the activations of each forward pass
quantized in blocks along the hidden axis) or ``<element>-<variant>-b<n>-weights`` (weights only);
``unquantized`` is the reference. Perplexity cells
(``results/microscaling_limits/ptq/<model>/<cell>.json``) are evaluated by
:func:`common.eval.fake_quant_perplexity` and keep its per-window NLL sums and token counts; zero-shot cells
(``results/microscaling_limits/zeroshot/<model>/<cell>.json``) are evaluated by
:func:`common.eval.fake_quant_zero_shot` on the shared cloze and choice tasks and keep each example's correctness,
the units of a paired bootstrap over examples. The two evaluations import the model machinery (torch, transformers)
when they run; the cell names and the gap summary serve the steps that only read records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.eval import perplexity_gaps
from common.recipes import QuantRecipe

from .settings import variant_spec

if TYPE_CHECKING:
    from common.compute import Compute

UNQUANTIZED = "unquantized"
CELL = re.compile(r"(?P<element>[a-z0-9]+)-(?P<variant>[a-z0-9]+)-b(?P<block>[0-9]+)(?P<weights>-weights)?")


def parse_cell(cell: str) -> dict[str, Any]:
    """``{"element", "variant", "block_size", "activations"}`` of a cell name (ValueError naming a bad one)."""
    match = CELL.fullmatch(cell)
    if match is None:
        raise ValueError(f"cell name {cell!r} is not <element>-<variant>-b<block>[-weights]")
    return {"element": match["element"], "variant": match["variant"], "block_size": int(match["block"]),
            "activations": match["weights"] is None}


def cell_recipe(cell: str) -> QuantRecipe:
    """The recipe of a (quantized) cell: the variant's spec on the weights, and on the activations unless the
    cell is weights only."""
    parts = parse_cell(cell)
    spec = variant_spec(parts["element"], parts["variant"], parts["block_size"])
    return QuantRecipe(spec, spec if parts["activations"] else None, cell)


def model_cell(config: Mapping[str, Any], cell: str, model_dir: str | Path, split: str | Path,
               name: str, compute: Compute | None = None) -> dict[str, Any]:
    """Perplexity record of one cell of model ``name`` (``"unquantized"``: the reference), with ``name``,
    ``cell`` and the cell's parts (:func:`parse_cell`); run where ``compute`` says (:class:`common.compute.Compute`)."""
    from common.eval.fake_quant import fake_quant_perplexity

    study = config["model"]
    parts = {} if cell == UNQUANTIZED else parse_cell(cell)
    recipe = None if cell == UNQUANTIZED else cell_recipe(cell)
    record = fake_quant_perplexity(model_dir, split, recipe, include=study["include"], window=study["window"],
                                   stride=study["stride"], max_tokens=study["max_tokens"],
                                   batch_size=study["batch_size"], compute=compute)
    return {**record, "name": name, "cell": cell, **parts}


def zero_shot_cell(config: Mapping[str, Any], cell: str, model_dir: str | Path, cloze: str | Path,
                   choice: str | Path, name: str, compute: Compute | None = None) -> dict[str, Any]:
    """Zero-shot record of one quantized cell of model ``name`` (:func:`common.eval.fake_quant_zero_shot`):
    ``metrics.cloze`` and ``metrics.choice`` with every example's correctness, ``name``, ``cell`` and the cell's
    parts."""
    from common.eval.fake_quant import fake_quant_zero_shot

    study = config["model"]
    record = fake_quant_zero_shot(model_dir, cell_recipe(cell), include=study["include"],
                                  tasks={"cloze": cloze, "choice": choice}, batch_size=study["batch_size"],
                                  compute=compute)
    return {**record, "name": name, "cell": cell, **parse_cell(cell)}


def gap_summary(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The model's summary (:func:`common.eval.perplexity_gaps`), rows of
    ``{"cell", "variant", "block_size", "perplexity", "gap"}``."""
    return perplexity_gaps(model, unquantized, cells, ("cell", "variant", "block_size"))
