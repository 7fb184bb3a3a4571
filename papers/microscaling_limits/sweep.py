"""The function-preserving sweep: one trained network meeting every regime of the theory.

The paper compares real 8B models whose weights happen to be narrow (Granite-3.3-8b) or wide (Llama-2-7b). We
move one model instead: the workflow's sweep (``sweep`` in ``workflow/config/default.yaml``,
:mod:`common.models.rescale`) rescales the base model by factors ``c`` with transforms that keep its function
exactly (``mlp_input``: ``post_attention_layernorm`` gain / c, ``gate_proj`` and ``up_proj`` weights x c;
``attn_input``: ``input_layernorm`` gain / c, ``q_proj``, ``k_proj``, ``v_proj`` x c), so the weight sigma of
those *moved* linears is ``c`` times the trained one while ``down_proj`` and ``o_proj`` stay. A sweep point is
the model ``<base>-c<c:g>`` (e.g. ``small-c0.1``); its cells quantize the moved linears (:func:`moved_include`).

* Pre-registration (:func:`preregister`, from the configuration alone, before any model exists): the theory's
  crossover ``sigma*(n)`` of the claims' block pair ``n`` vs ``2n`` (:func:`common.theory.crossover`, Normal
  data, abs-max scales) for UE4M3 and UE5M3, and the share of each MSE part in ``MSE(n) - MSE(2n)`` just below
  it (``sigma* / 1.2``, :func:`.curves.drivers`), under our exact model and under the paper's (``_paper`` keys).
* A point's sigma (:func:`sweep_points`): the median fitted sigma of its moved weight tensors (its tensor study).
* Sweep steps (:func:`grid_position`): with the points' sigmas ``s_0 > s_1 > ... > s_{K-1}``, point ``k`` sits at
  position ``k`` and a sigma between ``s_i`` and ``s_{i+1}`` at ``i + log(s_i / sigma) / log(s_i / s_{i+1})``
  (log-linear; beyond either end the end step continues). ``grid_position(sigma*) - k`` is then
  ``log(s_k / sigma*)`` in sweep steps: positive when point ``k`` is wider than ``sigma*``.
* Windows (:class:`Windows`): every perplexity cell scores the same windows of the same split, the units of the
  paired bootstrap (:meth:`common.uncertainty.Evidence.paired`, the workflow's ``evidence`` settings) that
  resamples them once for every cell; a cell's columns are its record's window columns
  (:func:`common.eval.scores.window_columns`: per-window NLL sums and token counts), ``log(ppl(a) / ppl(b))``
  the difference of their token-weighted mean NLLs (:func:`common.uncertainty.log_perplexity`).
* Zero-shot cells: the cloze accuracy and the choice length-normalised accuracy (:data:`TASK_ACCURACY`), each
  the mean of its per-example correctness.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from common.eval.scores import TASK_ACCURACY, window_columns
from common.models.rescale import PLANS, check_transforms
from common.theory import crossover
from common.uncertainty import Estimate, Evidence, log_perplexity, perplexity

from .curves import drivers
from .settings import KEY, VARIANTS

RULE = "absmax"
SCALES = ("ue4m3", "ue5m3")  # the block-scale formats the sweep's predictions name
MODEL_KEYS = {"exact": "", "paper": "_paper"}  # the pre-registration's keys per MSE model: crossover, crossover_paper
WEIGHTS_SUFFIX = "-weights"  # cell name suffix: weights only (no activation quantization)
ZERO_SHOT_VARIANTS = ("ue4m3s", "ue5m3")  # the zero-shot comparison: UE5M3 vs UE4M3 with a per-tensor scale
STUDY_FIELDS = ("window", "stride", "batch_size")  # what a sweep cell takes from the paper config's `model`
# the accuracy each zero-shot task compares (cloze: accuracy; choice: length-normalised accuracy)


def moved_include(transforms: Sequence[str]) -> str:
    """The regex (``re.search`` on ``model.layers.<i>.<path>``) of the linears the workflow's ``transforms``
    move: every projection of :data:`common.models.rescale.PLANS` whose weight the transforms scale by ``c``.
    ValueError naming a projection they scale by another power of ``c`` (``mlp_inner`` with ``mlp_input`` scales
    ``up_proj`` by ``c^2``, ``attn_value`` scales ``o_proj`` by ``1/c``): the sweep's claims need every linear
    either moved by ``c`` or left alone."""
    exponents: dict[str, int] = {}
    for name in check_transforms(transforms):
        for path, weight_exponent, _ in PLANS[name]:
            if path.endswith("_proj"):
                exponents[path] = exponents.get(path, 0) + weight_exponent
    other = {path: e for path, e in exponents.items() if e not in (0, 1)}
    if other:
        raise ValueError(f"sweep.transforms {list(transforms)} scale {other} (path: power of c); the sweep's claims "
                         "need each moved linear's weights times c exactly")
    moved = sorted(path for path, e in exponents.items() if e == 1)
    return "(" + "|".join(path.replace(".", r"\.") for path in moved) + ")$"


def sweep_model(base: str, factor: float) -> str:
    """The sweep point's model name ``<base>-c<factor:g>`` (``workflow/rules/common.smk``: ``model_dir``)."""
    return f"{base}-c{factor:g}"


