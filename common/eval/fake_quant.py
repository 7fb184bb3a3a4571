"""Perplexity of a causal LM with chosen Linear layers fake-quantized: the model-study cell shared by the papers.

``fake_quant_perplexity`` loads a checkpoint, tokenizes a corpus split (:func:`common.data.token_stream`, the
first ``max_tokens`` tokens), applies a :class:`common.ptq.QuantRecipe` to the Linear layers whose names match
``include`` (:func:`common.ptq.select_linears`, :func:`common.ptq.apply_quantization`: weights quantized once,
activations on every forward), and scores the strided perplexity (:func:`common.eval.perplexity`). With
``recipe=None`` it is the unquantized reference. The result is an evaluation record
(:func:`common.eval.evaluation_record`) whose ``quantization`` holds the recipe and the quantized layer names.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from transformers import AutoTokenizer

from common.data import read_jsonl, token_stream
from common.models import load_causal_lm
from common.ptq import QuantRecipe, apply_quantization, select_linears

from .perplexity import perplexity
from .record import describe_model, evaluation_record, file_summary


def fake_quant_perplexity(model_dir: str | os.PathLike[str], split: str | os.PathLike[str],
                          recipe: QuantRecipe | None, *, include: str, window: int, stride: int,
                          max_tokens: int | None = None, batch_size: int = 8) -> dict[str, Any]:
    """Evaluation record of ``model_dir`` on ``split`` with ``recipe`` applied to the ``include`` layers."""
    start = time.perf_counter()
    model = load_causal_lm(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    docs = read_jsonl(split)
    stream = token_stream(tokenizer, docs)
    if max_tokens is not None:
        if max_tokens < window:
            raise ValueError(f"max_tokens {max_tokens} is shorter than the window {window}")
        stream = stream[:max_tokens]
    quantization = None
    if recipe is not None:
        layers = select_linears(model, include=include)
        apply_quantization(model, recipe, layers)
        quantization = {"recipe": recipe.to_dict(), "layers": layers}
    ppl = perplexity(model, stream, window=window, stride=stride, batch_size=batch_size)
    data = {"split": {**file_summary(split), "documents": len(docs), "tokens": stream.numel(),
                      "max_tokens": max_tokens}, "window": window, "stride": stride}
    return evaluation_record(describe_model(model, model_dir), quantization, data, {"perplexity": ppl},
                             wall_time_s=time.perf_counter() - start)


def perplexity_gaps(model: str, unquantized: Mapping[str, Any], cells: Iterable[Mapping[str, Any]],
                    fields: Sequence[str]) -> dict[str, Any]:
    """A model study's summary: the reference perplexity and, per cell record, ``fields`` copied from it, its
    perplexity and ``gap = ppl(cell) - ppl(unquantized)``; ``wall_time_s`` sums every record's."""
    base = unquantized["metrics"]["perplexity"]["perplexity"]
    cells = list(cells)
    rows = [{**{f: c[f] for f in fields}, "perplexity": c["metrics"]["perplexity"]["perplexity"],
             "gap": c["metrics"]["perplexity"]["perplexity"] - base} for c in cells]
    return {"model": model, "perplexity": base, "tokens": unquantized["data"]["split"]["tokens"], "rows": rows,
            "wall_time_s": float(unquantized["wall_time_s"] + sum(c["wall_time_s"] for c in cells))}
