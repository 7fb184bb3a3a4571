"""A slow, readable reference quantizer: nearest point of the listed value grid, in float64.

It shares nothing with the fast kernel in :mod:`.rounding` except the format's value list, so the test suite
uses it as an oracle (and a reviewer can too). Rounding ``"rne"``/``"away"`` and overflow policies are those of
:func:`common.formats.round_to_format`; the tie rule is written out literally: between neighbours ``lo < hi`` a tie goes
to the one that is an even multiple of ``hi - lo`` (``"rne"``) or to ``hi`` (``"away"``, on magnitudes).
Values beyond ``max`` are rounded against the continuation point ``max + ulp_at_max`` and overflow if they land
there. The full two's-complement integers (int3_tc, int4_tc) round negative inputs on the mirrored negative grid,
which reaches ``lowest = -max - 1``. Mid-rise formats (midrise2) are rounded on the signed grid, comparing ``x``
with the midpoint of its two neighbours; a tie goes to the neighbour whose two's-complement code ``(v - 1) / 2`` is
even (``"rne"``) or to the one of larger magnitude, +1 at the midpoint 0 (``"away"``).
"""

from __future__ import annotations

import numpy as np

from .registry import get_format
from .spec import Family, Format


def quantize_reference(x: np.ndarray, fmt: str | Format, *, rounding: str | None = None,
                       overflow: str = "saturate") -> np.ndarray:
    """float64 array of ``x`` rounded onto ``fmt``'s grid (formats of 8 bits or fewer; no stochastic rounding)."""
    fmt = get_format(fmt)
    rounding = fmt.default_rounding if rounding is None else rounding
    if rounding not in ("rne", "away"):
        raise ValueError(f"the reference quantizer covers rounding 'rne' and 'away', not {rounding!r}")
    x = np.asarray(x, dtype=np.float64)
    if fmt.family is Family.BINARY:
        return np.where(np.isnan(x), np.nan, np.where(x < 0, -1.0, 1.0))
    if fmt.family is Family.MIDRISE:
        return _midrise_reference(x, fmt, rounding)
    q = _magnitude_reference(x, fmt, fmt.finite_values[fmt.finite_values >= 0], rounding, overflow)
    if fmt.signed and not fmt.symmetric:  # two's complement: the negative side reaches lowest = -max - 1
        negative_grid = np.sort(-fmt.finite_values[fmt.finite_values <= 0])
        q = np.where(x < 0, _magnitude_reference(x, fmt, negative_grid, rounding, overflow), q)
    return q


def _midrise_reference(x: np.ndarray, fmt: Format, rounding: str) -> np.ndarray:
    """Nearest mid-rise level of signed ``x``, saturating (the formats have no Inf or NaN codes)."""
    grid = fmt.finite_values
    c = np.clip(x, grid[0], grid[-1])
    hi_index = np.clip(np.searchsorted(grid, c, side="right"), 1, grid.size - 1)
    lo, hi = grid[hi_index - 1], grid[hi_index]
    mid = (lo + hi) / 2
    # "rne": hi has the even code (v - 1) / 2; "away": away from zero, the midpoint 0 going to +1
    tie_hi = np.mod((hi - 1) / 2, 2) == 0 if rounding == "rne" else mid >= 0
    q = np.where((c > mid) | (c == mid) & tie_hi, hi, lo)
    return np.where(np.isnan(x), np.nan, q)


def _magnitude_reference(x: np.ndarray, fmt: Format, magnitudes: np.ndarray, rounding: str,
                         overflow: str) -> np.ndarray:
    """``x`` rounded by magnitude onto ``magnitudes`` (the non-negative grid of one sign), the sign restored."""
    top = float(magnitudes[-1])
    grid = np.append(magnitudes, top + fmt.ulp_at_max)  # the last point means "overflow"
    a = np.abs(x)
    hi_index = np.clip(np.searchsorted(grid, a, side="right"), 1, grid.size - 1)
    lo, hi = grid[hi_index - 1], grid[hi_index]
    below_grid = a < grid[0]  # only for formats without zero (E8M0): nearest is the smallest value
    gap = hi - lo
    with np.errstate(invalid="ignore"):
        lo_is_even = np.mod(np.round(lo / gap), 2) == 0
    d_lo, d_hi = a - lo, hi - a
    pick_hi = (d_hi < d_lo) | (d_hi == d_lo) & ~lo_is_even if rounding == "rne" else d_hi <= d_lo
    q = np.where(pick_hi, hi, lo)
    q = np.where(below_grid, grid[0], q)
    overflowed = (q > top) | (a >= grid[-1])
    if overflow == "saturate":
        q = np.where(overflowed, top, q)
    else:
        q = np.where(overflowed, np.inf if fmt.has_inf else np.nan, q)
    if not fmt.has_zero:
        q = np.where(a == 0, grid[0] if overflow == "saturate" else np.nan, q)
    q = np.where(np.isnan(x), np.nan, q)
    if not fmt.signed:
        negative = x < 0
        return np.where(negative, (grid[0] if overflow == "saturate" else np.nan), q)
    return np.copysign(q, x)
