"""Which block size and scale format for my model? Advice per linear weight, measured on the weights themselves and
set beside the analytic theory (``python -m common.analysis advise --model DIR``).

For every linear weight ``W`` of a causal LM (:func:`common.analysis.weights.linear_weights`: embeddings and
``lm_head`` excluded), with FP4 E2M1 elements and blocks along the input dimension (the last axis, as
``common.ptq`` quantizes weights):

* ``sigma = sqrt(mean((W - mean W)^2))`` and ``excess_kurtosis = mean((W - mean W)^4) / sigma^4 - 3`` (0 for
  Normal data; :func:`moments`, the definitions of :func:`common.analysis.weights.fit_sigma`);
* measured error per scale option of :data:`SCALE_OPTIONS` (UE4M3 abs-max, UE4M3 4/6, UE5M3 abs-max, NVFP4) and
  block size ``n``: ``mse = mean((W - Q(W))^2)`` in float64 with ``Q`` = :func:`common.scaling.quantize_blocks`
  (the option's :class:`~common.recipes.QuantSpec` at block ``n``), and ``relative_mse = mse / mean(W^2)``;
* predicted error, where the theory covers the option's rule (absmax and prevent_zero; four_over_six depends on
  every element of a block and is not tractable): ``common.theory.block_mse(sigma, n, "e2m1", scale, rule,
  global_scale=g)["total"]`` for N(0, sigma^2) data, ``g`` the per-tensor FP32 scale ``amax / (6 * 448)`` that
  quantize_blocks used (NVFP4; none otherwise). **Agreement rule**: the measurement agrees with the theory when
  ``|mse / predicted - 1| <= AGREEMENT_TOLERANCE`` (10%). The theory knows nothing of heavy tails, of rows whose
  length is not a multiple of ``n`` (the last block is zero-padded) or of weights that were already quantized, so
  disagreement is information about the tensor, not an error;
* inversion for each pair ``(n, 2n)`` of requested block sizes: measured, ``mse(n) > mse(2n)``; predicted,
  ``sigma / g < sigma*_1`` with ``sigma*_1 = common.theory.crossover(n, "e2m1", scale, rule)`` the largest sigma
  below which ``n`` has the higher expected MSE at ``g = 1`` (None: no crossover in (1e-6, 10), never predicted).
  The theory's MSE obeys ``MSE(sigma; g) = g^2 MSE(sigma / g; 1)``, so its crossover at a global scale ``g`` is
  ``g sigma*_1``: one crossover per (block pair, scale, rule) serves every tensor (:func:`unit_crossover`, cached).
  The per-tensor ``sigma_star`` reported is ``g sigma*_1`` (``sigma*_1`` without a global scale);
* the recommendation: the (scale option, block size) of least measured MSE; ties go to the larger block, then to
  the option listed first in :data:`SCALE_OPTIONS`; and its ``saving = 1 - mse / mse_baseline`` against the fixed
  baseline :data:`BASELINE`, UE4M3 abs-max at block 16 (measured even when 16 is not a requested size).

Per model, :func:`summarize` counts the tensors below ``sigma*`` and the measured inversions per (scale, block
pair), the recommendations per (scale, block size), the cells where measurement and theory agree, and the error
saved over the whole model, ``1 - sum(numel * mse_recommended) / sum(numel * mse_baseline)`` (total squared
error), with the median and range of the per-tensor savings. Undefined numbers (a tensor of constant values has
no relative error and no theory) are None, so the JSON is strict and round-trips exactly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from markupsafe import escape

from common.io import write_json, write_text
from common.progress import progress
from common.quantizers import quantize_tensor
from common.recipes import SPECS, QuantSpec
from common.theory import THEORY_RULES, block_mse, crossover

from .weights import linear_weights

AGREEMENT_TOLERANCE = 0.10  # measurement agrees with the theory when |mse / predicted - 1| <= this
DEFAULT_BLOCK_SIZES = (8, 16, 32)
# torch threads while quantizing: quantize_blocks works in cache-sized chunks (2^17 elements), too small for a
# fork/join per operation to pay; on a 2-core machine under load one thread quantized a 1536 x 576 weight in 55 ms,
# two threads in 0.8-1.2 s. Results do not depend on it: every sum over a tensor is numpy's (mean_square)
THREADS = 1


@dataclass(frozen=True)
class ScaleOption:
    """One scale choice the advice compares: ``key`` (JSON), ``label`` (reports) and its block ``spec`` (the block
    size is set per request, :meth:`at`)."""

    key: str
    label: str
    spec: QuantSpec

    def at(self, block_size: int) -> QuantSpec:
        """The spec with blocks of ``block_size`` along the last axis."""
        return dataclasses.replace(self.spec, block_size=block_size)

    @property
    def theory_rule(self) -> str | None:
        """The rule name :func:`common.theory.block_mse` models this option with, or None where it does not."""
        return theory_rule(self.spec)


SCALE_OPTIONS: tuple[ScaleOption, ...] = (
    ScaleOption("ue4m3_absmax", "UE4M3 abs-max", QuantSpec("e2m1", "ue4m3", 16, "absmax")),
    ScaleOption("ue4m3_4over6", "UE4M3 4/6", QuantSpec("e2m1", "ue4m3", 16, "four_over_six")),
    ScaleOption("ue5m3_absmax", "UE5M3 abs-max", QuantSpec("e2m1", "ue5m3", 16, "absmax")),
    ScaleOption("nvfp4", "NVFP4 (UE4M3, FP32 tensor scale)", SPECS["NVFP4"]),
)
BASELINE = ("ue4m3_absmax", 16)  # (scale option key, block size) every saving is measured against


def theory_rule(spec: QuantSpec) -> str | None:
    """``"absmax"`` or ``"prevent_zero"`` when the theory models ``spec`` (an absmax or prevent_zero rule with the
    prevent-zero flag, no rule options, no global scale or one per tensor at the default target), else None."""
    if spec.rule not in THEORY_RULES or spec.rule_options or spec.global_scale not in (None, "tensor") \
            or spec.global_target is not None:
        return None
    return "prevent_zero" if spec.prevent_zero or spec.rule == "prevent_zero" else "absmax"


@cache
def unit_crossover(block_size: int, elem: str, scale: str, rule: str) -> float | None:
    """``common.theory.crossover(block_size, elem, scale, rule)`` at ``g = 1``, cached: the sigma below which block
    ``n`` has a higher expected MSE than ``2n``; at a global scale ``g`` the crossover is ``g`` times this."""
    return crossover(block_size, elem, scale, rule)


def parse_block_sizes(text: str | Iterable[int]) -> tuple[int, ...]:
    """Block sizes from ``"8,16,32"`` (or a sequence of integers), ascending; ValueError naming a value that is not
    an integer >= 1, a repeated one, or an empty list."""
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else list(text)
    sizes = []
    for part in parts:
        if isinstance(part, str):
            if not (part.isascii() and part.isdigit()):
                raise ValueError(f"--block-sizes {text!r}: {part!r} is not an integer >= 1")
            part = int(part)
        if isinstance(part, bool) or not isinstance(part, int) or part < 1:
            raise ValueError(f"--block-sizes {text!r}: {part!r} is not an integer >= 1")
        if part in sizes:
            raise ValueError(f"--block-sizes {text!r}: {part} given more than once")
        sizes.append(part)
    if not sizes:
        raise ValueError(f"--block-sizes {text!r}: no block size given")
    return tuple(sorted(sizes))


def block_pairs(block_sizes: Sequence[int]) -> list[tuple[int, int]]:
    """The pairs ``(n, 2n)`` with both sizes in ``block_sizes``, ascending."""
    return [(n, 2 * n) for n in sorted(block_sizes) if 2 * n in block_sizes]


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def moments(w: torch.Tensor) -> dict[str, float | int | None]:
    """``numel``, ``mean``, ``sigma``, ``mean_square = mean(w^2)`` and ``excess_kurtosis`` of ``w``'s values in
    float64 (None when sigma is 0), computed as :func:`common.analysis.weights.fit_sigma` computes them, bit for bit,
    without its median absolute deviation (two medians: a quarter of the whole run on SmolLM2-135M)."""
    x = w.detach().double().flatten().cpu().numpy()
    mean = float(x.mean())
    centred = x - mean
    var = float(np.mean(centred**2))
    kurtosis = float(np.mean(centred**4)) / var**2 - 3.0 if var > 0 else None
    return {"numel": int(x.size), "mean": mean, "sigma": var**0.5, "mean_square": mean_square(w),
            "excess_kurtosis": kurtosis}


def mean_square(t: torch.Tensor) -> float:
    """``mean(t^2)`` in float64, summed by numpy (pairwise, the same bits whatever torch's thread count, which
    decides how torch splits a sum)."""
    values = t.detach().double().cpu().numpy().ravel()
    return float(np.mean(values * values))


def measure(w: torch.Tensor, spec: QuantSpec) -> dict[str, float | None]:
    """``{"mse", "zero_scale_fraction", "global_scale"}`` of ``quantize_blocks`` on ``w`` with ``spec``: ``mse =
    mean((w - Q(w))^2)`` (:func:`mean_square` of the float32 difference), the fraction of blocks flushed to zero by a
    zero scale, and the FP32 tensor scale ``g`` (None without one). ``w`` is float32 (bfloat16 widened exactly)."""
    x = w.detach().float()
    q, scales = quantize_tensor(x, spec, return_scales=True)
    return {"mse": mean_square(x - q),
            "zero_scale_fraction": float((scales.block == 0).double().mean()),
            "global_scale": None if scales.global_ is None else float(scales.global_.reshape(-1)[0])}


def recommend(cells: Sequence[Mapping[str, Any]], options: Sequence[ScaleOption]) -> Mapping[str, Any]:
    """The cell (``scale``, ``block_size``, ``mse``) of least ``mse``; ties to the larger block, then to the option
    listed first in ``options``."""
    order = {option.key: i for i, option in enumerate(options)}
    return min(cells, key=lambda c: (c["mse"], -c["block_size"], order[c["scale"]]))


def tensor_advice(name: str, w: torch.Tensor, block_sizes: Sequence[int],
                  options: Sequence[ScaleOption] = SCALE_OPTIONS, baseline: tuple[str, int] = BASELINE
                  ) -> dict[str, Any]:
    """The advice on one weight ``w`` (module docstring): ``name``, ``shape``, ``numel``, ``sigma``, ``mean``,
    ``mean_square``, ``excess_kurtosis``, ``cells`` (one per option and block size: measured ``mse``,
    ``relative_mse``, ``zero_scale_fraction``, ``global_scale``, and ``predicted_mse``, ``predicted_relative_mse``
    (``predicted / sigma^2``), ``ratio`` (``mse / predicted``), ``agrees``, all None where the theory does not
    apply), ``pairs`` (per option and ``(n, 2n)``: ``measured_inverts``, ``sigma_star``, ``predicted_inverts``),
    ``baseline_mse`` and ``recommendation`` (``scale``, ``block_size``, ``mse``, ``relative_mse``, ``saving``)."""
    stats = moments(w)
    sigma, square = stats["sigma"], stats["mean_square"]
    by_key = {option.key: option for option in options}
    cells, mse = [], {}
    for option in options:
        rule = option.theory_rule
        for n in block_sizes:
            measured = measure(w, option.at(n))
            predicted = None
            if rule is not None and sigma > 0:
                predicted = block_mse(sigma, n, option.spec.elem, option.spec.scale, rule,
                                      global_scale=measured["global_scale"])["total"]
            ratio = None if predicted is None else _ratio(measured["mse"], predicted)
            cells.append({"scale": option.key, "block_size": n, **measured,
                          "relative_mse": _ratio(measured["mse"], square),
                          "predicted_mse": predicted,
                          "predicted_relative_mse": None if predicted is None else predicted / sigma**2,
                          "ratio": ratio,
                          "agrees": None if ratio is None else abs(ratio - 1.0) <= AGREEMENT_TOLERANCE})
            mse[option.key, n] = measured
    pairs = []
    for option in options:
        rule = option.theory_rule
        for n, large in block_pairs(block_sizes):
            unit = None if rule is None else unit_crossover(n, option.spec.elem, option.spec.scale, rule)
            g = mse[option.key, n]["global_scale"] or 1.0
            sigma_star = None if unit is None else g * unit
            predicted = None if rule is None or sigma == 0 else unit is not None and sigma / g < unit
            pairs.append({"scale": option.key, "block_size": n, "larger": large,
                          "measured_inverts": mse[option.key, n]["mse"] > mse[option.key, large]["mse"],
                          "sigma_star": sigma_star, "predicted_inverts": predicted})
    base_key, base_n = baseline
    base = mse.get(baseline) or measure(w, by_key[base_key].at(base_n))
    best = recommend(cells, options)
    return {"name": name, "shape": list(w.shape), **stats, "cells": cells,
            "pairs": pairs, "baseline_mse": base["mse"],
            "recommendation": {"scale": best["scale"], "block_size": best["block_size"], "mse": best["mse"],
                               "relative_mse": best["relative_mse"],
                               "saving": None if base["mse"] == 0 else 1.0 - best["mse"] / base["mse"]}}


def summarize(tensors: Sequence[Mapping[str, Any]], options: Sequence[ScaleOption] = SCALE_OPTIONS
              ) -> dict[str, Any]:
    """The model's summary (module docstring): ``tensors``, ``parameters``, ``pairs`` (per option and block pair:
    ``below_sigma_star``, ``measured_inversions``, ``both``, ``covered``), ``recommendations`` (per option and
    block size chosen at least once: ``tensors``, ``parameters``), ``agreement`` (``cells`` the theory covers,
    ``agree``) and ``saving`` (``total``, ``median``, ``min``, ``max``)."""
    pairs: dict[tuple[str, int, int], dict[str, Any]] = {}
    for tensor in tensors:
        for p in tensor["pairs"]:
            row = pairs.setdefault((p["scale"], p["block_size"], p["larger"]), {
                "scale": p["scale"], "block_size": p["block_size"], "larger": p["larger"], "covered": 0,
                "below_sigma_star": 0, "measured_inversions": 0, "both": 0})
            row["measured_inversions"] += p["measured_inverts"]
            if p["predicted_inverts"] is not None:
                row["covered"] += 1
                row["below_sigma_star"] += p["predicted_inverts"]
                row["both"] += p["predicted_inverts"] and p["measured_inverts"]
    order = {option.key: i for i, option in enumerate(options)}
    chosen: dict[tuple[str, int], dict[str, Any]] = {}
    for tensor in tensors:
        r = tensor["recommendation"]
        row = chosen.setdefault((r["scale"], r["block_size"]), {"scale": r["scale"], "block_size": r["block_size"],
                                                                 "tensors": 0, "parameters": 0})
        row["tensors"] += 1
        row["parameters"] += tensor["numel"]
    verdicts = [c["agrees"] for t in tensors for c in t["cells"] if c["agrees"] is not None]
    savings = [t["recommendation"]["saving"] for t in tensors if t["recommendation"]["saving"] is not None]
    base_error = sum(t["numel"] * t["baseline_mse"] for t in tensors)
    best_error = sum(t["numel"] * t["recommendation"]["mse"] for t in tensors)
    return {"tensors": len(tensors), "parameters": sum(t["numel"] for t in tensors),
            "pairs": sorted(pairs.values(), key=lambda r: (order[r["scale"]], r["block_size"])),
            "recommendations": sorted(chosen.values(), key=lambda r: (order[r["scale"]], r["block_size"])),
            "agreement": {"cells": len(verdicts), "agree": sum(verdicts)},
            "saving": {"total": 1.0 - best_error / base_error if base_error > 0 else None,
                       "median": statistics.median(savings) if savings else None,
                       "min": min(savings, default=None), "max": max(savings, default=None)}}


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """``torch.set_num_threads(threads)`` inside the block, the previous setting restored after it (None: left as
    it is)."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def advise_weights(weights: Mapping[str, torch.Tensor], block_sizes: Iterable[int] = DEFAULT_BLOCK_SIZES, *,
                   model: str = "", options: Sequence[ScaleOption] = SCALE_OPTIONS,
                   baseline: tuple[str, int] = BASELINE, threads: int | None = THREADS) -> dict[str, Any]:
    """The advice on ``weights`` (name -> 2-D weight): ``model`` (a label), ``block_sizes``, ``elem``, ``scales``
    (each option's ``key``, ``label``, ``spec`` without its block size, and ``theory_rule``), ``baseline``,
    ``agreement_tolerance``, ``crossovers`` (``sigma_star`` at ``g = 1`` per option with a theory rule and block
    pair), ``tensors`` (:func:`tensor_advice`, in ``weights``' order) and ``summary`` (:func:`summarize`).
    ``threads``: torch threads while quantizing (:data:`THREADS`; None keeps torch's setting).

    ValueError for bad block sizes (:func:`parse_block_sizes`), an unknown baseline option, or no weights."""
    sizes = parse_block_sizes(block_sizes)
    if baseline[0] not in {option.key for option in options}:
        raise ValueError(f"baseline scale {baseline[0]!r} is not one of the options "
                         f"{', '.join(option.key for option in options)}")
    if not weights:
        raise ValueError(f"model {model!r} has no linear weights to advise on")
    crossovers = [{"scale": option.key, "block_size": n, "larger": large,
                   "sigma_star": unit_crossover(n, option.spec.elem, option.spec.scale, option.theory_rule)}
                  for option in options if option.theory_rule is not None for n, large in block_pairs(sizes)]
    with torch_threads(threads):
        tensors = [tensor_advice(name, w, sizes, options, baseline)
                   for name, w in progress(weights.items(), "advise", total=len(weights), unit="tensor")]
    return {"model": model, "block_sizes": list(sizes), "elem": options[0].spec.elem,
            "scales": [{"key": o.key, "label": o.label,
                        "spec": {k: v for k, v in o.spec.to_dict().items() if k != "block_size"},
                        "theory_rule": o.theory_rule} for o in options],
            "baseline": {"scale": baseline[0], "block_size": baseline[1]},
            "agreement_tolerance": AGREEMENT_TOLERANCE, "crossovers": crossovers, "tensors": tensors,
            "summary": summarize(tensors, options)}