def cell_name(element: str, variant: str, block_size: int, weights_only: bool) -> str:
    """``<element>-<variant>-b<n>`` (weights and activations) or ``...-weights`` (weights only)."""
    return f"{element}-{variant}-b{block_size}{WEIGHTS_SUFFIX if weights_only else ''}"


def sweep_plan(paper: Mapping[str, Any], workflow: Mapping[str, Any]) -> dict[str, Any]:
    """What the sweep's rules build, from the paper config ``paper`` (profile merged) and the workflow config
    ``workflow`` (``CFG``): ``include`` (the moved linears), ``block_size`` ``n`` and ``pair`` ``[n, 2n]``; the
    ``points`` (``{"model", "factor"}``, widest first: every factor of the workflow's ``sweep.factors``, or
    ``sweep.points`` of them spread evenly over their order, the widest and the narrowest included); the
    perplexity ``cells`` of each point (``unquantized``; weights only: every variant at ``n``, ``2n`` and
    ``figure_blocks``; weights and activations: every variant at ``n``); the ``zero_shot`` cells (weights only,
    UE4M3-S and UE5M3 at ``n``) of the ``zero_shot_points`` narrowest points; the tensor studies' ``scales``
    (:data:`SCALES`) and ``tensor_blocks`` ``[n, 2n]``; ``model``, the cells' evaluation settings (window,
    stride and batch size of the paper config's ``model``, the moved linears, ``sweep.max_tokens``). ValueError
    naming fewer than 2 factors or points, more points than factors, or a zero-shot count beyond the points."""
    sweep = paper["sweep"]
    grid = sorted({float(f) for f in workflow["sweep"]["factors"]}, reverse=True)
    if len(grid) < 2:
        raise ValueError(f"the workflow's sweep.factors {workflow['sweep']['factors']} need at least 2 distinct "
                         "factors")
    count = len(grid) if sweep["points"] is None else sweep["points"]
    if not 2 <= count <= len(grid):
        raise ValueError(f"{KEY}.sweep.points {sweep['points']} is not between 2 and the {len(grid)} factors of the "
                         f"workflow's sweep.factors {grid}")
    factors = [grid[i] for i in sorted({round(k * (len(grid) - 1) / (count - 1)) for k in range(count)})]
    if not 1 <= sweep["zero_shot_points"] <= len(factors):
        raise ValueError(f"{KEY}.sweep.zero_shot_points {sweep['zero_shot_points']} is not between 1 and the "
                         f"{len(factors)} sweep points")
    n, element = sweep["block_size"], paper["element"]
    blocks = sorted({n, 2 * n, *sweep["figure_blocks"]})
    cells = ["unquantized", *(cell_name(element, v, b, True) for v in VARIANTS for b in blocks),
             *(cell_name(element, v, n, False) for v in VARIANTS)]
    points = [{"model": sweep_model(sweep.get("model") or workflow["base_model"], f), "factor": f} for f in factors]
    narrow = [p["model"] for p in points[-sweep["zero_shot_points"]:]]
    include = moved_include(workflow["sweep"]["transforms"])
    return {"include": include, "scales": list(SCALES), "block_size": n, "pair": [n, 2 * n], "points": points,
            "cells": {p["model"]: cells for p in points},
            "model": {**{k: paper["model"][k] for k in STUDY_FIELDS}, "include": include,
                      "max_tokens": sweep["max_tokens"]},
            "zero_shot": {m: [cell_name(element, v, n, True) for v in ZERO_SHOT_VARIANTS] for m in narrow},
            "tensor_blocks": [n, 2 * n]}


def preregister(paper: Mapping[str, Any]) -> dict[str, Any]:
    """The theory's prediction for the sweep from the paper config alone: per scale format of :data:`SCALES`
    the crossover ``sigma*`` of block ``n`` vs ``2n`` (None: none in ``[1e-6, 10]``) and its drivers, under our
    exact model (``crossover``, ``drivers``) and under the authors' (``crossover_paper``, ``drivers_paper``:
    :func:`common.theory.block_mse` with ``model="paper"``)."""
    n, element = paper["sweep"]["block_size"], paper["element"]
    models = {}
    for model, suffix in MODEL_KEYS.items():
        crossovers = {scale: crossover(n, element, scale, RULE, model=model) for scale in SCALES}
        models[f"crossover{suffix}"] = crossovers
        models[f"drivers{suffix}"] = {s: None if c is None else drivers(element, s, RULE, n, c, model)
                                      for s, c in crossovers.items()}
    return {"element": element, "rule": RULE, "block_size": n, "pair": [n, 2 * n], "distribution": "normal",
            **models,
            "prediction": f"with {SCALES[0].upper()} block scales, block {n} is worse than block {2 * n} for weights "
                          f"narrower than sigma*: the inversion starts at the first sweep point below it",
            "inputs": "the configuration only (no model, no data)"}


