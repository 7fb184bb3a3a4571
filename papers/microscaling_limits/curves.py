"""Theory and simulation curves of the block MSE vs sigma, their comparison, and the crossovers.

* Theory cell (``results/microscaling_limits/theory/<element>-<scale>-<rule>.json``): :func:`common.theory.
  block_mse` (expected MSE by numerical integration, split into non-max, max-element and zero-block parts) on a
  log sigma grid for every block size and distribution.
* Simulation cell (``results/microscaling_limits/simulation/<element>-<scale>-b<n>-<rule>.json``): Monte Carlo
  MSE of Normal data (:func:`common.analysis.mse_sweep`, the same seeded draw for every cell).
* Validation: the theory evaluated at every simulated point; ``relative_error = |theory / simulation - 1|`` and
  ``z = |theory - simulation| / standard error`` (near rare zero blocks one flushed block dominates a sample
  and even 2^20 samples leave a standard error of several percent);
  ``chi2 = mean((theory - simulation)^2 / sigma^4)``, the mean squared difference of the relative MSE
  (MSE / sigma^2) -- the paper reports chi^2 ~ 4e-8 without its definition; this is ours.
* Crossovers (:func:`common.theory.crossover`): the largest sigma below which block size n has a higher MSE than
  2n, checked on the simulation: one grid step below it the simulated MSE(n) exceeds MSE(2n), one step above
  it does not. Its *drivers*: each part's share of MSE(n) - MSE(2n) at sigma = crossover / 1.2 (the fact sheet
  names round-to-zero blocks as the driver; the theory can say which part actually grows).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from common.analysis import block_stats, mse_sweep, sigma_grid
from common.theory import block_mse, crossover, zero_block_probability

RULE_OPTIONS = {"absmax": {"rule": "absmax"}, "prevent_zero": {"rule": "absmax", "prevent_zero": True}}
PARTS = ("non_max", "max_element", "zero_blocks")
DRIVER_STEP = 1.2  # the reversal's drivers are measured at sigma = crossover / 1.2
RESOLVED_SE = 0.005  # points whose simulation resolves 2% (relative standard error <= 0.5%)
ZERO_BLOCK_SIGMA = 0.005  # the fact sheet's example sigma
# P(s = 0) at sigma 0.005, UE4M3: OUR reconstruction from the fact sheet's formula (not numbers of the paper)
RECONSTRUCTED_ZERO_BLOCK = {4: 0.33, 8: 0.11, 16: 0.012, 32: 1.5e-4}


def _rule(rule: str) -> dict[str, Any]:
    if rule not in RULE_OPTIONS:
        raise ValueError(f"unknown rule {rule!r}; the theory covers {', '.join(RULE_OPTIONS)}")
    return RULE_OPTIONS[rule]


def theory_cell(config: Mapping[str, Any], scale: str, rule: str) -> dict[str, Any]:
    """Theory curves of one (scale, rule) for every distribution and block size."""
    start = time.perf_counter()
    _rule(rule)
    part = config["theory"]
    sigmas = sigma_grid(part["sigma"]["low"], part["sigma"]["high"], part["sigma"]["points"])
    rows = [{"dist": dist, "block_size": n, "sigma": float(s),
             **block_mse(float(s), n, config["element"], scale, rule, dist=dist)}
            for dist in part["distributions"] for n in part["block_sizes"] for s in sigmas]
    return {"element": config["element"], "scale": scale, "rule": rule, "rows": rows,
            "wall_time_s": time.perf_counter() - start}


def simulation_cell(config: Mapping[str, Any], scale: str, block_size: int, rule: str) -> dict[str, Any]:
    """Monte Carlo MSE of Normal data at one (scale, block size, rule) over the simulation's sigma grid."""
    part = config["simulation"]
    sigmas = sigma_grid(part["sigma"]["low"], part["sigma"]["high"], part["sigma"]["points"])
    return simulate(config["element"], scale, block_size, rule, sigmas, part["samples"], part["seed"])


def simulate(element: str, scale: str, block_size: int, rule: str, sigmas: Iterable[float], samples: int,
             seed: int) -> dict[str, Any]:
    """A simulation cell: Monte Carlo MSE of Normal data at one (scale, block size, rule) at every sigma of
    ``sigmas`` (:func:`common.analysis.mse_sweep`, one seeded draw of ``samples`` values)."""
    start = time.perf_counter()
    setting = {"elem": element, "scale": scale, **_rule(rule)}
    rows = mse_sweep(sigmas, [block_size], {rule: setting}, samples=samples, seed=seed)
    return {"element": element, "scale": scale, "block_size": block_size, "rule": rule, "samples": samples,
            "seed": seed, "rows": rows, "wall_time_s": time.perf_counter() - start}