def advise(model_dir: str | os.PathLike[str], block_sizes: Iterable[int] = DEFAULT_BLOCK_SIZES, **kwargs: Any
           ) -> dict[str, Any]:
    """:func:`advise_weights` on every linear weight of the Hugging Face causal LM folder ``model_dir``
    (:func:`common.models.load_causal_lm`, float32, local files only); ValueError naming a folder that does not
    exist or has no ``config.json``, before anything is loaded."""
    from common.models import load_causal_lm

    folder = Path(model_dir)
    if not folder.is_dir():
        raise ValueError(f"--model {str(model_dir)!r} is not a folder")
    if not (folder / "config.json").is_file():
        raise ValueError(f"--model {str(model_dir)!r} is not a Hugging Face checkpoint folder (no config.json)")
    sizes = parse_block_sizes(block_sizes)
    return advise_weights(linear_weights(load_causal_lm(folder)), sizes, model=str(model_dir), **kwargs)


# ---------------------------------------------------------------------------------------------------- rendering
@dataclass(frozen=True)
class Section:
    """A part of the rendered advice: a heading, paragraphs of plain text and an optional table of text cells."""

    title: str
    paragraphs: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else "yes" if value else "no"


def sections(advice: Mapping[str, Any]) -> list[Section]:
    """The advice as :class:`Section` s, the common content of the Markdown and HTML renderings."""
    labels = {s["key"]: s["label"] for s in advice["scales"]}
    base = advice["baseline"]
    baseline_text = f"{labels[base['scale']]} at block {base['block_size']}"
    summary = advice["summary"]
    saving = summary["saving"]
    agreement = summary["agreement"]
    intro = Section(f"Block-size and scale advice: {advice['model']}", (
        f"{summary['tensors']} linear weights ({summary['parameters']} parameters), {advice['elem'].upper()} "
        f"elements, blocks of {', '.join(map(str, advice['block_sizes']))} along the input dimension.",
        "Relative MSE = MSE / mean square of the tensor. Theory: common.theory.block_mse for N(0, sigma^2) data "
        f"(abs-max rules; NVFP4 with its tensor scale g); agreement = |measured / predicted - 1| <= "
        f"{100 * advice['agreement_tolerance']:g}%. Inversion: MSE(n) > MSE(2n); predicted when sigma < sigma* "
        "(the theory's crossover, g sigma*_1 with a tensor scale).",
        "Recommendation: the least measured MSE over every scale and block size; ties go to the larger block. "
        f"Savings are 1 - MSE / MSE of the baseline, {baseline_text}."))
    totals = Section("Summary", (
        f"Error saved over the baseline ({baseline_text}), total squared error of the model: "
        f"{_percent(saving['total'])}; per tensor: median {_percent(saving['median'])}, range "
        f"{_percent(saving['min'])} to {_percent(saving['max'])}.",
        f"Theory and measurement agree in {agreement['agree']} of {agreement['cells']} cells the theory covers."),
        ("recommended scale", "block size", "tensors", "parameters"),
        tuple((labels[r["scale"]], str(r["block_size"]), str(r["tensors"]), str(r["parameters"]))
              for r in summary["recommendations"]))
    stars = {(c["scale"], c["block_size"]): c["sigma_star"] for c in advice["crossovers"]}
    inversions = Section("Inversions per block pair", (
        "sigma*_1: the theory's crossover at g = 1 (sigma itself without a tensor scale, sigma / g with one); "
        "tensors below sigma* are those the theory expects to invert.",),
        ("scale", "pair", "sigma*_1", "below sigma*", "measured inversions", "both"),
        tuple((labels[p["scale"]], f"{p['block_size']} vs {p['larger']}",
               _number(stars.get((p["scale"], p["block_size"]))),
               f"{p['below_sigma_star']} of {p['covered']}" if p["covered"] else "—",
               str(p["measured_inversions"]), str(p["both"]) if p["covered"] else "—")
              for p in summary["pairs"]))
    per_tensor = Section("Tensors", (
        "Inversions: measured / predicted, per scale and block pair (— where the theory does not apply).",),
        ("tensor", "shape", "sigma", "excess kurtosis", "recommended", "relative MSE", "saving", "inversions"),
        tuple((t["name"], "x".join(map(str, t["shape"])), _number(t["sigma"]), _number(t["excess_kurtosis"]),
               f"{labels[t['recommendation']['scale']]}, {t['recommendation']['block_size']}",
               _number(t["recommendation"]["relative_mse"]), _percent(t["recommendation"]["saving"]),
               "; ".join(f"{labels[p['scale']]} {p['block_size']}/{p['larger']}: {_yes_no(p['measured_inverts'])}"
                         f" / {_yes_no(p['predicted_inverts'])}" for p in t["pairs"]
                         if p["measured_inverts"] or p["predicted_inverts"]) or "none")
              for t in advice["tensors"]))
    columns = [(s["key"], n) for s in advice["scales"] for n in advice["block_sizes"]]
    mse_table = Section("Relative MSE per scale and block size", (
        "Measured relative MSE, and in brackets measured / predicted MSE where the theory applies.",),
        ("tensor", *(f"{labels[key]}, {n}" for key, n in columns)),
        tuple((t["name"], *(_cell_text(c) for c in t["cells"])) for t in advice["tensors"]))
    return [intro, totals, inversions, per_tensor, mse_table]


