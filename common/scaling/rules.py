"""Block scale selectors: pure functions with one signature, in a registry.

Every rule maps a 2-D float32 tensor of blocks ``(num_blocks, block_size)`` to one scale per block
``(num_blocks, 1)``; every returned scale is a value of the scale format, or 0 ("the block rounds to zero").
The block is then dequantized as ``s * Q_elem(b / s)`` (round-to-nearest-even, saturating) and as 0 when
``s = 0``. Notation: ``bmax = max |b|`` over the block, ``Q_S`` = round to nearest-even onto the scale format
(saturating at its max), ``top`` and ``second`` = the largest and second-largest positive element values
(6 and 4 for E2M1), ``SSE(s) = sum_i (b_i - s Q_elem(b_i / s))^2`` accumulated in float64.

``prevent_zero=True`` modifies every rule: each candidate scale that rounds to 0 becomes the smallest positive
scale value (2^-9 for UE4M3), so a block with a non-zero value never becomes all zeros through its scale.

Devices: every rule works on the blocks' device and returns its scales there. All rules but ``brute_force`` are
free of host synchronisations off the CPU: where the CPU path updates only the few rows that need it (found with
``nonzero``, cheap where the host is the device), other devices update every row with ``torch.where``, which gives
the same values (:func:`sparse_updates`). Brute force syncs once per call: the width of its candidate window and
the surviving (block, candidate) pairs are data-dependent sizes. Scales equal the CPU's bit for bit: divisions by
constants go through :func:`common.formats.quantize.divide` and the E8M0 powers of two through
:func:`common.formats.quantize.exact_exp2` (CUDA's scalar division and ``exp2`` are not the CPU's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from common.formats.quantize import chunk_elements, divide, exact_exp2, quantize_float32
from common.formats.spec import Family, Format
from common.registry import lookup

PAIR_BUDGET = 1 << 18  # elements evaluated at once by the brute-force search on CPUs (DEVICE_CHUNK elsewhere)
BOUND_ELEMENTS = 4  # brute force: elements of the partial-error lower bound


# ------------------------------------------------------------------------------------------------ helpers
def round_scale(raw: torch.Tensor, scale_fmt: Format, prevent_zero: bool) -> torch.Tensor:
    """``Q_S(raw)`` (nearest-even, saturating); with ``prevent_zero`` a 0 becomes the smallest positive scale."""
    s = quantize_float32(raw, scale_fmt, "rne", "saturate", None)
    if prevent_zero:
        s = torch.where(s == 0, scale_fmt.min_subnormal, s)
    return s


def dequantize_blocks(blocks: torch.Tensor, scales: torch.Tensor, elem_fmt: Format) -> torch.Tensor:
    """``s * Q_elem(b / s)`` for ``s > 0``, 0 for ``s = 0`` (a NaN scale, from a NaN in the block, gives NaN).

    A zero scale divides by 1 instead and multiplies the (finite, saturated) elements back by 0.
    """
    safe = scales.masked_fill(scales == 0, 1.0)
    return quantize_float32(blocks / safe, elem_fmt, "rne", "saturate", None).mul_(scales)


def block_error(blocks: torch.Tensor, dequantized: torch.Tensor, criterion: str = "mse") -> torch.Tensor:
    """Per-block ``sum (b - b')^2`` (``"mse"``) or ``sum |b - b'|`` (``"mae"``), float64, shape ``(n, 1)``."""
    diff = (blocks - dequantized).double()
    err = diff.square_() if criterion == "mse" else diff.abs_()
    return err.sum(dim=-1, keepdim=True)


def block_amax(blocks: torch.Tensor) -> torch.Tensor:
    """``max |b|`` per block, NaN if the block holds a NaN (so that the NaN poisons its block)."""
    return blocks.abs().amax(dim=-1, keepdim=True)


def top_values(elem_fmt: Format) -> tuple[float, float]:
    """The two largest positive element values (6 and 4 for E2M1); a format with one positive value (binary,
    ternary) gives it twice, which makes four_over_six abs-max."""
    positive = elem_fmt.finite_values[elem_fmt.finite_values > 0]
    return float(positive[-1]), float(positive[-2] if positive.size > 1 else positive[-1])


def sparse_updates(t: torch.Tensor) -> bool:
    """Whether rules may update a data-dependent subset of rows of ``t`` (``nonzero``, then index ops): on CPUs,
    where reading the subset's size costs nothing; on other devices that read is a host synchronisation, and the
    rules update every row with ``torch.where`` instead (same values, more arithmetic)."""
    return t.device.type == "cpu"


@cache
def positive_values(fmt: Format, device: torch.device) -> torch.Tensor:
    """The positive finite values of ``fmt``, ascending, float32 on ``device`` (cached per format and device)."""
    return torch.tensor(fmt.finite_values[fmt.finite_values > 0], dtype=torch.float32, device=device)


def is_power_of_two_format(fmt: Format) -> bool:
    return fmt.family is Family.FLOAT and fmt.mantissa_bits == 0


def _floor_log2(x: torch.Tensor) -> torch.Tensor:
    """Exact ``floor(log2 x)`` for positive finite float32 (via frexp, not a rounded log)."""
    _, exponent = torch.frexp(x)
    return (exponent - 1).float()


# -------------------------------------------------------------------------------------------------- rules
def absmax(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False) -> torch.Tensor:
    """``s = Q_S(bmax / top)``: the block max maps to the largest element value (the OCP/NVFP4 default)."""
    return round_scale(divide(block_amax(blocks), elem_fmt.max), scale_fmt, prevent_zero)


def unit(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False) -> torch.Tensor:
    """``s = 1`` for every block: no block scaling, the elements carry the values themselves. With a global scale
    it is plain per-tensor (or per-row) scaling ``Q(x / g) * g``, e.g. HiF8 W8A8's ``g = amax / 15`` (scale
    ``15 / amax``, Max-Window paper) with ``global_target=15``. ``prevent_zero`` changes nothing (1 is not 0)."""
    return torch.ones(blocks.shape[0], 1, dtype=torch.float32, device=blocks.device)


def prevent_zero_rule(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *,
                      prevent_zero: bool = True) -> torch.Tensor:
    """abs-max whose zero scales become the smallest positive scale (Finer is Better's prevent-zero)."""
    return absmax(blocks, scale_fmt, elem_fmt, prevent_zero=True)


def four_over_six(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
                  criterion: str = "mse") -> torch.Tensor:
    """4/6 adaptive scaling (Four Over Six, arXiv 2512.02010).

    Candidates ``s_top = Q_S(bmax / top)`` and ``s_second = Q_S(bmax / second)`` (E2M1: bmax/6 and bmax/4);
    ``s_second`` is chosen iff its block error is *strictly* smaller (ties go to ``s_top``). For power-of-two
    scale formats (E8M0) the candidates are the OCP floor and the round-up (rceil) scale, ties to rceil, as in
    the public code matching the Finer-is-Better setup. ``criterion``: ``"mse"`` (default) or ``"mae"``.
    """
    return four_over_six_with_values(blocks, scale_fmt, elem_fmt, prevent_zero=prevent_zero, criterion=criterion)[0]


def four_over_six_with_values(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *,
                              prevent_zero: bool = False, criterion: str = "mse") -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`four_over_six` and the dequantized blocks of the winning candidate (computed anyway).

    Both candidates are evaluated on magnitudes in element units, ``y = |b| / s``: the block error is
    ``s^2 sum (y - Q(y))^2`` (MAE: ``s sum |y - Q(y)|``), decided in float32 where the two errors differ by
    more than 1e-4 relative (far beyond float32 rounding) and re-decided exactly, as float64 sums of
    ``(|b| - s Q(y))^2``, for the few near-ties (exact ties included): on CPUs for those rows only, elsewhere for
    every row, kept where the row is a near-tie (:func:`sparse_updates`; the same decisions).
    """
    if criterion not in ("mse", "mae"):
        raise ValueError(f"unknown criterion {criterion!r}; valid criteria: mse, mae")
    magnitudes = blocks.abs()
    if is_power_of_two_format(scale_fmt):
        s_top = e8m0_rceil(blocks, scale_fmt, elem_fmt, prevent_zero=prevent_zero)
        s_second = e8m0_floor(blocks, scale_fmt, elem_fmt, prevent_zero=prevent_zero)
    else:
        top, second = top_values(elem_fmt)
        bmax = magnitudes.amax(dim=-1, keepdim=True)
        s_top = round_scale(divide(bmax, top), scale_fmt, prevent_zero)
        s_second = round_scale(divide(bmax, second), scale_fmt, prevent_zero)
    q_top, err_top = _element_values_and_error(magnitudes, s_top, elem_fmt, criterion)
    q_second, err_second = _element_values_and_error(magnitudes, s_second, elem_fmt, criterion)
    pick_second = err_second < err_top
    near = (err_second - err_top).abs() <= 1e-4 * torch.maximum(err_second, err_top)
    if not sparse_updates(blocks):
        exact_second, exact_top = (block_error(magnitudes, q * s, criterion)
                                   for q, s in ((q_second, s_second), (q_top, s_top)))
        pick_second = torch.where(near, exact_second < exact_top, pick_second)
        scales = torch.where(pick_second, s_second, s_top)
        return scales, torch.where(pick_second, q_second, q_top).mul_(scales).copysign_(blocks)
    near_rows = near.squeeze(1).nonzero()
    if near_rows.numel():
        rows = near_rows.squeeze(1)
        exact = [block_error(magnitudes.index_select(0, rows), q.index_select(0, rows) * s.index_select(0, rows),
                             criterion) for q, s in ((q_second, s_second), (q_top, s_top))]
        pick_second.index_copy_(0, rows, exact[0] < exact[1])
    scales = torch.where(pick_second, s_second, s_top)
    rows = pick_second.squeeze(1).nonzero().squeeze(1)  # overwrite only the rows that pick the second
    values = q_top.index_copy_(0, rows, q_second.index_select(0, rows))
    return scales, values.mul_(scales).copysign_(blocks)


def _element_values_and_error(magnitudes: torch.Tensor, scales: torch.Tensor, elem_fmt: Format,
                              criterion: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``Q(|b| / s)`` (0 where ``s = 0``) and the block error in data units (float64, shape ``(n, 1)``)."""
    zero = scales == 0
    safe = scales.masked_fill(zero, 1.0)
    y = magnitudes / safe
    q = quantize_float32(y, elem_fmt, "rne", "saturate", None, nonnegative=True)
    if not sparse_updates(q) or bool(zero.any()):
        q.masked_fill_(zero.expand_as(q), 0.0)
    diff = y.sub_(q)
    if criterion == "mse":
        return q, diff.square_().sum(dim=-1, keepdim=True).double() * safe.double().square()
    return q, diff.abs_().sum(dim=-1, keepdim=True).double() * safe.double()


def brute_force(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *,
                prevent_zero: bool = False) -> torch.Tensor:
    """The positive scale value with the smallest block SSE, searched over *every* value of the scale format.

    Ties go to the smallest scale. The search is exact but skips candidates that provably lose against
    ``r``, the better of the two prevent-zero 4/6 candidates, whose error ``SSE(r)`` bounds the optimum:

    * ``s < (bmax - sqrt(SSE(r))) / top``: the block max alone clips by more than ``sqrt(SSE(r))``;
    * ``s > 2 bmax / min_elem``: every element rounds to zero, ``SSE(s) = sum b^2 >= SSE(r)``, and a smaller
      scale ties or wins (a block where every candidate is of this kind gets the smallest scale);
    * any other ``s`` whose error on the block's largest few elements alone (the top ``BOUND_ELEMENTS`` by
      magnitude: a lower bound on its SSE) exceeds ``SSE(r)``.

    The remaining (block, candidate) pairs are evaluated in full. The pruning makes the work data-dependent: one
    host synchronisation per call reads the window width and the number of survivors (module docstring).
    """
    device = blocks.device
    candidates = positive_values(scale_fmt, device)
    n_cand, n_blocks = candidates.numel(), blocks.shape[0]
    bmax = block_amax(blocks)
    top, second = top_values(elem_fmt)
    bound = torch.minimum(  # the better of the two 4/6 candidates: a tight bound prunes more
        block_error(blocks, dequantize_blocks(blocks, round_scale(divide(bmax, top), scale_fmt, True), elem_fmt)),
        block_error(blocks, dequantize_blocks(blocks, round_scale(divide(bmax, second), scale_fmt, True), elem_fmt)))
    min_elem = float(elem_fmt.finite_values[elem_fmt.finite_values > 0][0])
    s_low = divide(bmax.double() - bound.sqrt(), top) * (1 - 1e-9)
    s_high = divide(2.0 * bmax.double(), min_elem) * (1 + 1e-9)
    lo = torch.searchsorted(candidates.double(), s_low.nan_to_num(0.0), side="left")
    hi = torch.searchsorted(candidates.double(), s_high.nan_to_num(0.0), side="right")
    width = int((hi - lo).max().clamp(min=0)) if n_blocks else 0
    offsets = torch.arange(width, device=device)
    cand_index = (lo + offsets).clamp_(max=n_cand - 1)
    in_window = offsets < (hi - lo)
    largest = blocks.abs().topk(min(BOUND_ELEMENTS, blocks.shape[1]), dim=1).values
    largest_pairs = largest.unsqueeze(1).expand(-1, width, -1).reshape(n_blocks * width, largest.shape[1])
    pair_scales = candidates.index_select(0, cand_index.reshape(-1)).unsqueeze(1)
    dq = dequantize_blocks(largest_pairs, pair_scales, elem_fmt)
    partial_error = (largest_pairs - dq).square_().sum(dim=1)  # float32: a bound needs no float64
    # the slack covers float32 rounding of a few squares: never prune a candidate that could tie
    survivors = (in_window & (partial_error.view(n_blocks, width) <= (bound * (1 + 1e-5)).float())).nonzero()
    block_index, cand_index = survivors[:, 0], cand_index[survivors[:, 0], survivors[:, 1]]
    sse = torch.empty(block_index.numel(), dtype=torch.float64, device=device)
    step = max(1, chunk_elements(device, PAIR_BUDGET) // blocks.shape[1])
    for start in range(0, block_index.numel(), step):
        b = blocks.index_select(0, block_index[start : start + step])
        s = candidates.index_select(0, cand_index[start : start + step]).unsqueeze(1)
        sse[start : start + step] = block_error(b, dequantize_blocks(b, s, elem_fmt)).squeeze(1)
    best = torch.full((n_blocks,), float("inf"), dtype=torch.float64, device=device).scatter_reduce_(
        0, block_index, sse, reduce="amin")
    winner = torch.where(sse == best[block_index], cand_index, n_cand)
    chosen = torch.full((n_blocks,), n_cand, dtype=torch.long, device=device).scatter_reduce_(
        0, block_index, winner, reduce="amin")
    scales = candidates[chosen.masked_fill_(chosen == n_cand, 0)].unsqueeze(1)
    return torch.where(bmax.isnan(), bmax, scales)


def e8m0_floor(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *,
               prevent_zero: bool = False) -> torch.Tensor:
    """OCP MX "floor": ``s = 2^(floor(log2 bmax) - floor(log2 top))`` (E2M1: exponent - 2), so
    ``bmax / s`` lies in ``[2^k, 2^(k+1))``, ``k = floor(log2 top)`` (E2M1: [4, 8)) and the block max may saturate.
    An all-zero block gets the smallest scale."""
    bmax = block_amax(blocks)
    top_exponent = math.frexp(elem_fmt.max)[1] - 1  # floor(log2 top), exact from frexp
    raw = torch.where(bmax > 0, exact_exp2(torch.frexp(bmax).exponent - 1 - top_exponent), 0.0)
    return round_scale(torch.where(bmax.isfinite(), raw, bmax), scale_fmt, prevent_zero)


def e8m0_rceil(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *,
               prevent_zero: bool = False) -> torch.Tensor:
    """Round-up ("RCEIL", cuBLAS): ``s = 2^ceil(log2(bmax / top))`` on the float32 ratio, so the block max never
    saturates (``bmax / s <= top``)."""
    ratio = divide(block_amax(blocks), elem_fmt.max)
    mantissa, exponent = torch.frexp(ratio)
    ceil_log2 = torch.where(mantissa == 0.5, exponent - 1, exponent)
    raw = torch.where(ratio > 0, exact_exp2(ceil_log2), 0.0)
    return round_scale(torch.where(ratio.isfinite(), raw, ratio), scale_fmt, prevent_zero)


# ----------------------------------------------------------------------------------------------- registry
ScaleSelector = Callable[..., torch.Tensor]


def full_range(scale_fmt: Format, elem_fmt: Format) -> float:
    """Largest block scale a global scale should leave room for: the scale format's max (NVFP4)."""
    return scale_fmt.max


def four_over_six_range(scale_fmt: Format, elem_fmt: Format) -> float:
    """4/6 keeps ``(top/second) * s`` representable: the largest power of two <= ``scale_max * second / top``
    (256 for UE4M3 and E2M1, as in Four Over Six's ``g = amax / (6 * 256)``)."""
    top, second = top_values(elem_fmt)
    return float(2.0 ** _floor_log2(torch.tensor(scale_fmt.max * second / top)).item())


def unit_range(scale_fmt: Format, elem_fmt: Format) -> float:
    """The unit rule's block scales are 1: by default a global scale maps amax to the element format's max."""
    return 1.0


@dataclass(frozen=True)
class ScaleRule:
    """A registered scale rule.

    ``select``: the selector; ``global_range``: the block-scale range a two-level (global) scale targets;
    ``select_with_values``: optional fused variant returning ``(scales, dequantized blocks)`` for rules that
    dequantize their winning candidate anyway (saves quantize_blocks one pass; same results).
    """

    name: str
    select: ScaleSelector
    global_range: Callable[[Format, Format], float] = full_range
    select_with_values: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None


RULES: dict[str, ScaleRule] = {
    rule.name: rule
    for rule in (
        ScaleRule("absmax", absmax),
        ScaleRule("prevent_zero", prevent_zero_rule),
        ScaleRule("four_over_six", four_over_six, four_over_six_range, four_over_six_with_values),
        ScaleRule("brute_force", brute_force),
        ScaleRule("e8m0_floor", e8m0_floor),
        ScaleRule("e8m0_rceil", e8m0_rceil),
        ScaleRule("unit", unit, unit_range),
    )
}


def get_rule(name: str | ScaleRule) -> ScaleRule:
    return name if isinstance(name, ScaleRule) else lookup(RULES, name, "scale rule")