def validation(config: Mapping[str, Any], cells: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Theory at every simulated point, the errors, the crossovers and the zero-block probabilities."""
    start = time.perf_counter()
    cells = list(cells)
    element = config["element"]
    points = []
    for cell in cells:
        for row in cell["rows"]:
            theory = block_mse(row["sigma"], cell["block_size"], element, cell["scale"], cell["rule"])
            points.append({"scale": cell["scale"], "rule": cell["rule"], "block_size": cell["block_size"],
                           "sigma": row["sigma"], "simulation": row["mse"], "theory": theory["total"],
                           "zero_blocks": theory["zero_blocks"],
                           "relative_error": abs(theory["total"] / row["mse"] - 1),
                           "z": abs(theory["total"] - row["mse"]) / row["mse_standard_error"]
                           if row["mse_standard_error"] > 0 else 0.0,
                           "simulation_relative_se": row["mse_standard_error"] / row["mse"],
                           "simulated_zero_scale_fraction": row["zero_scale_fraction"]})
    fits = {}
    for scale in sorted({p["scale"] for p in points}):
        mine = [p for p in points if p["scale"] == scale]
        resolved = [p for p in mine if p["simulation_relative_se"] <= RESOLVED_SE]
        fits[scale] = {"max_relative_error": max(p["relative_error"] for p in mine),
                       "max_relative_error_resolved": max((p["relative_error"] for p in resolved), default=None),
                       "resolved_points": len(resolved), "max_z": max(p["z"] for p in mine),
                       "chi2": float(np.mean([(p["theory"] - p["simulation"]) ** 2 / p["sigma"] ** 4 for p in mine])),
                       "points": len(mine)}
    return {"points": points, "fits": fits, "crossovers": crossovers(config, cells),
            "zero_block": zero_block_check(config, sorted({c["scale"] for c in cells})),
            "wall_time_s": time.perf_counter() - start + sum(c["wall_time_s"] for c in cells)}


def _simulated(cells: Sequence[Mapping[str, Any]], scale: str, rule: str, n: int) -> dict[float, float]:
    cell = next((c for c in cells if (c["scale"], c["rule"], c["block_size"]) == (scale, rule, n)), None)
    if cell is None:
        raise KeyError(f"no simulation cell for scale {scale!r}, rule {rule!r}, block size {n}")
    return {row["sigma"]: row["mse"] for row in cell["rows"]}


def crossovers(config: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For every (scale, rule) and consecutive simulated block sizes: the theory's crossover and its check."""
    out = []
    blocks = sorted({c["block_size"] for c in cells})
    for scale, rule in sorted({(c["scale"], c["rule"]) for c in cells}):
        for n, m in pairwise(blocks):
            if m != 2 * n:
                continue
            sigma = crossover(n, config["element"], scale, rule)
            small, large = _simulated(cells, scale, rule, n), _simulated(cells, scale, rule, m)
            grid = np.array(sorted(small))
            check = None
            if sigma is not None and grid[0] < sigma < grid[-1]:
                below = float(grid[grid < sigma][-1])
                above = float(grid[grid > sigma][0])
                check = bool(small[below] > large[below] and small[above] <= large[above])
            out.append({"scale": scale, "rule": rule, "block_size": n, "next_block_size": m, "sigma": sigma,
                        "simulation_agrees": check,
                        "drivers": None if sigma is None else drivers(config["element"], scale, rule, n, sigma)})
    return out


def drivers(element: str, scale: str, rule: str, n: int, sigma_crossover: float, model: str = "exact"
            ) -> dict[str, float]:
    """What makes block n worse than 2n just below the crossover (at ``sigma_crossover / DRIVER_STEP``): each
    part's share of ``MSE(n) - MSE(2n)`` under ``model`` (:func:`common.theory.block_mse`; shares sum to 1; a
    negative share works against the reversal)."""
    sigma = sigma_crossover / DRIVER_STEP
    small = block_mse(sigma, n, element, scale, rule, model=model)
    large = block_mse(sigma, 2 * n, element, scale, rule, model=model)
    total = small["total"] - large["total"]
    return {"sigma": sigma, **{part: (small[part] - large[part]) / total for part in PARTS}}


def zero_block_check(config: Mapping[str, Any], scales: Sequence[str], samples: int = 1 << 20) -> list[dict]:
    """P(block scale = 0) at sigma = 0.005: theory, simulation (``samples`` values, seed of the simulation) and,
    for UE4M3, our reconstruction from the fact sheet's formula (``reconstruction``; not the paper's numbers)."""
    rows = []
    for scale in scales:
        for n, reconstruction in RECONSTRUCTED_ZERO_BLOCK.items():
            simulated = block_stats(ZERO_BLOCK_SIGMA, n, elem=config["element"], scale=scale, samples=samples,
                                    seed=config["simulation"]["seed"])["zero_scale_fraction"]
            rows.append({"scale": scale, "block_size": n, "sigma": ZERO_BLOCK_SIGMA,
                         "theory": zero_block_probability(ZERO_BLOCK_SIGMA, n, scale=scale, elem=config["element"]),
                         "simulation": simulated, "samples": samples,
                         "reconstruction": reconstruction if scale == "ue4m3" else None})
    return rows
