"""The numerical study: MSE vs sigma of Normal(0, sigma^2) data, and the reversal regions found in it.

A cell (``results/finer_is_better/mse/<cell>.json``) is :func:`common.analysis.block_stats` for every sigma of
the log grid at one (element, scale, block size, variant): MSE, relative MSE (MSE / sigma^2) and the fraction
of blocks whose scale rounded to zero. Every cell uses the same seeded draw, so curves differ only by the
quantizer (common random numbers).

Reversal and regions (the definitions the report states):

* ``reversal_excess(sigma) = max_n MSE(n) / MSE(2n) - 1`` over consecutive configured block sizes n < 2n; a
  *reversal* ("smaller blocks give higher MSE") is an excess above ``regions.reversal_tolerance``.
* **Region A** (scale underflow): the sigmas where abs-max (UE4M3) reverses *and* at least
  ``regions.underflow_fraction`` of its smallest-block scales round to zero.
* **Region B** (the reversal that survives prevent-zero): the sigmas where prevent-zero (UE4M3) still reverses;
  no scale underflows there by construction, so what remains is the coarse scale grid and the clipped top bin.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from common.theory import block_mse, zero_block_probability

from .settings import REFERENCE_SCALE, parse_cell, variant_options


def numerical_cell(config: Mapping[str, Any], cell: str) -> dict[str, Any]:
    """The MSE-vs-sigma curve of one (element, scale, block size, variant): the Monte Carlo of
    :mod:`common.analysis.mse` (torch, imported here: the summaries and curves below only read cells)."""
    from common.analysis.mse import block_stats, sigma_grid, standard_normal

    start = time.perf_counter()
    parts = parse_cell(cell)
    study = config["numerical"]
    options = variant_options(config, parts["variant"])
    z = standard_normal(study["samples"], study["seed"])
    sigmas = sigma_grid(study["sigma"]["low"], study["sigma"]["high"], study["sigma"]["points"])
    rows = [block_stats(float(s), parts["block_size"], elem=parts["element"], scale=parts["scale"], z=z, **options)
            for s in sigmas]
    return {"cell": cell, **parts, "options": options, "samples": study["samples"], "seed": study["seed"],
            "rows": rows, "wall_time_s": time.perf_counter() - start}


def mse_table(cells: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (scale, variant, block_size, sigma) from numerical cells."""
    records = [{"scale": c["scale"], "variant": c["variant"], "block_size": c["block_size"], **row}
               for c in cells for row in c["rows"]]
    if not records:
        raise ValueError("no numerical cells given")
    return pd.DataFrame.from_records(records).sort_values(["scale", "variant", "block_size", "sigma"],
                                                          ignore_index=True)


def curves(table: pd.DataFrame, scale: str, variant: str, column: str = "mse") -> pd.DataFrame:
    """``column`` as a sigma x block_size frame for one (scale, variant) (KeyError naming a missing one)."""
    part = table[(table["scale"] == scale) & (table["variant"] == variant)]
    if part.empty:
        raise KeyError(f"no numerical cells for scale {scale!r}, variant {variant!r}")
    return part.pivot(index="sigma", columns="block_size", values=column).sort_index(axis=1)


def reversal_excess(table: pd.DataFrame, scale: str, variant: str) -> pd.Series:
    """``max_n MSE(n) / MSE(2n) - 1`` per sigma over consecutive configured block sizes (module docstring)."""
    mse = curves(table, scale, variant)
    blocks = list(mse.columns)
    ratios = [mse[small] / mse[large] - 1.0 for small, large in pairwise(blocks)]
    return pd.concat(ratios, axis=1).max(axis=1)


def intervals(sigmas: Iterable[float], grid: Iterable[float]) -> list[tuple[float, float]]:
    """Maximal runs of consecutive grid points among ``sigmas``, as ``(first, last)`` pairs."""
    grid = sorted(grid)
    chosen = set(sigmas)
    runs: list[tuple[float, float]] = []
    start = previous = None
    for s in grid:
        if s in chosen:
            start = s if start is None else start
            previous = s
        elif start is not None:
            runs.append((start, previous))
            start = None
    if start is not None:
        runs.append((start, previous))
    return runs


