"""The model study on the sweep: the moved MLP linears of each sweep point fake-quantized per cell, weights only
(``w``) or weights and activations (``wa``, the paper's setting), and the perplexity on shared windows.

Weights only (``w``) is our extension: the authors' repository has no weights-only run (every row of their table is
W+A). A sweep point (``common.models.rescale``; workflow config ``sweep``) is the base model with the RMSNorm gain
before the MLP divided by ``c`` and ``gate_proj``/``up_proj`` multiplied by ``c``: the same function, the weight
sigma of the quantized linears times ``c``. A cell (``results/finer_is_better/ptq/<model>/<operands>/<cell>.json``)
selects the Linear layers whose names match ``model.include``, applies :func:`common.quantizers.apply_quantization`
(the cell's spec for the weights, and for the activations too under ``wa``; blocks along the last dimension)
and scores the strided perplexity (window = stride, as the paper's 2048/2048) of the first ``max_tokens`` tokens
of a split (:func:`common.eval.fake_quant_perplexity`), keeping every window's NLL and token count: the units of
the claims' paired bootstrap. ``unquantized.json`` is the same evaluation without quantization, plus the weight
sigma of the quantized linears (the point's sigma is their median). One job evaluates every cell of a
(model, operands) pair: the model and the tokens are loaded once. The two evaluations import the model machinery
(torch, transformers) when they run; the operand names and the gap summary serve the steps that only read records.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.recipes import QuantRecipe
from common.registry import lookup

from .settings import parse_cell, quant_spec

if TYPE_CHECKING:
    from common.compute import Compute

UNQUANTIZED = "unquantized"
OPERANDS = {"w": "weights only", "wa": "weights and activations"}
EXTENSION = "our extension: the authors' repository has no weights-only run"  # every one of their runs is W+A
OUR_EXTENSIONS = {"w": EXTENSION}  # operand sets the authors never ran


def operand_label(operands: str) -> str:
    """The operand set in words, marked where it is our extension (``w``: weights only)."""
    label = lookup(OPERANDS, operands, "operands")
    return f"{label}; {OUR_EXTENSIONS[operands]}" if operands in OUR_EXTENSIONS else label


def cell_recipe(config: Mapping[str, Any], cell: str, operands: str) -> QuantRecipe:
    """The cell's recipe: its spec on the weights, and on the activations under ``wa``."""
    lookup(OPERANDS, operands, "operands")
    spec = quant_spec(config, cell)
    return QuantRecipe(spec, spec if operands == "wa" else None, f"{cell}-{operands}")


def model_cells(config: Mapping[str, Any], cells: Sequence[str], operands: str, model_dir: str | Path,
                split: str | Path, compute: Compute | None = None) -> list[dict[str, Any]]:
    """The evaluation record of every cell of one (model, operands): :func:`common.eval.fake_quant_perplexity`
    (where ``compute`` says, :class:`common.compute.Compute`) plus the cell's name, parts and operands."""
    from common.eval.fake_quant import fake_quant_perplexity

    study = config["model"]
    records = []
    for cell in cells:
        record = fake_quant_perplexity(model_dir, split, cell_recipe(config, cell, operands), include=study["include"],
                                       window=study["window"], stride=study["stride"],
                                       max_tokens=study["max_tokens"], batch_size=study["batch_size"],
                                       compute=compute)
        records.append({"cell": cell, **parse_cell(cell), "operands": operands, **record})
    return records


def unquantized_cell(config: Mapping[str, Any], model_dir: str | Path, split: str | Path,
                     compute: Compute | None = None) -> dict[str, Any]:
    """The reference evaluation of ``model_dir`` (where ``compute`` says) and the weight sigma of every linear the
    cells quantize (of the checkpoint's float32 weights)."""
    from common.eval.fake_quant import fake_quant_perplexity
    from common.models import load_causal_lm
    from common.models.rescale import linear_sigmas

    study = config["model"]
    sigmas = linear_sigmas(load_causal_lm(model_dir), study["include"])
    if not sigmas:
        raise ValueError(f"model.include {study['include']!r} matches no linear of {str(model_dir)!r}")
    record = fake_quant_perplexity(model_dir, split, None, include=study["include"], window=study["window"],
                                   stride=study["stride"], max_tokens=study["max_tokens"],
                                   batch_size=study["batch_size"], compute=compute)
    return {"cell": UNQUANTIZED, "weight_sigmas": sigmas, "sigma": statistics.median(sigmas.values()), **record}


def _windows(record: Mapping[str, Any]) -> dict[str, list[float]]:
    ppl = record["metrics"]["perplexity"]
    return {"window_nll": ppl["window_nll"], "window_tokens": ppl["window_tokens"]}


def gap_summary(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One sweep point's summary: the reference perplexity and windows, the point's weight sigma, and per cell
    record ``{"cell", "operands", "scale", "variant", "block_size", "perplexity", "gap", "window_nll"}`` with
    ``gap = ppl(cell) - ppl(unquantized)``. Every record must score the reference's windows (ValueError)."""
    cells = list(cells)
    reference = _windows(unquantized)
    base = unquantized["metrics"]["perplexity"]["perplexity"]
    rows = []
    for cell in cells:
        windows = _windows(cell)
        if windows["window_tokens"] != reference["window_tokens"]:
            raise ValueError(f"{model}: cell {cell['cell']} ({cell['operands']}) scored other windows than the "
                             "unquantized reference")
        ppl = cell["metrics"]["perplexity"]["perplexity"]
        rows.append({"cell": cell["cell"], "operands": cell["operands"], "scale": cell["scale"],
                     "variant": cell["variant"], "block_size": cell["block_size"], "perplexity": ppl,
                     "gap": ppl - base, "window_nll": windows["window_nll"]})
    return {"model": model, "sigma": unquantized["sigma"], "perplexity": base,
            "tokens": unquantized["data"]["split"]["tokens"], "window_nll": reference["window_nll"],
            "window_tokens": reference["window_tokens"], "rows": rows,
            "wall_time_s": float(unquantized["wall_time_s"] + sum(c["wall_time_s"] for c in cells))}
