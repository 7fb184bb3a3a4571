"""Perplexity and zero-shot accuracy of a causal LM with chosen Linear layers fake-quantized: the model-study
cells shared by the papers.

Both load a checkpoint (model and tokenizer) and apply a :class:`common.recipes.QuantRecipe` through the front door
(:func:`common.quantization.quantize_`: weights quantized once, activations on every forward) to the Linear layers
whose names match ``include`` (:func:`common.select.select_linears`); with ``recipe=None`` the model is the
unquantized reference. Then

* ``fake_quant_perplexity`` tokenizes a corpus split (:func:`common.data.token_stream`, the first ``max_tokens``
  tokens) and scores the strided perplexity (:func:`common.eval.perplexity`);
* ``fake_quant_zero_shot`` scores zero-shot task files (:func:`common.eval.read_task`) by their kind, ``cloze``
  (:func:`common.eval.score_cloze`) or ``choice`` (:func:`common.eval.score_choice`), each example's correctness
  kept.

Both run where ``compute`` (:class:`common.compute.Compute`) says: the device, and the dtype the weights are cast to
before the recipe quantizes them. The result is an evaluation record (:func:`common.eval.evaluation_record`) whose
``quantization`` holds the recipe and the quantized layer names (None for the reference).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import torch
from transformers import AutoTokenizer

from common.compute import Compute
from common.data import read_jsonl, token_stream
from common.models import load_causal_lm
from common.quantization import quantize_
from common.recipes import QuantRecipe
from common.select import select_linears

from .record import describe_model, evaluation_record, file_summary
from .sliding_window import perplexity
from .tasks import read_task
from .zeroshot import TASK_SCORERS

Path = str | os.PathLike[str]


def _fake_quantized(model_dir: Path, recipe: QuantRecipe | None, include: str, compute: Compute | None
                    ) -> tuple[torch.nn.Module, Any, dict[str, Any] | None]:
    """The model of ``model_dir`` placed where ``compute`` says (device and weight dtype; default: CUDA when
    present, float32), then with ``recipe`` applied to its ``include`` Linears (so the weights are quantized from
    the dtype they run in), its tokenizer, and the record's ``quantization`` (``{"recipe", "layers"}``; None and the
    model as loaded when ``recipe`` is None)."""
    model = (compute or Compute()).place(load_causal_lm(model_dir))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if recipe is None:
        return model, tokenizer, None
    layers = quantize_(model, recipe, names=select_linears(model, include=include)).names
    return model, tokenizer, {"recipe": recipe.to_dict(), "layers": layers}


def fake_quant_perplexity(model_dir: Path, split: Path, recipe: QuantRecipe | None, *, include: str, window: int,
                          stride: int, max_tokens: int | None = None, batch_size: int = 8,
                          compute: Compute | None = None) -> dict[str, Any]:
    """Evaluation record of ``model_dir`` on ``split`` with ``recipe`` applied to the ``include`` layers
    (ValueError naming a ``max_tokens`` shorter than the window, before anything is loaded)."""
    if max_tokens is not None and max_tokens < window:
        raise ValueError(f"max_tokens {max_tokens} is shorter than the window {window}")
    start = time.perf_counter()
    model, tokenizer, quantization = _fake_quantized(model_dir, recipe, include, compute)
    docs = read_jsonl(split)
    stream = token_stream(tokenizer, docs)
    if max_tokens is not None:
        stream = stream[:max_tokens]
    ppl = perplexity(model, stream, window=window, stride=stride, batch_size=batch_size)
    data = {"split": {**file_summary(split), "documents": len(docs), "tokens": stream.numel(),
                      "max_tokens": max_tokens}, "window": window, "stride": stride}
    return evaluation_record(describe_model(model, model_dir), quantization, data, {"perplexity": ppl},
                             wall_time_s=time.perf_counter() - start)


def fake_quant_zero_shot(model_dir: Path, recipe: QuantRecipe | None, *, include: str, tasks: Mapping[str, Path],
                         batch_size: int = 8, compute: Compute | None = None) -> dict[str, Any]:
    """Evaluation record of ``model_dir`` on the zero-shot ``tasks`` (kind -> task file, kinds of
    :data:`common.eval.zeroshot.TASK_SCORERS`) with ``recipe`` applied to the ``include`` layers: per kind the
    metric group of its scorer (accuracies and each example's correctness) and ``data[kind]`` (the file and its
    example count). ValueError naming no tasks or an unknown kind, before anything is loaded."""
    if not tasks:
        raise ValueError(f"fake_quant_zero_shot needs at least one task (kinds: {', '.join(TASK_SCORERS)})")
    unknown = [kind for kind in tasks if kind not in TASK_SCORERS]
    if unknown:
        raise ValueError(f"unknown zero-shot task kinds {unknown} (known: {', '.join(TASK_SCORERS)})")
    start = time.perf_counter()
    examples = {kind: read_task(path) for kind, path in tasks.items()}
    model, tokenizer, quantization = _fake_quantized(model_dir, recipe, include, compute)
    metrics = {kind: TASK_SCORERS[kind](model, tokenizer, task, batch_size=batch_size)
               for kind, task in examples.items()}
    data = {kind: {**file_summary(path), "examples": len(examples[kind])} for kind, path in tasks.items()}
    return evaluation_record(describe_model(model, model_dir), quantization, data, metrics,
                             wall_time_s=time.perf_counter() - start)
