"""The two analytic models of the block MSE against simulation, on the authors' grid.

* Models: the authors' (:mod:`common.theory.paper_model`, :func:`common.theory.block_mse` with
  ``model="paper"``: the non-max elements Normal truncated at +-6s, s the quantized scale) and ours
  (``model="exact"``: conditioned on the block max), both for Normal data with abs-max scales.
* Grid: the authors' sigmas, 1e-4 and ``linspace(1e-3, 0.05, 50)`` (:func:`common.theory.paper_sigmas`), at the
  block sizes of ``paper_model.block_sizes`` (theirs: 2-256) and the scales of ``paper_model.scales`` (their
  script: UE4M3).
* Simulation cells (``results/microscaling_limits/paper_model/simulation/<element>-<scale>-b<n>-absmax.json``):
  :func:`.curves.simulate` at every sigma of that grid (``paper_model.samples`` values, seed ``paper_model.seed``).
* Comparison (:func:`compare`, ``paper_model/comparison.json``): per point each model's total, the simulated MSE
  and its relative standard error, ``error = model / simulation - 1`` and ``z = |model - simulation| / standard
  error`` per model; per scale and model the worst ``|error|`` (where: sigma, n) and the mean ``|error|`` over the
  points the simulation resolves (relative standard error <= :data:`.curves.RESOLVED_SE`); per block pair
  ``n, 2n`` of the grid the crossover under each model (:func:`common.theory.crossover`) and in the simulation.
* Simulated crossover: ``d = MSE(n) - MSE(2n)`` on the grid scanned from the widest sigma down, as
  :func:`common.theory.crossover` scans the theory: the first step from ``d < 0`` to ``d > 0`` brackets it and
  linear interpolation of ``d`` between the two sigmas places it (None: no such step).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from common.theory import MODELS, block_mse, crossover, paper_sigmas

from .curves import RESOLVED_SE, simulate

RULE = "absmax"  # the authors' model has abs-max scales only


def simulation_cell(config: Mapping[str, Any], scale: str, block_size: int) -> dict[str, Any]:
    """Monte Carlo MSE of Normal data at one (scale, block size) at every sigma of the authors' grid."""
    part = config["paper_model"]
    return simulate(config["element"], scale, block_size, RULE, paper_sigmas(), part["samples"], part["seed"])


def _point(element: str, scale: str, n: int, row: Mapping[str, Any]) -> dict[str, Any]:
    se = row["mse_standard_error"]
    point = {"scale": scale, "block_size": n, "sigma": row["sigma"], "simulation": row["mse"],
             "relative_se": se / row["mse"], "resolved": se / row["mse"] <= RESOLVED_SE}
    for model in MODELS:
        total = block_mse(row["sigma"], n, element, scale, RULE, model=model)["total"]
        point |= {model: total, f"{model}_error": total / row["mse"] - 1,
                  f"{model}_z": abs(total - row["mse"]) / se if se > 0 else 0.0}
    return point


def fit(points: Sequence[Mapping[str, Any]], model: str) -> dict[str, Any]:
    """``model``'s fit over ``points`` of one scale: the worst ``|error|`` over the resolved points with its sigma,
    block size, signed error and relative standard error, the mean ``|error|`` over them, the counts, and
    ``chi2 = mean((model - simulation)^2 / sigma^4)`` over every point (:mod:`.curves`' definition, in MSE/sigma^2;
    the paper's chi^2 ~ 4e-8 is tested as Pearson's over absolute MSE per block size: :func:`.claims.pearson_chi2`)."""
    resolved = [p for p in points if p["resolved"]]
    out = {"points": len(points), "resolved_points": len(resolved), "worst": None, "mean": None,
           "chi2": float(np.mean([(p[model] - p["simulation"]) ** 2 / p["sigma"] ** 4 for p in points]))}
    if resolved:
        worst = max(resolved, key=lambda p: abs(p[f"{model}_error"]))
        out |= {"worst": abs(worst[f"{model}_error"]), "worst_signed": worst[f"{model}_error"],
                "sigma": worst["sigma"], "block_size": worst["block_size"], "relative_se": worst["relative_se"],
                "mean": float(np.mean([abs(p[f"{model}_error"]) for p in resolved]))}
    return out


def simulated_crossover(sigmas: Sequence[float], small: Sequence[float], large: Sequence[float]) -> float | None:
    """The simulated crossover of blocks ``n`` (MSEs ``small``) and ``2n`` (``large``) at increasing ``sigmas``
    (module docstring); None when no step of the grid brackets one."""
    d = np.asarray(small, np.float64) - np.asarray(large, np.float64)
    s = np.asarray(sigmas, np.float64)
    for k in range(s.size - 1, 0, -1):  # from the widest down: point k (n better) and k - 1 (n worse)
        if d[k] < 0 < d[k - 1]:
            return float(s[k - 1] + (s[k] - s[k - 1]) * d[k - 1] / (d[k - 1] - d[k]))
    return None


def crossovers(element: str, cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per scale and block pair ``n, 2n`` of ``cells``: the crossover under each model and in the simulation."""
    by_key = {(c["scale"], c["block_size"]): c for c in cells}
    out = []
    for scale in sorted({c["scale"] for c in cells}):
        blocks = sorted(n for s, n in by_key if s == scale)
        for n, m in pairwise(blocks):
            if m != 2 * n:
                continue
            rows = {b: sorted(by_key[(scale, b)]["rows"], key=lambda r: r["sigma"]) for b in (n, m)}
            sigmas = [r["sigma"] for r in rows[n]]
            if sigmas != [r["sigma"] for r in rows[m]]:
                raise ValueError(f"simulation cells {scale} b{n} and b{m} have different sigma grids")
            out.append({"scale": scale, "block_size": n, "next_block_size": m,
                        **{model: crossover(n, element, scale, RULE, model=model) for model in MODELS},
                        "simulation": simulated_crossover(sigmas, [r["mse"] for r in rows[n]],
                                                          [r["mse"] for r in rows[m]])})
    return out


def compare(config: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Both models at every simulated point of ``cells`` (:func:`simulation_cell`), their fits per scale and
    the crossovers (module docstring)."""
    start = time.perf_counter()
    cells = sorted(cells, key=lambda c: (c["scale"], c["block_size"]))
    element = config["element"]
    points = [_point(element, c["scale"], c["block_size"], row) for c in cells for row in c["rows"]]
    fits = {scale: {model: fit([p for p in points if p["scale"] == scale], model) for model in MODELS}
            for scale in sorted({p["scale"] for p in points})}
    return {"element": element, "rule": RULE, "resolved_se": RESOLVED_SE, "points": points, "fits": fits,
            "crossovers": crossovers(element, cells),
            "wall_time_s": time.perf_counter() - start + sum(c["wall_time_s"] for c in cells)}
