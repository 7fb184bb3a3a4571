"""Where finer blocks stop paying: the crossover sigma between block sizes ``n`` and ``2n``, and the best block size.

For narrow distributions a smaller block is *worse* than a larger one -- the small-block reversal of *Is finer
better?* (Fasoli et al., 2026). :func:`crossover` finds the largest sigma below which block size ``n`` has the
higher expected MSE; :func:`best_block_size` picks the block size of least expected MSE at one sigma. Both use
:func:`common.theory.block_mse`.

Two effects reverse the order. At the smallest sigmas whole blocks flush to zero (UE4M3:
``P(s = 0) = erf(t / (sigma sqrt 2))^n``, larger for small ``n``), the fact sheet's driver. But the *first*
crossover from above (UE4M3 with E2M1: sigma ~ 0.024 for 4 vs 8 down to ~ 0.008 for 128 vs 256) comes earlier:
there block scales ``M / 6`` fall below UE4M3's smallest normal ``2^-6``, subnormal scales have fewer significant
bits, and the max element's error (rounding of the scale) grows, fastest for small blocks whose maxima are
smaller. prevent_zero barely moves it (n = 4: by 0.7%; n = 16: by 4e-8). UE5M3 has the same subnormal grid
``2^8`` times lower, so its crossovers sit exactly 256 times lower in sigma.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq

from .block_mse import _check_block_size, _check_sigma, block_mse
from .paper_model import check_model

POINTS_PER_DECADE = 8


def _check_range(sigma_range: tuple[float, float]) -> tuple[float, float]:
    try:
        low, high = (_check_sigma(s) for s in sigma_range)
    except (TypeError, ValueError):
        raise ValueError(f"sigma_range must be two finite numbers 0 < low < high, got {sigma_range!r}") from None
    if not low < high:
        raise ValueError(f"sigma_range must be two finite numbers 0 < low < high, got {sigma_range!r}")
    return low, high


def crossover(block_size: int, elem: str = "e2m1", scale: str = "ue4m3", rule: str = "absmax", *,
              dist: str = "normal", df: float | None = None, global_scale: float | None = None,
              sigma_range: tuple[float, float] = (1e-6, 10.0), model: str = "exact") -> float | None:
    """The largest sigma in ``sigma_range`` below which block size ``n`` has a higher total MSE than ``2n``.

    ``d(sigma) = (mse_n - mse_2n) / (mse_n + mse_2n)``; scanning a log grid (8 points a decade) from the top of
    the range down, the first step from ``d < 0`` (n better) to ``d > 0`` (n worse) brackets the crossover, which
    ``scipy.optimize.brentq`` refines on log sigma (relative tolerance 1e-10). None if there is no such step.
    ``model``: the MSE model of :func:`common.theory.block_mse` (``"exact"`` or the authors' ``"paper"``; UE4M3
    with E2M1, n = 16: 0.01614 exact, 0.01583 paper).
    """
    n = _check_block_size(block_size)
    low, high = _check_range(sigma_range)
    options = {"elem": elem, "scale": scale, "rule": rule, "dist": dist, "df": df, "global_scale": global_scale,
               "model": check_model(model)}

    def relative_difference(log_sigma: float) -> float:
        sigma = math.exp(log_sigma)
        small, large = block_mse(sigma, n, **options)["total"], block_mse(sigma, 2 * n, **options)["total"]
        return (small - large) / (small + large)

    points = max(2, math.ceil(POINTS_PER_DECADE * math.log10(high / low)) + 1)
    grid = np.linspace(math.log(high), math.log(low), points)
    last_negative = None
    for log_sigma in grid:
        d = relative_difference(float(log_sigma))
        if d < 0:
            last_negative = float(log_sigma)
        elif d > 0 and last_negative is not None:
            return math.exp(brentq(relative_difference, float(log_sigma), last_negative, xtol=1e-12, rtol=1e-10))
    return None


def best_block_size(sigma: float, block_sizes: Sequence[int], elem: str = "e2m1", scale: str = "ue4m3",
                    rule: str = "absmax", *, dist: str = "normal", df: float | None = None,
                    global_scale: float | None = None, model: str = "exact") -> int:
    """The block size of ``block_sizes`` with the lowest total expected MSE at ``sigma`` (the first on ties) under
    ``model`` (:func:`common.theory.block_mse`)."""
    sizes = [_check_block_size(n) for n in block_sizes]
    if not sizes:
        raise ValueError(f"block_sizes must hold at least one block size, got {block_sizes!r}")
    totals = [block_mse(sigma, n, elem, scale, rule, dist=dist, df=df, global_scale=global_scale,
                        model=model)["total"] for n in sizes]
    return sizes[int(np.argmin(totals))]
