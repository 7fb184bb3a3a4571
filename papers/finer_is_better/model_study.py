"""The model study on the sweep: the quantized MLP linears of each sweep point fake-quantized per cell, weights only
(``w``) or weights and activations (``wa``, the paper's setting), and the perplexity on shared windows.

Weights only (``w``) is our extension: the authors' repository has no weights-only run (every row of their table is
W+A). A sweep point (``common.models.rescale``; workflow config ``sweep``) is the base model with the RMSNorm gain
before the MLP divided by ``c`` and ``gate_proj``/``up_proj`` multiplied by ``c``: the same function, the weight
sigma of the moved linears (config ``model.sigma_include``) times ``c``. ``down_proj`` cannot move with them (its
input, ``act(gate) * up``, does not change with ``c``) and is quantized at the model's own scale at every point, as
the paper quantizes every MLP linear (config ``model.include``). A cell
(``results/finer_is_better/ptq/<model>/<operands>/<cell>.json``) applies the cell's spec to the selected weights
(:func:`common.quantization.quantize_`) and, under ``wa``, to their inputs, each at **its own scale**
(:func:`activation_prescale`): the sweep divides the inputs of gate/up by ``c``, so the hook quantizes ``k x`` and
divides by ``k`` again (``k = c`` there, 1 elsewhere), and every point quantizes the activations the model itself
makes. The sweep is about the weights: without this, a narrow-weight point (``c < 1``) would also see its
activations ``1/c`` times narrower than the model's own and both effects would mix in one ratio. Then it scores the
strided perplexity (window = stride, as the paper's 2048/2048) of the first ``max_tokens`` tokens of a split
(:func:`common.eval.perplexity`), keeping every window's NLL and token count: the units of the claims' paired
bootstrap. ``unquantized.json`` is the same evaluation without quantization, plus the weight sigma of the moved
linears (the point's sigma is their median). One job evaluates every cell of a (model, operands) pair: the model
and the tokens are loaded once, each cell's quantization undone before the next (the first record's wall time
includes the loading). The two evaluations import the model machinery (torch, transformers) when they run; the
operand names and the gap summary serve the steps that only read records.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.recipes import QuantRecipe, QuantSpec
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


def activation_prescale(model_dir: str | Path, names: Sequence[str]) -> dict[str, float]:
    """Per Linear of ``names`` (``model.layers.<i>.<path>``), the factor ``k`` that brings its input back to the
    model's own scale: a sweep point's rescale record (:data:`common.models.rescale.RECORD_FILE`: its factor ``c``
    and transforms) scales a projection's input by ``c^e``, ``e`` summed over the transforms from
    :data:`common.models.rescale.PLANS` (a projection whose weight is scaled by ``c^w`` with its bias unscaled has its
    input scaled by ``c^-w``: ``mlp_input`` divides the inputs of gate/up by ``c``, ``mlp_inner`` multiplies
    down's); ``k = c^-e``. Every ``k`` is 1 for a folder without the record (a model as it is)."""
    from common.io import read_json
    from common.models.rescale import PLANS, RECORD_FILE

    record_file = Path(model_dir) / RECORD_FILE
    if not record_file.is_file():
        return {name: 1.0 for name in names}
    record = read_json(record_file)
    exponents: dict[str, int] = {}
    for transform in record["transforms"]:
        for path, weight_exp, bias_exp in PLANS[transform]:
            if path.endswith("_proj") and bias_exp == 0:
                exponents[path] = exponents.get(path, 0) - weight_exp
    factor = float(record["factor"])
    scales = {}
    for name in names:
        path = re.sub(r"^model\.layers\.[0-9]+\.", "", name)
        scales[name] = factor ** -exponents.get(path, 0)
    return scales


def _own_scale_hook(spec: QuantSpec, k: float, module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Forward pre-hook: the first input quantized at the model's own scale, ``Q(k x) / k`` (``Q(x)`` for k = 1)."""
    from common.quantizers import quantize_tensor

    x = args[0]
    quantized = quantize_tensor(x, spec) if k == 1.0 else quantize_tensor(x * k, spec) / k
    return (quantized, *args[1:])


def model_cells(config: Mapping[str, Any], cells: Sequence[str], operands: str, model_dir: str | Path,
                split: str | Path, compute: Compute | None = None) -> list[dict[str, Any]]:
    """The evaluation record of every cell of one (model, operands) (module docstring; where ``compute`` says,
    :class:`common.compute.Compute`): the record of :func:`common.eval.evaluation_record` plus the cell's name,
    parts and operands; its ``quantization`` holds the recipe, the layers and, under ``wa``, each layer's
    ``activation_prescale`` (:func:`activation_prescale`)."""
    import time

    import torch
    from transformers import AutoTokenizer

    from common.compute import Compute
    from common.data import read_jsonl, token_stream
    from common.eval.record import describe_model, evaluation_record, file_summary
    from common.eval.sliding_window import perplexity
    from common.models import load_causal_lm
    from common.quantization import quantize_
    from common.select import select_linears

    study = config["model"]
    window, stride, max_tokens = study["window"], study["stride"], study["max_tokens"]
    if max_tokens is not None and max_tokens < window:
        raise ValueError(f"max_tokens {max_tokens} is shorter than the window {window}")
    lookup(OPERANDS, operands, "operands")
    start = time.perf_counter()
    model = (compute or Compute()).place(load_causal_lm(model_dir))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    docs = read_jsonl(split)
    stream = token_stream(tokenizer, docs)
    if max_tokens is not None:
        stream = stream[:max_tokens]
    names = select_linears(model, include=study["include"])
    prescale = activation_prescale(model_dir, names)
    modules = dict(model.named_modules())
    data = {"split": {**file_summary(split), "documents": len(docs), "tokens": stream.numel(),
                      "max_tokens": max_tokens}, "window": window, "stride": stride}
    described = describe_model(model, model_dir)
    records = []
    for cell in cells:
        recipe = cell_recipe(config, cell, operands)
        handle = quantize_(model, QuantRecipe(recipe.weights, None, recipe.name), names=names)
        hooks = [modules[name].register_forward_pre_hook(partial(_own_scale_hook, recipe.activations, prescale[name]))
                 for name in (names if recipe.activations is not None else ())]
        try:
            with torch.no_grad():
                ppl = perplexity(model, stream, window=window, stride=stride, batch_size=study["batch_size"])
        finally:
            for hook in hooks:
                hook.remove()
            handle.remove()
        quantization = {"recipe": recipe.to_dict(), "layers": list(handle.names),
                        **({"activation_prescale": prescale} if recipe.activations is not None else {})}
        record = evaluation_record(described, quantization, data, {"perplexity": ppl},
                                   wall_time_s=time.perf_counter() - start)
        start = time.perf_counter()
        records.append({"cell": cell, **parse_cell(cell), "operands": operands, **record})
    return records


def unquantized_cell(config: Mapping[str, Any], model_dir: str | Path, split: str | Path,
                     compute: Compute | None = None) -> dict[str, Any]:
    """The reference evaluation of ``model_dir`` (where ``compute`` says) and the weight sigma of every linear the
    sweep moves (config ``model.sigma_include``; None: ``model.include``), of the checkpoint's float32 weights."""
    from common.eval.fake_quant import fake_quant_perplexity
    from common.models import load_causal_lm
    from common.models.rescale import linear_sigmas

    study = config["model"]
    moved = study.get("sigma_include") or study["include"]
    sigmas = linear_sigmas(load_causal_lm(model_dir), moved)
    if not sigmas:
        raise ValueError(f"model.sigma_include {moved!r} matches no linear of {str(model_dir)!r}")
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
