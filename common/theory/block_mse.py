"""Analytic expected MSE of block (microscaling) quantization with quantized block scales.

Reconstructs the three-term model of *Is finer better? The limits of microscaling formats* (Fasoli et al.,
ICLR 2026; fact sheet ``shared/papers/microscaling_limits.md``) and evaluates it by numerical integration, for
iid data ``X = sigma Z`` (``Z`` normal, Laplace or Student-t with unit variance, :mod:`.distributions`). This is the
exact model (``model="exact"``, the default); the authors' own model (``model="paper"``, :mod:`.paper_model`)
differs in the non-max term only.

Quantizer (exactly :func:`common.scaling.quantize_blocks` with rule ``absmax`` or ``prevent_zero``)
    A block holds ``n`` values with abs-max ``M``. Block scale ``s = Q_S(M / top)``, ``top`` the largest element
    value (6 for E2M1), ``Q_S`` round-to-nearest-even onto the scale format's grid, saturating at its max
    (:mod:`.grids`); ``prevent_zero``: ``s = max(s, v_min)`` with ``v_min`` the smallest positive scale.
    Element quantizer ``Q_E``: round to nearest on the element grid, saturating at ``+-top`` (so when ``s``
    rounded down, ``M / s > top`` clips). The error of a value ``x`` under scale ``s > 0`` is
    ``e_s(x) = x - s Q_E(x / s)``; a block with ``s = 0`` becomes all zeros (``e_0(x) = x``).
    Global scale ``g`` (UE4M3-S): ``x -> g * Q(x / g)`` with the block scale chosen on ``x / g``
    (``s = g Q_S(M / (top g))``), so the error is ``g`` times the error of ``x / g`` and, with
    ``sigma' = sigma / g``, ``MSE(sigma; g) = g^2 MSE(sigma'; 1)``; ``g`` is a given number here (quantize_blocks
    derives it from the data, ``amax / (top * scale max)``). quantize_blocks computes in float32: its rounding
    boundaries differ from the exact ones by at most 2^-24 relative, far below anything a test can resolve.

Derivation
    ``G``, ``g`` are the CDF and density of ``|X|``. ``M`` has density ``n g(m) G(m)^(n-1)``, and given
    ``M = m`` the other ``n - 1`` magnitudes are iid ``|X|`` truncated to ``[0, m]``. The per-element MSE
    ``(1/n) E[sum_i e_s(X_i)^2]`` splits into

    * ``zero_blocks  = (1/n) E[1{s=0} (M^2 + (n-1) E[X^2 | |X| <= M])]``,
    * ``max_element  = (1/n) E[1{s>0} e_s(M)^2]``,
    * ``non_max      = ((n-1)/n) E[1{s>0} E[e_s(X)^2 | |X| <= M]]``,

    that is, with ``H_s(m) = int_0^m g(x) e_s(x)^2 dx``,

    ``max_element = int_{s(m)>0} g(m) G(m)^(n-1) e_s(m)^2 dm``,
    ``non_max     = (n-1) int_{s(m)>0} g(m) G(m)^(n-2) H_s(m) dm``.

    ``s`` is 0 exactly when ``M <= t`` (``t = top v_1 / 2``, the largest max whose scale rounds to 0:
    ``3 * 2^-9`` for UE4M3 and E2M1), i.e. when every ``|X_i| <= t``; the zero term is therefore closed-form,
    ``zero_blocks = G(t)^(n-1) int_0^t g(x) x^2 dx``, and ``P(s = 0) = G(t)^n`` (normal data:
    ``erf(t / (sigma sqrt 2))^n``, :func:`zero_block_probability`).

Computation (in units of ``sigma'``, result times ``sigma^2``)
    ``s(m)`` is a step function with steps at ``top * (v_k + v_{k+1}) / 2``; inside a step the integrands are
    analytic except where ``m / s`` crosses an element midpoint (``e_s`` jumps; ``H_s`` has a kink). The
    breakpoints -- scale steps, ``s * mid_j`` and ``s * top`` inside each step -- are merged with quantiles of
    ``M`` (levels ``1e-13 .. 1 - 1e-16``, which resolve the density of ``M`` for any ``n``) and restricted to
    ``[m_lo, m_hi]``: ``P(M < m_lo) = 1e-13`` (what lies below contributes at most ``m_lo^2 1e-13``) and
    ``P(M > m_hi) = 1e-16``. Every sub-interval gets ``order``-point Gauss-Legendre (numpy, vectorized).
    ``H_s(m)`` is exact: the cumulative errors of the complete element cells below ``m`` plus the partial cell,
    each ``int_a^b g(x) (x - c)^2 dx`` in closed form, or, on cells narrower than two density lengths where the
    closed form would cancel, by 16-point Gauss-Legendre whose error is below double rounding
    (:func:`.distributions.cell_error`).
    Heavy tails (Student-t): when ``n E[X^2; |X| > m_hi] > 1e-14`` the range extends geometrically (x2 steps) to
    where that holds, or to the saturated scale step if that comes first; beyond the saturation point every
    block's scale is the largest, and the max element's error above ``m_hi`` is added in closed form,
    ``int_{m_hi}^inf g (m - s_max top)^2 dm`` (``G^(n-1) = 1`` there to ``1e-16``; the non-max terms of such
    blocks are below ``n 1e-16`` of the variance and dropped).

Validation (tests/theory)
    An independent nested ``scipy.integrate.quad`` oracle agrees to ~1e-14; Gauss-Legendre with 8 nodes agrees
    with 32 nodes to ~1e-15 (normal, Laplace) and ~1e-9 (Student-t, df 3); Monte Carlo with ``quantize_blocks``
    (2^20 samples, 41 sigmas in [1e-5, 1] x block sizes 4..256 x UE4M3/UE5M3 x absmax/prevent_zero) agrees within
    2% wherever its standard error resolves 2%, else within 4 standard errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from common.formats import get_format

from .distributions import Distribution, cell_error, get_distribution
from .grids import ElementCells, ScaleSteps, check_rule, element_cells, scale_steps
from .paper_model import check_model, truncated_error

DEFAULT_ORDER = 8  # Gauss-Legendre nodes per sub-interval
LOWER_MASS = 1e-13  # P(M < m_lo)
UPPER_MASS = 1e-16  # P(M > m_hi)
TAIL_TOLERANCE = 1e-14  # n E[Z^2; |Z| > m] below this (units of the variance) ends the range of a heavy tail
MAX_RANGE = 1e150  # hard end of the range for tails heavier still (df close to 2)
_LOWER_LEVELS = 10.0 ** np.array([-13, -11, -9, -7, -6, -5, -4, -3, -2.5, -2, -1.5])
_MID_LEVELS = np.linspace(0.05, 0.95, 19)
_UPPER_LEVELS = 10.0 ** -np.array([1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])


@dataclass(frozen=True)
class _Range:
    """Integration range of the block max, in units of sigma' (depends on the distribution and n only)."""

    m_lo: float
    m_hi: float
    points: np.ndarray  # M quantiles inside the range: extra breakpoints that resolve M's density
    heavy: bool  # n E[Z^2; |Z| > m_hi] > TAIL_TOLERANCE: the range may need extending (Student-t)
    m_tail: float  # where n E[Z^2; |Z| > m] <= TAIL_TOLERANCE (== m_hi unless heavy)