def sweep_points(points: Sequence[Mapping[str, Any]], tensor_cells: Iterable[Mapping[str, Any]]
                 ) -> list[dict[str, Any]]:
    """Each point ``{"model", "factor"}`` with ``sigma`` (the median fitted sigma of its moved weight tensors),
    ``sigma_low``, ``sigma_high`` (their range) and ``tensors`` (their count), widest first. ValueError naming a
    point without a tensor study or two points of the same sigma."""
    stds: dict[str, list[float]] = {}
    for cell in tensor_cells:
        stds[cell["model"]] = sorted({t["name"]: t["std"] for t in cell["tensors"]}.values())
    out = []
    for point in points:
        if not stds.get(point["model"]):
            raise ValueError(f"sweep point {point['model']!r} has no tensor study (got {sorted(stds)})")
        values = stds[point["model"]]
        out.append({"model": point["model"], "factor": float(point["factor"]), "sigma": statistics.median(values),
                    "sigma_low": values[0], "sigma_high": values[-1], "tensors": len(values)})
    out.sort(key=lambda p: -p["sigma"])
    sigmas = [p["sigma"] for p in out]
    if len(set(sigmas)) != len(sigmas):
        raise ValueError(f"sweep points share a sigma: {[(p['model'], p['sigma']) for p in out]}")
    return out


def grid_position(sigmas: Sequence[float], sigma: float) -> float:
    """Where ``sigma`` sits on the grid ``sigmas`` (strictly decreasing, at least 2), in sweep steps (module
    docstring); ValueError naming a grid that is not strictly decreasing and positive."""
    s = [float(v) for v in sigmas]
    if len(s) < 2 or any(not a > b > 0 for a, b in pairwise(s)) or not sigma > 0:
        raise ValueError(f"grid_position needs >= 2 strictly decreasing positive sigmas and sigma > 0, got {s}, "
                         f"{sigma}")
    i = next((k for k in range(len(s) - 1) if sigma >= s[k + 1]), len(s) - 2)
    return i + math.log(s[i] / sigma) / math.log(s[i] / s[i + 1])


@dataclass(frozen=True)
class Windows:
    """The bootstrap columns of perplexity cells (``<model>/<cell>.nll`` and ``.tokens``: per-window NLL sums and
    token counts), keyed ``(model, cell)``, all over the same windows (:func:`windows`), and the artifact each was
    read from (``paths``, where known)."""

    cells: Mapping[tuple[str, str], Mapping[str, np.ndarray]]
    paths: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def sources(self, keys: Iterable[tuple[str, str]]) -> list[str]:
        """The artifacts of ``keys`` (once each, in order; cells without a known path are skipped)."""
        return [self.paths[k] for k in dict.fromkeys(keys) if k in self.paths]

    def columns(self, keys: Iterable[tuple[str, str]]) -> dict[str, np.ndarray]:
        """Bootstrap columns ``<model>/<cell>.nll`` and ``.tokens`` of ``keys`` (KeyError naming a missing cell)."""
        out: dict[str, np.ndarray] = {}
        for key in keys:
            if key not in self.cells:
                raise KeyError(f"no perplexity cell {key[1]!r} of sweep point {key[0]!r}")
            out |= self.cells[key]
        return out

    def perplexity(self, key: tuple[str, str]) -> float:
        """The perplexity of cell ``key`` over every window, ``exp(sum_j nll_j / sum_j tokens_j)``."""
        sums = {name: np.asarray(values.sum()) for name, values in self.columns([key]).items()}
        return float(perplexity(sums, column(*key)))


def column(model: str, cell: str) -> str:
    """The bootstrap column prefix of a cell."""
    return f"{model}/{cell}"


