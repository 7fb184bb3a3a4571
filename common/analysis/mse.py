"""Monte Carlo mean squared error of block quantization on Normal(0, sigma^2) data.

``block_mse`` draws ``samples`` values ``sigma * z`` (``z`` standard normal from a ``torch.Generator`` seeded
with ``seed``; the same ``z`` for every sigma, rule and block size, so curves differ only by the quantizer),
arranges them as rows of 4096 values (block sizes divide 4096; the per-row global scale is the row's amax), runs
``common.scaling.quantize_blocks`` and returns ``mean((x - Q(x))^2)`` accumulated in float64.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from common.scaling import quantize_blocks

ROW = 4096


def sigma_grid(low: float = 1e-5, high: float = 1.0, points: int = 41) -> np.ndarray:
    """``points`` log-spaced sigmas from ``low`` to ``high`` inclusive."""
    if not 0 < low < high or points < 2:
        raise ValueError(f"need 0 < low < high and points >= 2, got low={low}, high={high}, points={points}")
    return np.logspace(np.log10(low), np.log10(high), points)


def _standard_normal(samples: int, seed: int) -> torch.Tensor:
    if samples < ROW or samples % ROW:
        raise ValueError(f"samples must be a positive multiple of {ROW}, got {samples}")
    return torch.randn(samples // ROW, ROW, generator=torch.Generator().manual_seed(seed))


def block_mse(sigma: float, block_size: int, *, elem: str = "e2m1", scale: str = "ue4m3", rule: str = "absmax",
              prevent_zero: bool = False, global_scale: str | None = None, samples: int = 1 << 20,
              seed: int = 0, z: torch.Tensor | None = None, **rule_options: Any) -> float:
    """Mean squared quantization error at one sigma (module docstring); ``z`` reuses a standard-normal draw."""
    if ROW % block_size:
        raise ValueError(f"block_size must divide {ROW}, got {block_size}")
    x = (z if z is not None else _standard_normal(samples, seed)) * sigma
    q = quantize_blocks(x, elem, scale, block_size, rule, prevent_zero=prevent_zero, global_scale=global_scale,
                        **rule_options)
    return float(((x - q).double() ** 2).mean())


def mse_sweep(sigmas: Iterable[float], block_sizes: Sequence[int], settings: dict[str, dict[str, Any]], *,
              samples: int = 1 << 20, seed: int = 0) -> list[dict[str, Any]]:
    """One row ``{"setting", "block_size", "sigma", "mse", "relative_mse"}`` per combination; ``settings`` maps a
    name to ``block_mse`` keyword arguments. ``relative_mse`` is ``mse / sigma^2``."""
    z = _standard_normal(samples, seed)
    rows = []
    for name, options in settings.items():
        for block_size in block_sizes:
            for sigma in sigmas:
                mse = block_mse(float(sigma), block_size, z=z, **options)
                rows.append({"setting": name, "block_size": block_size, "sigma": float(sigma), "mse": mse,
                             "relative_mse": mse / float(sigma) ** 2})
    return rows