def _max_quantile(dist: Distribution, n: int, p: np.ndarray, *, upper: bool = False) -> np.ndarray:
    """``m`` with ``P(M <= m) = p`` (or ``P(M > m) = p`` when ``upper``), from ``G(m) = P(M <= m)^(1/n)``."""
    sf = np.atleast_1d(-np.expm1(np.log1p(-p) / n) if upper else -np.expm1(np.log(p) / n))
    low = sf > 0.5  # G(m) < 1/2: invert the CDF, not the survival function (precision near 0)
    m = np.empty(sf.shape)
    m[low], m[~low] = dist.ppf(1.0 - sf[low]), dist.isf(sf[~low])
    return m


@lru_cache(maxsize=4096)
def _integration_range(dist: Distribution, n: int) -> _Range:
    m_lo = float(_max_quantile(dist, n, np.array(LOWER_MASS))[0])
    m_hi = float(_max_quantile(dist, n, np.array(UPPER_MASS), upper=True)[0])
    points = np.concatenate((_max_quantile(dist, n, np.concatenate((_LOWER_LEVELS, _MID_LEVELS))),
                             _max_quantile(dist, n, _UPPER_LEVELS, upper=True)))
    points.setflags(write=False)
    m_tail = m_hi
    while n * float(dist.tails(np.array(m_tail))[2]) > TAIL_TOLERANCE and m_tail < MAX_RANGE:
        m_tail *= 2.0
    return _Range(m_lo=m_lo, m_hi=m_hi, points=points, heavy=m_tail > m_hi, m_tail=m_tail)


