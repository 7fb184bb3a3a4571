"""Monte Carlo error of block quantization on Normal(0, sigma^2) data.

``block_stats`` draws ``samples`` values ``sigma * z`` (``z`` standard normal from a ``torch.Generator`` seeded
with ``seed``; the same ``z`` for every sigma, rule and block size, so curves differ only by the quantizer),
arranges them as rows of 4096 values (block sizes divide 4096; a ``global_scale="row"`` scale is per row of
4096), runs ``common.scaling.quantize_blocks`` and returns

* ``mse = mean((x - Q(x))^2)``, accumulated in float64, ``relative_mse = mse / sigma^2``, and
  ``mse_standard_error``, the Monte Carlo standard error of ``mse`` with the block as the independent unit
  (the errors of one block share its scale: a flushed block zeroes all of its values at once), i.e.
  ``std(SSE_block) / (sqrt(blocks) * block_size)``;
* ``zero_scale_fraction``: the fraction of blocks whose scale is 0 (the whole block flushed to zero: the scale
  underflow of abs-max, Region A of *Finer is Better*);
* ``floor_scale_fraction``: the fraction of blocks whose scale is 0 or the scale format's smallest positive
  value (the scale floor binds: no smaller scale exists, so a finer block cannot choose a better one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from common.formats import get_format
from common.progress import progress
from common.scaling import quantize_blocks

ROW = 4096


def sigma_grid(low: float = 1e-5, high: float = 1.0, points: int = 41) -> np.ndarray:
    """``points`` log-spaced sigmas from ``low`` to ``high`` inclusive."""
    if not 0 < low < high or points < 2:
        raise ValueError(f"need 0 < low < high and points >= 2, got low={low}, high={high}, points={points}")
    return np.logspace(np.log10(low), np.log10(high), points)


def standard_normal(samples: int, seed: int) -> torch.Tensor:
    """The seeded standard-normal draw, ``(samples // 4096, 4096)``, shared by every point of a sweep."""
    if samples < ROW or samples % ROW:
        raise ValueError(f"samples must be a positive multiple of {ROW}, got {samples}")
    return torch.randn(samples // ROW, ROW, generator=torch.Generator().manual_seed(seed))


def block_stats(sigma: float, block_size: int, *, elem: str = "e2m1", scale: str = "ue4m3", rule: str = "absmax",
                prevent_zero: bool = False, global_scale: str | None = None, global_target: float | None = None,
                samples: int = 1 << 20, seed: int = 0, z: torch.Tensor | None = None,
                **rule_options: Any) -> dict[str, float]:
    """``{"sigma", "mse", "relative_mse", "mse_standard_error", "zero_scale_fraction", "floor_scale_fraction"}``
    at one sigma (module docstring); ``z`` reuses a standard-normal draw."""
    if block_size < 1 or ROW % block_size:
        raise ValueError(f"block_size must be a positive divisor of {ROW}, got {block_size}")
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    x = (z if z is not None else standard_normal(samples, seed)) * sigma
    q, scales = quantize_blocks(x, elem, scale, block_size, rule, prevent_zero=prevent_zero,
                                global_scale=global_scale, global_target=global_target, return_scales=True,
                                **rule_options)
    squared = (x - q).double() ** 2
    mse = float(squared.mean())
    per_block = squared.reshape(-1, block_size).sum(dim=1)
    return {"sigma": float(sigma), "mse": mse, "relative_mse": mse / float(sigma) ** 2,
            "mse_standard_error": float(per_block.std(correction=0)) / (per_block.numel() ** 0.5 * block_size),
            "zero_scale_fraction": float((scales.block == 0).double().mean()),
            "floor_scale_fraction": float((scales.block <= get_format(scale).min_subnormal).double().mean())}


def block_mse(sigma: float, block_size: int, **options: Any) -> float:
    """The ``mse`` of :func:`block_stats` (same arguments)."""
    return block_stats(sigma, block_size, **options)["mse"]


def mse_sweep(sigmas: Iterable[float], block_sizes: Sequence[int], settings: dict[str, dict[str, Any]], *,
              samples: int = 1 << 20, seed: int = 0) -> list[dict[str, Any]]:
    """One :func:`block_stats` row, plus ``setting`` and ``block_size``, per combination; ``settings`` maps a
    name to ``block_stats`` keyword arguments."""
    z = standard_normal(samples, seed)
    cells = [(name, options, block_size, sigma) for name, options in settings.items() for block_size in block_sizes
             for sigma in sigmas]
    return [{"setting": name, "block_size": block_size, **block_stats(float(sigma), block_size, z=z, **options)}
            for name, options, block_size, sigma in progress(cells, "Monte Carlo MSE", total=len(cells))]