def regions(table: pd.DataFrame, thresholds: Mapping[str, Any]) -> dict[str, Any]:
    """Regions A and B (module docstring) with their sigma points and intervals (``thresholds``: the config's
    ``regions``)."""
    tol, underflow = thresholds["reversal_tolerance"], thresholds["underflow_fraction"]
    grid = sorted(table["sigma"].unique())
    absmax = reversal_excess(table, REFERENCE_SCALE, "absmax")
    zero = curves(table, REFERENCE_SCALE, "absmax", "zero_scale_fraction")
    smallest = zero.columns[0]
    region_a = [s for s in grid if absmax[s] > tol and zero.loc[s, smallest] >= underflow]
    prevent_zero = reversal_excess(table, REFERENCE_SCALE, "prevent_zero")
    region_b = [s for s in grid if prevent_zero[s] > tol]
    return {
        "A": {"sigmas": region_a, "intervals": intervals(region_a, grid),
              "rule": f"abs-max MSE(n) > (1 + {tol:g}) MSE(2n) for some consecutive n and >= {underflow:.0%} of "
                      f"its block-{smallest} scales round to zero"},
        "B": {"sigmas": region_b, "intervals": intervals(region_b, grid),
              "rule": f"prevent-zero MSE(n) > (1 + {tol:g}) MSE(2n) for some consecutive n"},
    }


def summary(cells: Iterable[Mapping[str, Any]], thresholds: Mapping[str, Any], elem: str = "e2m1") -> dict[str, Any]:
    """The study's summary artifact: the tidy table, the regions, the claims' sigmas fixed by the theory
    (:func:`claim_sigmas`), and the cells' total wall time."""
    cells = list(cells)
    table = mse_table(cells)
    return {"rows": table.to_dict(orient="records"), "regions": regions(table, thresholds),
            "claim_sigmas": claim_sigmas(sorted(table["sigma"].unique()), thresholds["underflow_fraction"], elem),
            "block_sizes": sorted(table["block_size"].unique().tolist()),
            "wall_time_s": float(sum(c["wall_time_s"] for c in cells))}


def claim_sigmas(grid: Sequence[float], underflow_fraction: float, elem: str = "e2m1") -> dict[str, float]:
    """``sigma_A`` and ``sigma_B`` on ``grid`` from the theory alone (UE4M3, blocks 4 and 8): ``sigma_A``
    where the theory puts abs-max's largest ``MSE(4)/MSE(8) - 1``; ``sigma_B`` where it puts prevent-zero's
    largest among the sigmas with ``P(scale = 0, n = 4) < underflow_fraction`` (outside Region A). No simulation
    or model data enters: the claims' reading points are fixed before the data."""
    def excess(sigma: float, rule: str) -> float:
        small = block_mse(sigma, 4, elem, REFERENCE_SCALE, rule)["total"]
        return small / block_mse(sigma, 8, elem, REFERENCE_SCALE, rule)["total"] - 1

    grid = sorted(float(s) for s in grid)
    sigma_a = max(grid, key=lambda s: excess(s, "absmax"))
    outside = [s for s in grid if zero_block_probability(s, 4, elem, REFERENCE_SCALE) < underflow_fraction]
    if not outside:
        raise ValueError(f"no grid sigma has P(scale = 0, n = 4) < {underflow_fraction}: widen numerical.sigma")
    return {"sigma_A": sigma_a, "sigma_B": max(outside, key=lambda s: excess(s, "prevent_zero"))}


def table_from_summary(data: Mapping[str, Any]) -> pd.DataFrame:
    return pd.DataFrame.from_records(data["rows"])


def reference_sigmas(grid: Iterable[float], targets: Iterable[float]) -> list[float]:
    """The grid points nearest (in log) to each target sigma."""
    grid = np.asarray(sorted(grid))
    return [float(grid[np.argmin(np.abs(np.log(grid) - np.log(t)))]) for t in targets]