def _standard_parts(sigma_eff: float, n: int, dist: Distribution, steps: ScaleSteps, cells: ElementCells,
                    order: int, model: str) -> tuple[float, float, float]:
    """(zero_blocks, max_element, non_max) for data of unit variance and the grids divided by ``sigma_eff``;
    ``model="paper"``: the non-max elements truncated at ``top s`` (:mod:`.paper_model`), not at the block max."""
    bounds, values = steps.bounds / sigma_eff, steps.values / sigma_eff
    zero = 0.0
    start = 0.0
    if steps.zero_max is not None:
        start = steps.zero_max / sigma_eff
        log_g = float(dist.log_cdf(np.array(start)))
        zero = math.exp((n - 1) * log_g) * float(cell_error(dist, 0.0, start, 0.0)) if log_g > -np.inf else 0.0
    span = _integration_range(dist, n)
    lo, hi, tail_scale = max(span.m_lo, start), span.m_hi, None
    if span.heavy:
        saturation = bounds[-1]  # from here on every block has the largest scale
        hi = max(span.m_hi, min(span.m_tail, saturation))
        tail_scale = values[-1] if saturation < span.m_tail else None
    tail = 0.0
    if tail_scale is not None:  # max element above hi, in closed form (module docstring)
        tail = float(cell_error(dist, max(hi, start), np.inf, tail_scale * cells.top))
    if lo >= hi:
        return zero, tail, 0.0

    edges = _breakpoints(lo, hi, bounds, values, cells, span)
    a, b = edges[:-1], edges[1:]
    step = np.searchsorted(bounds, 0.5 * (a + b), side="right")  # scale step of each sub-interval
    unique_steps, which = np.unique(step, return_inverse=True)
    s_unique = values[unique_steps]

    x_nodes, w_nodes = _gauss_legendre(order)
    half = 0.5 * (b - a)
    m = ((a + half)[:, None] + half[:, None] * x_nodes).ravel()
    w = (half[:, None] * w_nodes).ravel()
    node_step = np.repeat(which, order)
    s = s_unique[node_step]

    j = np.searchsorted(cells.mids, m / s)  # element cell of each node
    c = s * cells.q[j]

    density, log_cdf = dist.pdf(m), dist.log_cdf(m)
    max_element = float(np.sum(w * density * np.exp((n - 1) * log_cdf) * (m - c) ** 2)) + tail
    if model == "paper":  # (n-1) int g G^(n-1) C(s(m)) dm, C(s) = E[e_s(X)^2 | |X| <= top s]
        truncated = truncated_error(dist, s_unique, cells)[node_step]
        non_max = (n - 1) * float(np.sum(w * density * np.exp((n - 1) * log_cdf) * truncated)) if n > 1 else 0.0
        return zero, max_element, non_max

    k = cells.mids.size  # complete-cell errors per scale, accumulated: cum[u, j] = sum of cells 0..j-1
    full = cell_error(dist, s_unique[:, None] * cells.lowers[:k], s_unique[:, None] * cells.mids,
                      s_unique[:, None] * cells.q[:k])
    cum = np.concatenate((np.zeros((s_unique.size, 1)), np.cumsum(full, axis=1)), axis=1)
    h = cum[node_step, j] + cell_error(dist, s * cells.lowers[j], m, c)
    non_max = (n - 1) * float(np.sum(w * density * np.exp((n - 2) * log_cdf) * h)) if n > 1 else 0.0
    return zero, max_element, non_max


def _breakpoints(lo: float, hi: float, bounds: np.ndarray, values: np.ndarray, cells: ElementCells,
                 span: _Range) -> np.ndarray:
    """Sorted edges of the sub-intervals of ``[lo, hi]`` (module docstring, Computation)."""
    k0, k1 = np.searchsorted(bounds, lo, side="right"), np.searchsorted(bounds, hi, side="left")
    steps = np.arange(k0, k1 + 1)
    step_lo = np.maximum(np.concatenate(([0.0], bounds))[steps], lo)
    step_hi = np.minimum(np.concatenate((bounds, [np.inf]))[steps], hi)
    element = values[steps, None] * np.append(cells.mids, cells.top)
    element = element[(element > step_lo[:, None]) & (element < step_hi[:, None])]
    quantiles = span.points[(span.points > lo) & (span.points < hi)]
    parts = [np.array([lo, hi]), bounds[k0:k1], element, quantiles]
    if hi > 2 * span.m_hi:  # heavy tail: geometric steps beyond the quantiles
        parts.append(span.m_hi * 2.0 ** np.arange(1, math.ceil(math.log2(hi / span.m_hi))))
    edges = np.unique(np.concatenate(parts))
    return edges[(edges >= lo) & (edges <= hi)]


