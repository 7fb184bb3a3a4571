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

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from common.data import read_jsonl, token_stream
from common.eval import describe_model, evaluation_record, file_summary, perplexity
from common.models import load_causal_lm
from common.ptq import QuantRecipe, apply_quantization, select_linears

from .settings import parse_cell, quant_spec

UNQUANTIZED = "unquantized"


def model_cell(config: Mapping[str, Any], cell: str, model_dir: str | Path, split: str | Path) -> dict[str, Any]:
    """Perplexity of ``model_dir`` on ``split`` with the cell's fake quantization (``cell="unquantized"``: none);
    an evaluation record (:func:`common.eval.evaluation_record`) plus the cell's name and parts."""
    start = time.perf_counter()
    study = config["model"]
    quantized = cell != UNQUANTIZED
    parts = parse_cell(cell) if quantized else {}
    model = load_causal_lm(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    docs = read_jsonl(split)
    stream = token_stream(tokenizer, docs)
    if study["max_tokens"] is not None:
        stream = stream[: study["max_tokens"]]
    quantization = None
    if quantized:
        spec = quant_spec(config, cell)
        recipe = QuantRecipe(spec, spec, cell)
        layers = select_linears(model, include=study["include"])
        apply_quantization(model, recipe, layers)
        quantization = {"recipe": recipe.to_dict(), "layers": layers}
    ppl = perplexity(model, stream, window=study["window"], stride=study["stride"], batch_size=study["batch_size"])
    data = {"split": {**file_summary(split), "documents": len(docs), "tokens": stream.numel(),
                      "max_tokens": study["max_tokens"]}, "window": study["window"], "stride": study["stride"]}
    record = evaluation_record(describe_model(model, model_dir), quantization, data, {"perplexity": ppl},
                               wall_time_s=time.perf_counter() - start)
    return {"cell": cell, **parts, **record}


def gap_summary(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"model", "perplexity", "rows": [{"cell", "scale", "variant", "block_size", "perplexity", "gap"}]}``."""
    base = unquantized["metrics"]["perplexity"]["perplexity"]
    cells = list(cells)
    rows = [{"cell": c["cell"], "scale": c["scale"], "variant": c["variant"], "block_size": c["block_size"],
             "perplexity": c["metrics"]["perplexity"]["perplexity"],
             "gap": c["metrics"]["perplexity"]["perplexity"] - base} for c in cells]
    return {"model": model, "perplexity": base, "tokens": unquantized["data"]["split"]["tokens"], "rows": rows,
            "wall_time_s": float(unquantized["wall_time_s"] + sum(c["wall_time_s"] for c in cells))}