def _cell_text(cell: Mapping[str, Any]) -> str:
    text = _number(cell["relative_mse"])
    return text if cell["ratio"] is None else f"{text} ({cell['ratio']:.3f})"


def render_markdown(advice: Mapping[str, Any]) -> str:
    """The advice as Markdown: the first section a level-1 heading, the others level 2, tables in pipe syntax."""
    lines: list[str] = []
    for i, section in enumerate(sections(advice)):
        lines += [f"{'#' if i == 0 else '##'} {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        if section.columns:
            lines.append(_markdown_row(section.columns))
            lines.append(_markdown_row(["---"] * len(section.columns)))
            lines += [_markdown_row(row) for row in section.rows]
            lines.append("")
    return "\n".join(lines)


def _markdown_row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


HTML_STYLE = """body { font-family: system-ui, sans-serif; max-width: 80rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
h1 { font-size: 1.5rem; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 1rem 0; font-size: .85rem; }
th, td { border: 1px solid #bbb; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } .wide { overflow-x: auto; }"""


def render_html(advice: Mapping[str, Any]) -> str:
    """The advice as one self-contained HTML page (inline style, no script, no network address), the
    conventions of :mod:`common.report.render`; every text is HTML-escaped."""
    content = sections(advice)
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>{escape(content[0].title)}</title>", f"<style>\n{HTML_STYLE}\n</style>", "</head>",
             "<body>"]
    for i, section in enumerate(content):
        tag = "h1" if i == 0 else "h2"
        parts.append(f"<{tag}>{escape(section.title)}</{tag}>")
        parts += [f"<p>{escape(paragraph)}</p>" for paragraph in section.paragraphs]
        if section.columns:
            parts.append('<div class="wide"><table>')
            parts.append("<tr>" + "".join(f"<th>{escape(c)}</th>" for c in section.columns) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in section.rows]
            parts.append("</table></div>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)


WRITERS: dict[str, Callable[[str | os.PathLike[str], Mapping[str, Any]], None]] = {
    ".md": lambda out, advice: write_text(out, render_markdown(advice)),
    ".json": write_json,
    ".html": lambda out, advice: write_text(out, render_html(advice)),
}


def check_output(out: str | os.PathLike[str]) -> str:
    """The suffix of ``out`` (.md, .json or .html); ValueError naming ``out`` otherwise."""
    suffix = Path(out).suffix.lower()
    if suffix not in WRITERS:
        raise ValueError(f"--out {str(out)!r}: unknown extension {suffix or '(none)'!r}; valid: "
                         f"{', '.join(WRITERS)}")
    return suffix


def write_advice(advice: Mapping[str, Any], out: str | os.PathLike[str]) -> None:
    """Write ``advice`` atomically (:mod:`common.io`) as Markdown, JSON (every number) or HTML, by ``out``'s
    extension (:func:`check_output`)."""
    WRITERS[check_output(out)](out, advice)
