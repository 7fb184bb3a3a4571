"""The model study: MLP linears of a causal LM fake-quantized (weights *and* activations, blocks along the last
dimension) with each cell's spec, and the perplexity gap to the unquantized model.

A cell (``results/finer_is_better/ptq/<model>/<cell>.json``) selects the Linear layers whose names match
``model.include`` (the MLP gate/up/down projections: every Linear except lm_head and attention, as in the
paper), applies :func:`common.ptq.apply_quantization` with the same spec for weights and activations, and
scores the strided perplexity (window = stride, as the paper's 2048/2048) of the first ``max_tokens`` tokens of
a split (:func:`common.eval.perplexity`). ``unquantized.json`` is the same evaluation without quantization;
``gap = ppl(cell) - ppl(unquantized)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common.eval import fake_quant_perplexity, perplexity_gaps
from common.ptq import QuantRecipe

from .settings import parse_cell, quant_spec

UNQUANTIZED = "unquantized"


def model_cell(config: Mapping[str, Any], cell: str, model_dir: str | Path, split: str | Path) -> dict[str, Any]:
    """Perplexity of ``model_dir`` on ``split`` with the cell's fake quantization (``cell="unquantized"``: none),
    the same spec for weights and activations: :func:`common.eval.fake_quant_perplexity` plus the cell's name
    and parts."""
    study = config["model"]
    quantized = cell != UNQUANTIZED
    recipe = None
    if quantized:
        spec = quant_spec(config, cell)
        recipe = QuantRecipe(spec, spec, cell)
    record = fake_quant_perplexity(model_dir, split, recipe, include=study["include"], window=study["window"],
                                   stride=study["stride"], max_tokens=study["max_tokens"],
                                   batch_size=study["batch_size"])
    return {"cell": cell, **(parse_cell(cell) if quantized else {}), **record}


def gap_summary(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The model's summary (:func:`common.eval.perplexity_gaps`), rows of
    ``{"cell", "scale", "variant", "block_size", "perplexity", "gap"}``."""
    return perplexity_gaps(model, unquantized, cells, ("cell", "scale", "variant", "block_size"))
