"""Monte Carlo reference for the theory tests: quantize_blocks on seeded samples, with a block-level standard error."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import torch

from common.analysis import standard_normal
from common.scaling import quantize_blocks

ROW = 4096


def normal_draw(samples: int, seed: int = 0) -> torch.Tensor:
    """The standard-normal draw of :func:`common.analysis.block_stats` (rows of 4096)."""
    return standard_normal(samples, seed)


def other_draw(dist: str, samples: int, seed: int = 0, df: float | None = None) -> torch.Tensor:
    """Unit-variance Laplace or Student-t samples (numpy's seeded generator), float32 rows of 4096."""
    rng = np.random.default_rng(seed)
    if dist == "laplace":
        z = rng.laplace(0.0, 1.0 / math.sqrt(2.0), samples)
    elif dist == "student_t":
        z = rng.standard_t(df, samples) * math.sqrt((df - 2.0) / df)
    else:
        raise ValueError(f"unknown dist {dist!r}")
    return torch.from_numpy(z.astype(np.float32)).reshape(-1, ROW)


def mc_mse(x: torch.Tensor, block_size: int, elem: str = "e2m1", scale: str = "ue4m3", rule: str = "absmax",
           **options: object) -> tuple[float, float, int]:
    """``(mse, standard error, zero-scale blocks)`` of ``quantize_blocks`` on ``x``: the mean and the standard error
    of the per-block sums of squared errors (blocks are independent), divided by the block size."""
    q, scales = quantize_blocks(x, elem, scale, block_size, rule, return_scales=True, **options)
    block_sse = (x - q).double().square().reshape(-1, block_size).sum(dim=1)
    mse = float(block_sse.mean()) / block_size
    se = float(block_sse.std()) / math.sqrt(block_sse.numel()) / block_size
    return mse, se, int((scales.block == 0).sum())


def mc_parts(x: torch.Tensor, block_size: int, elem: str = "e2m1", scale: str = "ue4m3",
             rule: str = "absmax") -> dict[str, tuple[float, float]]:
    """Monte Carlo of the three terms, ``{name: (mean, standard error)}`` per element: blocks with a zero scale,
    the largest-magnitude element of the other blocks, and their remaining elements."""
    q, scales = quantize_blocks(x, elem, scale, block_size, rule, return_scales=True)
    blocks, err = x.reshape(-1, block_size), (x - q).double().square().reshape(-1, block_size)
    zero = (scales.block.reshape(-1) == 0).double()
    top = err.gather(1, blocks.abs().argmax(dim=1, keepdim=True)).squeeze(1)
    per_block = {"zero_blocks": err.sum(dim=1) * zero, "max_element": top * (1 - zero),
                 "non_max": (err.sum(dim=1) - top) * (1 - zero)}
    return {name: (float(v.mean()) / block_size, float(v.std()) / math.sqrt(v.numel()) / block_size)
            for name, v in per_block.items()}


def within(theory: float, mc: float, se: float, relative: float = 0.02, k: float = 4.0) -> bool:
    """The test tolerance: ``|theory - mc| <= max(relative * mc, k * se)`` -- 2% where Monte Carlo resolves 2%,
    else ``k`` standard errors (rare zero-scale blocks make the per-block error heavy-tailed)."""
    return abs(theory - mc) <= max(relative * mc, k * se)


def reference_block_mse(sigma: float, block_size: int, scale: str = "ue4m3", rule: str = "absmax",
                        elem: str = "e2m1") -> dict[str, float]:
    """Slow, independent oracle for Normal data: nested ``scipy.integrate.quad`` of the three-term integrals.

    Shares no code with :mod:`common.theory`: the grids come straight from ``Format.finite_values``, rounding is
    brute-force nearest, the density and CDF are written out with ``math`` and ``H_s(m)`` is a quad per element
    cell. The outer integral over the block max runs on ``[0, 12 sigma]`` split at every scale step and element
    midpoint.
    """
    from scipy import integrate

    from common.formats import get_format

    n = block_size
    v = get_format(scale).finite_values
    v = v[v >= 0]
    q = get_format(elem).finite_values
    q = q[q >= 0]
    top = q[-1]
    mids = (q[:-1] + q[1:]) / 2
    v_min = v[v > 0][0]

    def pdf(x: float) -> float:
        return math.sqrt(2.0 / math.pi) / sigma * math.exp(-0.5 * (x / sigma) ** 2)

    def cdf(x: float) -> float:
        return math.erf(x / (sigma * math.sqrt(2.0)))

    def block_scale(m: float) -> float:
        s = v[np.argmin(np.abs(v - m / top))]
        return v_min if rule == "prevent_zero" and s == 0 else float(s)

    def cell_value(x: float, s: float) -> float:
        return 0.0 if s == 0 else s * q[min(np.searchsorted(mids, x / s), q.size - 1)]

    def cell(lo: float, hi: float, s: float) -> float:
        c = cell_value(0.5 * (lo + hi), s)
        return integrate.quad(lambda x: pdf(x) * (x - c) ** 2, lo, hi, epsabs=0, epsrel=1e-10)[0]

    @functools.cache
    def complete_cells(s: float) -> np.ndarray:  # errors of the cells below each midpoint, accumulated
        edges = [0.0, *(s * mids)]
        return np.cumsum([0.0, *(cell(lo, hi, s) for lo, hi in itertools.pairwise(edges))])

    def h(m: float, s: float) -> float:
        if s == 0:
            return cell(0.0, m, s)
        j = int(np.searchsorted(mids, m / s))
        return complete_cells(s)[j] + cell(s * mids[j - 1] if j else 0.0, m, s)

    m_hi = 12 * sigma
    edges = np.concatenate(([0.0, m_hi], top * (v[:-1] + v[1:]) / 2, np.outer(v, mids).ravel()))
    edges = np.unique(edges[(edges >= 0) & (edges <= m_hi)])
    parts = {"zero_blocks": 0.0, "max_element": 0.0, "non_max": 0.0}
    for lo, hi in itertools.pairwise(edges):
        s = block_scale(0.5 * (lo + hi))

        def max_term(m: float, s: float = s) -> float:
            return pdf(m) * cdf(m) ** (n - 1) * (m - cell_value(m, s)) ** 2

        def rest_term(m: float, s: float = s) -> float:
            return (n - 1) * pdf(m) * cdf(m) ** (n - 2) * h(m, s) if n > 1 else 0.0

        first = integrate.quad(max_term, lo, hi, epsabs=0, epsrel=1e-9)[0]
        second = integrate.quad(rest_term, lo, hi, epsabs=0, epsrel=1e-9)[0]
        if s == 0:
            parts["zero_blocks"] += first + second
        else:
            parts["max_element"] += first
            parts["non_max"] += second
    parts["total"] = sum(parts.values())
    return parts
