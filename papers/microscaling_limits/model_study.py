"""Perplexity gap of FP4 weight + activation microscaling vs block size, per scale variant (UE4M3, UE4M3-S,
UE5M3; :mod:`.settings`), on the Linear layers matching ``model.include`` (every Linear of the transformer
blocks; lm_head and embeddings stay in full precision). One cell per (model, variant, block size):
``results/microscaling_limits/ptq/<model>/<element>-<variant>-b<n>.json``, evaluated by
:func:`common.eval.fake_quant_perplexity`; ``unquantized.json`` is the reference."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common.eval import fake_quant_perplexity, perplexity_gaps
from common.ptq import QuantRecipe

from .settings import variant_spec

UNQUANTIZED = "unquantized"
CELL = re.compile(r"(?P<element>[a-z0-9]+)-(?P<variant>[a-z0-9]+)-b(?P<block>[0-9]+)")


def parse_cell(cell: str) -> dict[str, Any]:
    match = CELL.fullmatch(cell)
    if match is None:
        raise ValueError(f"cell name {cell!r} is not <element>-<variant>-b<block>")
    return {"element": match["element"], "variant": match["variant"], "block_size": int(match["block"])}


def model_cell(config: Mapping[str, Any], cell: str, model_dir: str | Path, split: str | Path) -> dict[str, Any]:
    """Evaluation record of one cell (``"unquantized"``: the reference)."""
    study = config["model"]
    parts, recipe = {}, None
    if cell != UNQUANTIZED:
        parts = parse_cell(cell)
        spec = variant_spec(parts["element"], parts["variant"], parts["block_size"])
        recipe = QuantRecipe(spec, spec, cell)
    record = fake_quant_perplexity(model_dir, split, recipe, include=study["include"], window=study["window"],
                                   stride=study["stride"], max_tokens=study["max_tokens"],
                                   batch_size=study["batch_size"])
    return {"cell": cell, **parts, **record}


def gap_summary(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The model's summary (:func:`common.eval.perplexity_gaps`), rows of
    ``{"cell", "variant", "block_size", "perplexity", "gap"}``."""
    return perplexity_gaps(model, unquantized, cells, ("cell", "variant", "block_size"))