def windows(records: Iterable[Mapping[str, Any]], paths: Sequence[str] | None = None) -> Windows:
    """:class:`Windows` of perplexity cells (each with ``name``, the model's name, ``cell`` and its window columns,
    :func:`common.eval.scores.window_columns`) read from ``paths`` (one per record, when given); ValueError naming
    a record without per-window scores, one whose windows differ from the first one's, or a repeat."""
    cells: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    sources: dict[tuple[str, str], str] = {}
    reference = None
    records = list(records)
    if paths is not None and len(paths) != len(records):
        raise ValueError(f"{len(paths)} paths for {len(records)} perplexity cells")
    for i, record in enumerate(records):
        key = (record["name"], record["cell"])
        if key in cells:
            raise ValueError(f"perplexity cell {key[1]!r} of {key[0]!r} given twice")
        columns = window_columns(column(*key), record)
        tokens = columns[f"{column(*key)}.tokens"]
        if reference is None:
            reference = (key, tokens)
        elif not np.array_equal(tokens, reference[1]):
            raise ValueError(f"cell {key[1]!r} of {key[0]!r} scores other windows ({tokens.size} windows, "
                             f"{int(tokens.sum())} tokens) than {reference[0][1]!r} of {reference[0][0]!r} "
                             f"({reference[1].size}, {int(reference[1].sum())}): the bootstrap pairs windows")
        cells[key] = columns
        if paths is not None:
            sources[key] = str(paths[i])
    return Windows(cells, sources)


def log_ratio(sums: Mapping[str, np.ndarray], numerator: tuple[str, str], denominator: tuple[str, str]
              ) -> np.ndarray:
    """``log(ppl(numerator) / ppl(denominator))`` from bootstrap sums: the difference of the token-weighted mean
    NLLs, ``S_nll(a) / S_tokens(a) - S_nll(b) / S_tokens(b)``."""
    return log_perplexity(sums, column(*numerator)) - log_perplexity(sums, column(*denominator))


def ratio_estimate(data: Windows, numerator: tuple[str, str], denominator: tuple[str, str],
                   evidence: Evidence) -> Estimate:
    """``ppl(numerator) / ppl(denominator) - 1`` with its paired bootstrap interval over windows."""
    return evidence.paired(data.columns([numerator, denominator]),
                           lambda s: np.expm1(log_ratio(s, numerator, denominator)), "windows")


def sweep_summary(element: str, points: Sequence[Mapping[str, Any]], preregistered: Mapping[str, Any],
                  tensor_cells: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]],
                  zero_shot: Sequence[Mapping[str, Any]], evidence: Evidence) -> dict[str, Any]:
    """The sweep's table and figure data: the ``points`` (:func:`sweep_points`), the pre-registered crossovers
    (``crossover``, and ``crossover_paper`` when pre-registered: the authors' model) and their ``position`` (and
    ``position_paper``) on the grid, per perplexity cell its perplexity and relative gap
    ``ppl / ppl(unquantized) - 1``, per point and variant the weights-only ``ppl(n) / ppl(2n) - 1`` with its
    bootstrap interval (``ratios``, ``evidence``'s settings), and per zero-shot cell its accuracy per task
    (:data:`TASK_ACCURACY`: cloze accuracy, choice length-normalised accuracy)."""
    located = sweep_points(points, tensor_cells)
    data = windows(records)
    n, m = preregistered["pair"]
    reference = {p["model"]: data.perplexity((p["model"], "unquantized")) for p in located}
    where = {p["model"]: p for p in located}
    cells = [{"model": r["name"], "factor": where[r["name"]]["factor"], "sigma": where[r["name"]]["sigma"],
              "cell": r["cell"], "variant": r["variant"], "block_size": r["block_size"],
              "activations": r["activations"], "perplexity": r["metrics"]["perplexity"]["perplexity"],
              "gap": r["metrics"]["perplexity"]["perplexity"] / reference[r["name"]] - 1}
             for r in records if r["cell"] != "unquantized"]
    ratios = []
    for p in located:
        for variant in VARIANTS:
            small = (p["model"], cell_name(element, variant, n, True))
            large = (p["model"], cell_name(element, variant, m, True))
            if small in data.cells and large in data.cells:
                ratios.append({"model": p["model"], "factor": p["factor"], "sigma": p["sigma"], "variant": variant,
                               **ratio_estimate(data, small, large, evidence).to_dict()})
    sigmas = [p["sigma"] for p in located]
    stars = {x: dict(preregistered[f"crossover{x}"]) for x in MODEL_KEYS.values() if f"crossover{x}" in preregistered}
    return {"element": element, "pair": [n, m], "points": located,
            **{f"crossover{x}": star for x, star in stars.items()},
            **{f"position{x}": {s: None if c is None else grid_position(sigmas, c) for s, c in star.items()}
               for x, star in stars.items()},
            "unquantized": reference,
            "cells": cells, "ratios": ratios,
            "zero_shot": [{"model": r["name"], "cell": r["cell"], "variant": r["variant"],
                           "block_size": r["block_size"], "examples": r["metrics"]["cloze"]["examples"],
                           **{task: r["metrics"][task][fields.metric] for task, fields in TASK_ACCURACY.items()}}
                          for r in zero_shot],
            "wall_time_s": float(sum(r["wall_time_s"] for r in [*records, *zero_shot, *tensor_cells]))}