@lru_cache(maxsize=16)
def _gauss_legendre(order: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.legendre.leggauss(order)
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


# ----------------------------------------------------------------------------------------------- public API
def _check_sigma(sigma: float) -> float:
    if isinstance(sigma, bool) or not isinstance(sigma, int | float | np.floating | np.integer) \
            or not 0 < sigma < math.inf:
        raise ValueError(f"sigma must be a finite number > 0, got sigma={sigma!r}")
    return float(sigma)


def _check_block_size(block_size: int) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer) or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got block_size={block_size!r}")
    return int(block_size)


def _check_global_scale(global_scale: float | None) -> float:
    if global_scale is None:
        return 1.0
    if isinstance(global_scale, bool) or not isinstance(global_scale, int | float | np.floating) \
            or not 0 < global_scale < math.inf:
        raise ValueError(f"global_scale must be None or a finite number > 0, got global_scale={global_scale!r}")
    return float(global_scale)


def _check_order(order: int) -> int:
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ValueError(f"order must be an integer >= 1, got order={order!r}")
    return order


def block_mse(sigma: float, block_size: int, elem: str = "e2m1", scale: str = "ue4m3", rule: str = "absmax", *,
              dist: str = "normal", global_scale: float | None = None, df: float | None = None,
              order: int = DEFAULT_ORDER, model: str = "exact") -> dict[str, float]:
    """Expected per-element MSE of block quantization of iid data with standard deviation ``sigma``.

    Returns ``{"non_max", "max_element", "zero_blocks", "total"}`` (``total`` is the sum), the three terms of
    the module docstring. ``dist``: ``"normal"`` (N(0, sigma^2)), ``"laplace"`` (scale ``sigma / sqrt 2``) or
    ``"student_t"`` (``df`` > 2 degrees of freedom, scaled to standard deviation ``sigma``). ``rule``: absmax or
    prevent_zero (four_over_six and brute_force depend on every element of a block: not tractable, ValueError).
    ``global_scale``: a given per-tensor scale ``g`` (block scales chosen on ``x / g``). ``order``: Gauss-Legendre
    nodes per sub-interval (8 agrees with 32 to ~1e-15 for normal data, ~1e-9 for Student-t with df 3).
    ``model``: ``"exact"`` (the non-max elements conditioned on the block max) or ``"paper"`` (the authors'
    model: the non-max elements truncated at ``top s``, :mod:`.paper_model`; the other two terms are the same).
    """
    sigma, n, g = _check_sigma(sigma), _check_block_size(block_size), _check_global_scale(global_scale)
    elem_name, scale_name = get_format(elem).name, get_format(scale).name
    check_rule(rule)
    steps, cells = scale_steps(scale_name, elem_name, rule), element_cells(elem_name)
    distribution = get_distribution(dist, df)
    zero, max_element, non_max = _standard_parts(sigma / g, n, distribution, steps, cells, _check_order(order),
                                                 check_model(model))
    variance = sigma * sigma
    parts = {"non_max": non_max * variance, "max_element": max_element * variance, "zero_blocks": zero * variance}
    parts["total"] = parts["non_max"] + parts["max_element"] + parts["zero_blocks"]
    return parts


def zero_block_probability(sigma: float, block_size: int, elem: str = "e2m1", scale: str = "ue4m3",
                           rule: str = "absmax", *, dist: str = "normal", global_scale: float | None = None,
                           df: float | None = None) -> float:
    """``P(s = 0) = G(t / sigma')^n``: the probability that a whole block rounds to zero through its scale
    (``t`` the largest block max whose scale rounds to 0, ``sigma' = sigma / g``). Normal data:
    ``erf(t / (sigma' sqrt 2))^n``; UE4M3 with E2M1, ``t = 3 * 2^-9``. 0 for prevent_zero and for scale formats
    without zero (E8M0)."""
    sigma, n, g = _check_sigma(sigma), _check_block_size(block_size), _check_global_scale(global_scale)
    check_rule(rule)
    steps = scale_steps(get_format(scale).name, get_format(elem).name, rule)
    distribution = get_distribution(dist, df)
    if steps.zero_max is None:
        return 0.0
    return math.exp(n * float(distribution.log_cdf(np.array(steps.zero_max / (sigma / g)))))
