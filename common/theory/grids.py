"""The quantizers of block scaling as step functions: element cells and block-scale steps (cached per format).

Element quantizer ``Q_E`` (round to nearest on the element grid, saturating at ``+-top``), on magnitudes: with
``0 <= q_0 < q_1 < ... < q_K = top`` the non-negative grid values and ``mid_j = (q_j + q_{j+1}) / 2``, a
magnitude ``y`` in cell ``j`` -- ``[mid_{j-1}, mid_j)`` with ``mid_{-1} = 0`` and ``mid_K = inf`` (saturation)
-- becomes ``q_j``. Ties (``y = mid_j``) have probability zero for continuous data and are not needed.

Block scale ``s(M) = Q_S(M / top)`` for the abs-max rule: ``Q_S`` rounds to nearest on the scale format's
non-negative grid ``v_0 < ... < v_L``, ties to the neighbour that is an even multiple of the gap (as
:func:`common.formats.round_to_format` with ``rounding="rne"``), saturating at ``v_L``; a raw scale below ``v_0`` (a
format without zero, E8M0) becomes ``v_0``. So ``s`` is a step function of ``M`` with steps at
``top * (v_k + v_{k+1}) / 2``. ``prevent_zero`` replaces the scale 0 by the smallest positive value.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from common.formats import Format, get_format
from common.formats.spec import Family

THEORY_RULES = ("absmax", "prevent_zero")
INTRACTABLE_RULES = {
    "four_over_six": "its choice between two scales depends on the error of every element of the block",
    "brute_force": "its scale minimizes the error over every element of the block",
}


@dataclass(frozen=True)
class ElementCells:
    """Non-negative element grid ``q`` (``q[-1] = top``), cell lower edges ``lowers = [0, mid_0, ...]`` and
    ``mids`` (``K`` values: ``len(q) - 1``); ``top`` is the element format's max."""

    q: np.ndarray
    lowers: np.ndarray
    mids: np.ndarray
    top: float


@dataclass(frozen=True)
class ScaleSteps:
    """Block scale as a step function of the block max ``M`` (data units, before any global scale):
    ``values[k]`` on ``[bounds[k-1], bounds[k])`` with ``bounds[-1] = 0`` and ``bounds[L] = inf``; ``zero_max``:
    the largest ``M`` whose scale is 0 (None when no block can become zero)."""

    bounds: np.ndarray
    values: np.ndarray
    zero_max: float | None


def _grid(fmt: Format, role: str) -> np.ndarray:
    if not fmt.is_codebook:
        raise ValueError(f"{role} format {fmt.name!r} has {fmt.bits} bits: the theory needs the value grid of a "
                         "format of 8 bits or fewer")
    values = fmt.finite_values
    return values[values >= 0]


@lru_cache(maxsize=64)
def element_cells(elem: str) -> ElementCells:
    """The :class:`ElementCells` of a signed element format (symmetric grid, so ``|x|`` is enough)."""
    fmt = get_format(elem)
    if fmt.family is not Family.BINARY and not fmt.signed:
        raise ValueError(f"element format {fmt.name!r} is unsigned: block quantization needs a signed element "
                         "format")
    if not fmt.symmetric:  # the cells are of |x|: a two's-complement grid (int4_tc: -8 .. 7) is not one
        raise ValueError(f"element format {fmt.name!r} is not symmetric (lowest {fmt.lowest:g}, max {fmt.max:g}): "
                         "the theory quantizes magnitudes")
    q = _grid(fmt, "element") if fmt.family is not Family.BINARY else np.array([1.0])
    mids = (q[:-1] + q[1:]) / 2
    for array in (q, mids):
        array.setflags(write=False)
    lowers = np.concatenate(([0.0], mids))
    lowers.setflags(write=False)
    return ElementCells(q=q, lowers=lowers, mids=mids, top=float(q[-1]))


def check_rule(rule: str) -> bool:
    """``prevent_zero`` flag of a theory rule; a ``ValueError`` naming any other rule."""
    if not isinstance(rule, str):
        raise ValueError(f"rule must be a rule name, got {rule!r}; the theory covers {', '.join(THEORY_RULES)}")
    if rule in INTRACTABLE_RULES:
        raise ValueError(f"rule {rule!r} is not tractable exactly: {INTRACTABLE_RULES[rule]}; "
                         f"the theory covers {', '.join(THEORY_RULES)}")
    if rule not in THEORY_RULES:
        raise ValueError(f"unknown rule {rule!r} for the theory; valid rules: {', '.join(THEORY_RULES)}")
    return rule == "prevent_zero"


@lru_cache(maxsize=64)
def scale_steps(scale: str, elem: str, rule: str = "absmax") -> ScaleSteps:
    """The :class:`ScaleSteps` of ``rule`` (absmax or prevent_zero) with ``scale`` block scales (module docstring)."""
    prevent_zero = check_rule(rule)
    v = _grid(get_format(scale), "scale")
    top = element_cells(elem).top
    bounds = top * (v[:-1] + v[1:]) / 2
    values = v.copy()
    zero_max = float(bounds[0]) if values[0] == 0 else None
    if prevent_zero and values[0] == 0:
        values[0], zero_max = values[1], None
    for array in (bounds, values):
        array.setflags(write=False)
    return ScaleSteps(bounds=bounds, values=values, zero_max=zero_max)


def quantize_scale(raw: np.ndarray | float, scale: str | Format) -> np.ndarray:
    """``Q_S(raw)`` for ``raw >= 0`` in float64: nearest value of the scale grid, ties to the neighbour that is an
    even multiple of the gap, saturating (the rounding :func:`common.formats.round_to_format` does with ``"rne"``)."""
    v = _grid(get_format(scale), "scale")
    r = np.clip(np.asarray(raw, np.float64), v[0], v[-1])
    i = np.clip(np.searchsorted(v, r, side="right") - 1, 0, v.size - 1)
    lo, hi = v[i], v[np.minimum(i + 1, v.size - 1)]
    gap = np.where(hi > lo, hi - lo, 1.0)
    tie_to_hi = np.round(lo / gap) % 2 == 1
    mid = (lo + hi) / 2
    return np.where((r > mid) | ((r == mid) & tie_to_hi & (hi > lo)), hi, lo)


def zero_scale_max(scale: str, elem: str = "e2m1") -> float | None:
    """Largest block max whose abs-max scale rounds to zero: ``top * v_1 / 2`` when the tie goes to 0 (UE4M3 and
    E2M1: ``6 * 2^-10 = 3 * 2^-9``; a tie between 0 and ``v_1`` always goes to 0, the even multiple); None for a
    scale format without zero."""
    return scale_steps(get_format(scale).name, get_format(elem).name, "absmax").zero_max
