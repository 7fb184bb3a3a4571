"""Block scale selectors: pure functions with one signature, in a registry.

Every rule maps a 2-D float32 tensor of blocks ``(num_blocks, block_size)`` to one scale per block
``(num_blocks, 1)``; every returned scale is a value of the scale format, or 0 ("the block rounds to zero").
The block is then dequantized as ``s * Q_elem(b / s)`` (round-to-nearest-even, saturating) and as 0 when
``s = 0``. Notation: ``bmax = max |b|`` over the block, ``Q_S`` = round to nearest-even onto the scale format
(saturating at its max), ``top`` and ``second`` = the largest and second-largest positive element values
(6 and 4 for E2M1), ``SSE(s) = sum_i (b_i - s Q_elem(b_i / s))^2`` accumulated in float64.

``prevent_zero=True`` modifies every rule: each candidate scale that rounds to 0 becomes the smallest positive
scale value (2^-9 for UE4M3), so a block with a non-zero value never becomes all zeros through its scale.

Numerics conventions (keywords of every rule and of :func:`common.scaling.quantize_blocks`; the defaults are this
project's; :mod:`common.scaling.conventions` names the sets, with the *Finer is Better* authors' code
``clee1994/finer_is_better`` ``torch_eval.py`` at commit 0080284 as the other):

* ``ties="even"`` (default): elements and scales round to nearest, ties to even (``Q_S`` above). ``ties="down"``:
  ties toward zero (rounding ``"half_down"`` of :mod:`common.formats.rounding`) for the elements and for every
  scale format but those in :data:`CAST_ROUNDED_SCALES` (UE4M3/E4M3, BF16), which stay nearest-even. That is the
  authors' split: they round E2M1 elements (lines 282-287) and the UE5M3/E8M0 scale grids (lines 130-143) by
  ``torch.bucketize`` on the grid's midpoints (a tie lands in the lower bucket: the smaller magnitude), but E4M3
  scales by the ``float8_e4m3fn`` cast (line 108; round to nearest even) and BF16 scales by a bfloat16 cast.
* ``compute_dtype="bfloat16"``: the authors' eager PyTorch arithmetic on a bfloat16 model (:class:`Arithmetic`);
  None or ``"float32"`` (default) computes in float32 as before.
* ``e8m0_candidates`` (four_over_six with a power-of-two scale format): ``"ocp"`` (default) the OCP floor and the
  round-up (rceil) scale; ``"floor_ceil"`` the authors' floor and ceiling of ``bmax / top`` on the power-of-two
  grid (lines 324-327).

Devices: every rule works on the blocks' device and returns its scales there. All rules but ``brute_force`` are
free of host synchronisations off the CPU: where the CPU path updates only the few rows that need it (found with
``nonzero``, cheap where the host is the device), other devices update every row with ``torch.where``, which gives
the same values (:func:`sparse_updates`). Brute force syncs once per call: the width of its candidate window and
the surviving (block, candidate) pairs are data-dependent sizes. Scales equal the CPU's bit for bit: divisions by
constants go through :func:`common.formats.rounding.divide` and the E8M0 powers of two through
:func:`common.formats.rounding.exact_exp2` (CUDA's scalar division and ``exp2`` are not the CPU's). The one
exception is four_over_six's decision under ``compute_dtype="bfloat16"``, a float32 ``torch.mean`` as the authors
take it (:class:`Arithmetic`, step 6).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch

from common.formats.rounding import chunk_elements, divide, exact_exp2, quantize_float32
from common.formats.spec import Format
from common.registry import lookup

from .conventions import E8M0_CANDIDATES, RULE_OPTIONS, check_numerics, is_power_of_two_format

PAIR_BUDGET = 1 << 18  # elements evaluated at once by the brute-force search on CPUs (DEVICE_CHUNK elsewhere)
BOUND_ELEMENTS = 4  # brute force: elements of the partial-error lower bound
# scale formats the Finer-is-Better code rounds by a torch dtype cast (nearest even, whatever the ties), keeping the
# data's dtype: float8_e4m3fn (torch_eval.py:106-112) and bfloat16 (:113-119); every other format is rounded by
# midpoint bucketing on a float32 grid (:130-143)
CAST_ROUNDED_SCALES = frozenset({"e4m3", "ue4m3", "bf16"})


@dataclass(frozen=True)
class Arithmetic:
    """How a rule rounds: the tie rule and the emulated compute dtype (ValueError naming a bad value).

    ``compute_dtype="float32"``: every intermediate in float32, as this project computes (exact divisions by
    constants, :func:`divide`). ``"bfloat16"``: PyTorch's eager bf16 ops as the *Finer is Better* authors run
    them on a bf16 model (``clee1994/finer_is_better`` ``torch_eval.py`` at 0080284; the model is loaded in bf16 at
    line 383). A bf16 op computes in float32 and rounds its result to bf16 once (nearest even), which
    :meth:`op` reproduces; PyTorch's type promotion decides which results are bf16: an op whose operands are all
    bf16 (or bf16 and a Python number) is rounded, one with a float32 tensor operand stays float32. In their order:

    1. the hierarchical scale ``c = max|x| / T`` and ``x / c`` (lines 259-276): bf16;
    2. ``bmax / 6`` (lines 289-295, 312-330; their ``max_abs`` is clamped below at 1e-7, which changes no
       E4M3/UE5M3 result) and 4/6's ``(bmax / 6) * 1.5`` (line 329): bf16, two roundings;
    3. the scale: the E4M3 cast keeps bf16 (line 108), the UE5M3/E8M0 grids are float32 (lines 67, 143);
    4. ``x / s`` (line 306, 217): bf16 when ``s`` is bf16 (E4M3: :meth:`scaled`), else float32;
    5. bucketize (float32 grid, line 285-286) and ``q * s`` (lines 310, 220): float32, exact;
    6. 4/6's choice: ``mean((x - q s)^2)`` over the block in float32, the 4 candidate iff strictly smaller (lines
       229-232), by their op: ``torch.mean`` of float32 on the blocks' device. Its float32 summation order is
       the device kernel's, and it decides exact ties whose block errors round apart (rare: one block of 2048 at
       block 32 in a bf16 Normal test tensor had two candidates of equal exact SSE, one float32 sum an ulp lower).
       This is the one place where results may differ between devices, as the authors' would;
    7. ``* c`` (line 338) in float32, the result cast to bf16 (line 340).

    The divisions by the Python constants 6 and ``T`` (448, 61440) equal CUDA's, which multiplies by the float32
    reciprocal: ``bf16(m / d) == bf16(m * fp32(1 / d))`` for every positive normal bf16 ``m`` (checked exhaustively).
    """

    ties: str = "even"
    compute_dtype: str = "float32"

    def __post_init__(self) -> None:
        check_numerics(self.ties, self.compute_dtype)  # ties and compute dtype from common.scaling.conventions

    @classmethod
    def of(cls, ties: str = "even", compute_dtype: str | None = None) -> Arithmetic:
        """The arithmetic of the keyword options (``compute_dtype=None`` is float32)."""
        return cls(ties, "float32" if compute_dtype is None else compute_dtype)

    @property
    def bfloat16(self) -> bool:
        return self.compute_dtype == "bfloat16"

    @property
    def element_rounding(self) -> str:
        """The rounding of element values: ``"rne"`` (ties even) or ``"half_down"`` (ties down)."""
        return "rne" if self.ties == "even" else "half_down"

    def scale_rounding(self, scale_fmt: Format) -> str:
        """The rounding of ``scale_fmt`` scales: nearest even for ties even and for :data:`CAST_ROUNDED_SCALES`,
        else ``"half_down"``."""
        return "rne" if self.ties == "even" or scale_fmt.name in CAST_ROUNDED_SCALES else "half_down"

    def op(self, t: torch.Tensor) -> torch.Tensor:
        """The float32 result ``t`` of one op as the compute dtype leaves it: as is, or rounded to bf16 (RNE)."""
        return t.bfloat16().float() if self.bfloat16 else t

    def scaled(self, y: torch.Tensor, scale_fmt: Format) -> torch.Tensor:
        """The quotient ``x / s``: rounded to bf16 only when the scale tensor is bf16 too (a cast-rounded format)."""
        return self.op(y) if scale_fmt.name in CAST_ROUNDED_SCALES else y


# ------------------------------------------------------------------------------------------------ helpers
def round_scale(raw: torch.Tensor, scale_fmt: Format, prevent_zero: bool, *, ties: str = "even") -> torch.Tensor:
    """``Q_S(raw)`` (nearest, saturating; ties as :meth:`Arithmetic.scale_rounding` says: even by default); with
    ``prevent_zero`` a 0 becomes the smallest positive scale."""
    s = quantize_float32(raw, scale_fmt, Arithmetic(ties).scale_rounding(scale_fmt), "saturate", None)
    if prevent_zero:
        s = torch.where(s == 0, scale_fmt.min_subnormal, s)
    return s


def dequantize_blocks(blocks: torch.Tensor, scales: torch.Tensor, elem_fmt: Format, *, ties: str = "even",
                      compute_dtype: str | None = None, scale_fmt: Format | None = None) -> torch.Tensor:
    """``s * Q_elem(b / s)`` for ``s > 0``, 0 for ``s = 0`` (a NaN scale, from a NaN in the block, gives NaN).

    A zero scale divides by 1 instead and multiplies the (finite, saturated) elements back by 0. ``ties`` rounds
    the elements (:class:`Arithmetic`); with ``compute_dtype="bfloat16"`` the quotient ``b / s`` is rounded to bf16
    when ``scale_fmt`` is one of :data:`CAST_ROUNDED_SCALES` (the authors' scale tensor is then bf16), so
    ``scale_fmt`` is required there.
    """
    return _dequantize(blocks, scales, elem_fmt, scale_fmt, Arithmetic.of(ties, compute_dtype))


def _dequantize(blocks: torch.Tensor, scales: torch.Tensor, elem_fmt: Format, scale_fmt: Format | None,
                arithmetic: Arithmetic) -> torch.Tensor:
    """:func:`dequantize_blocks` with its arithmetic resolved."""
    safe = scales.masked_fill(scales == 0, 1.0)
    quotient = blocks / safe
    if arithmetic.bfloat16:
        if scale_fmt is None:
            raise ValueError("dequantize_blocks with compute_dtype='bfloat16' needs scale_fmt: whether b / s is "
                             "rounded to bf16 depends on the scale format")
        quotient = arithmetic.scaled(quotient, scale_fmt)
    return quantize_float32(quotient, elem_fmt, arithmetic.element_rounding, "saturate", None).mul_(scales)


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


def _floor_log2(x: torch.Tensor) -> torch.Tensor:
    """Exact ``floor(log2 x)`` for positive finite float32 (via frexp, not a rounded log)."""
    _, exponent = torch.frexp(x)
    return (exponent - 1).float()


# -------------------------------------------------------------------------------------------------- rules
def absmax(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
           ties: str = "even", compute_dtype: str | None = None) -> torch.Tensor:
    """``s = Q_S(bmax / top)``: the block max maps to the largest element value (the OCP/NVFP4 default)."""
    arithmetic = Arithmetic.of(ties, compute_dtype)
    return round_scale(arithmetic.op(divide(block_amax(blocks), elem_fmt.max)), scale_fmt, prevent_zero, ties=ties)


def unit(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
         ties: str = "even", compute_dtype: str | None = None) -> torch.Tensor:
    """``s = 1`` for every block: no block scaling, the elements carry the values themselves. With a global scale
    it is plain per-tensor (or per-row) scaling ``Q(x / g) * g``, e.g. HiF8 W8A8's ``g = amax / 15`` (scale
    ``15 / amax``, Max-Window paper) with ``global_target=15``. ``prevent_zero`` changes nothing (1 is not 0), nor
    do ``ties`` and ``compute_dtype`` (nothing is rounded here; they are checked)."""
    Arithmetic.of(ties, compute_dtype)
    return torch.ones(blocks.shape[0], 1, dtype=torch.float32, device=blocks.device)


def prevent_zero_rule(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = True,
                      ties: str = "even", compute_dtype: str | None = None) -> torch.Tensor:
    """abs-max whose zero scales become the smallest positive scale (Finer is Better's prevent-zero)."""
    return absmax(blocks, scale_fmt, elem_fmt, prevent_zero=True, ties=ties, compute_dtype=compute_dtype)


def four_over_six(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
                  criterion: str = "mse", ties: str = "even", compute_dtype: str | None = None,
                  e8m0_candidates: str = "ocp") -> torch.Tensor:
    """4/6 adaptive scaling (Four Over Six, arXiv 2512.02010).

    Candidates ``s_top = Q_S(bmax / top)`` and ``s_second = Q_S(bmax / second)`` (E2M1: bmax/6 and bmax/4;
    with ``compute_dtype="bfloat16"`` the authors' ``bf16(bf16(bmax / 6) * 1.5)``, :class:`Arithmetic`);
    ``s_second`` is chosen iff its block error is *strictly* smaller (ties go to ``s_top``). For power-of-two
    scale formats (E8M0) ``e8m0_candidates`` names the pair, ties to the larger scale in both:

    * ``"ocp"`` (default): ``s_top`` the round-up (rceil) scale ``2^ceil(log2(bmax / top))`` and ``s_second``
      the OCP floor ``2^(floor(log2 bmax) - floor(log2 top))``, so ``bmax / s`` lies in (3, 6] and [4, 8) for
      E2M1: they differ only where ``bmax / rceil`` is in (3, 4). This is our choice, not the public code's.
    * ``"floor_ceil"``: the *Finer is Better* authors' pair (``clee1994/finer_is_better`` ``torch_eval.py`` at
      0080284, lines 324-327, ``quantize_scale_simulate`` rounding "floor" and "ceil" of ``bmax / 6`` on the
      power-of-two grid): the same ``s_top`` and ``s_second = 2^floor(log2(bmax / top))``, half of ``s_top``
      unless ``bmax / top`` is a power of two (``bmax / s`` in [6, 12) for E2M1: the block max clips).

    ``criterion``: ``"mse"`` (default) or ``"mae"``.
    """
    return four_over_six_with_values(blocks, scale_fmt, elem_fmt, prevent_zero=prevent_zero, criterion=criterion,
                                     ties=ties, compute_dtype=compute_dtype, e8m0_candidates=e8m0_candidates)[0]


def four_over_six_with_values(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *,
                              prevent_zero: bool = False, criterion: str = "mse", ties: str = "even",
                              compute_dtype: str | None = None,
                              e8m0_candidates: str = "ocp") -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`four_over_six` and the dequantized blocks of the winning candidate (computed anyway).

    Both candidates are evaluated on magnitudes in element units, ``y = |b| / s``: the block error is
    ``s^2 sum (y - Q(y))^2`` (MAE: ``s sum |y - Q(y)|``), decided in float32 where the two errors differ by
    more than 1e-4 relative (far beyond float32 rounding) and re-decided exactly, as float64 sums of
    ``(|b| - s Q(y))^2``, for the few near-ties (exact ties included): on CPUs for those rows only, elsewhere for
    every row, kept where the row is a near-tie (:func:`sparse_updates`; the same decisions). With
    ``compute_dtype="bfloat16"`` the decision is the authors' instead: the float32 mean of the float32
    ``(|b| - s Q(y))^2`` (MAE: of the absolute differences), strictly smaller (:class:`Arithmetic`, step 6).
    """
    if criterion not in ("mse", "mae"):
        raise ValueError(f"unknown criterion {criterion!r}; valid criteria: mse, mae")
    if e8m0_candidates not in E8M0_CANDIDATES:
        raise ValueError(f"unknown e8m0_candidates {e8m0_candidates!r}; valid: {', '.join(E8M0_CANDIDATES)}")
    arithmetic = Arithmetic.of(ties, compute_dtype)
    magnitudes = blocks.abs()
    if is_power_of_two_format(scale_fmt):
        s_top = e8m0_rceil(blocks, scale_fmt, elem_fmt, prevent_zero=prevent_zero, ties=ties,
                           compute_dtype=compute_dtype)
        if e8m0_candidates == "ocp":
            s_second = e8m0_floor(blocks, scale_fmt, elem_fmt, prevent_zero=prevent_zero)
        else:
            ratio = arithmetic.op(divide(block_amax(blocks), elem_fmt.max))
            s_second = _power_of_two_scale(ratio, scale_fmt, prevent_zero, round_up=False)
    else:
        top, second = top_values(elem_fmt)
        bmax = magnitudes.amax(dim=-1, keepdim=True)
        raw_top = arithmetic.op(divide(bmax, top))
        raw_second = arithmetic.op(raw_top * (top / second)) if arithmetic.bfloat16 else divide(bmax, second)
        s_top = round_scale(raw_top, scale_fmt, prevent_zero, ties=ties)
        s_second = round_scale(raw_second, scale_fmt, prevent_zero, ties=ties)
    q_top, err_top = _element_values_and_error(magnitudes, s_top, elem_fmt, scale_fmt, criterion, arithmetic)
    q_second, err_second = _element_values_and_error(magnitudes, s_second, elem_fmt, scale_fmt, criterion,
                                                     arithmetic)
    pick_second = err_second < err_top
    if arithmetic.bfloat16:  # the authors' float32 means decide as they are, near-ties included
        scales = torch.where(pick_second, s_second, s_top)
        return scales, torch.where(pick_second, q_second, q_top).mul_(scales).copysign_(blocks)
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


def _element_values_and_error(magnitudes: torch.Tensor, scales: torch.Tensor, elem_fmt: Format, scale_fmt: Format,
                              criterion: str, arithmetic: Arithmetic) -> tuple[torch.Tensor, torch.Tensor]:
    """``Q(|b| / s)`` (0 where ``s = 0``) and the block error in data units (shape ``(n, 1)``): float64 from the
    float32 element-unit errors, or with bf16 arithmetic the authors' float32 mean over the block."""
    zero = scales == 0
    safe = scales.masked_fill(zero, 1.0)
    y = arithmetic.scaled(magnitudes / safe, scale_fmt)
    q = quantize_float32(y, elem_fmt, arithmetic.element_rounding, "saturate", None, nonnegative=True)
    if not sparse_updates(q) or bool(zero.any()):
        q.masked_fill_(zero.expand_as(q), 0.0)
    if arithmetic.bfloat16:  # the authors' float32 mean of float32 squares (or magnitudes), as torch.mean sums them
        diff = magnitudes - q * scales
        return q, (diff.square_() if criterion == "mse" else diff.abs_()).mean(dim=-1, keepdim=True)
    diff = y.sub_(q)
    if criterion == "mse":
        return q, diff.square_().sum(dim=-1, keepdim=True).double() * safe.double().square()
    return q, diff.abs_().sum(dim=-1, keepdim=True).double() * safe.double()


def brute_force(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
                ties: str = "even", compute_dtype: str | None = None) -> torch.Tensor:
    """The positive scale value with the smallest block SSE, searched over *every* value of the scale format.

    ``ties`` and ``compute_dtype`` round the elements of every candidate as :func:`dequantize_blocks` does (the
    SSE itself stays an exact float64 sum: the authors have no brute force to follow).

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
    arithmetic = Arithmetic.of(ties, compute_dtype)
    device = blocks.device
    candidates = positive_values(scale_fmt, device)
    n_cand, n_blocks = candidates.numel(), blocks.shape[0]
    bmax = block_amax(blocks)
    top, second = top_values(elem_fmt)

    def dequantize(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return _dequantize(b, s, elem_fmt, scale_fmt, arithmetic)

    bound = torch.minimum(  # the better of the two 4/6 candidates: a tight bound prunes more
        block_error(blocks, dequantize(blocks, round_scale(divide(bmax, top), scale_fmt, True, ties=ties))),
        block_error(blocks, dequantize(blocks, round_scale(divide(bmax, second), scale_fmt, True, ties=ties))))
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
    dq = dequantize(largest_pairs, pair_scales)
    partial_error = (largest_pairs - dq).square_().sum(dim=1)  # float32: a bound needs no float64
    # the slack covers float32 rounding of a few squares: never prune a candidate that could tie
    survivors = (in_window & (partial_error.view(n_blocks, width) <= (bound * (1 + 1e-5)).float())).nonzero()
    block_index, cand_index = survivors[:, 0], cand_index[survivors[:, 0], survivors[:, 1]]
    sse = torch.empty(block_index.numel(), dtype=torch.float64, device=device)
    step = max(1, chunk_elements(device, PAIR_BUDGET) // blocks.shape[1])
    for start in range(0, block_index.numel(), step):
        b = blocks.index_select(0, block_index[start : start + step])
        s = candidates.index_select(0, cand_index[start : start + step]).unsqueeze(1)
        sse[start : start + step] = block_error(b, dequantize(b, s)).squeeze(1)
    best = torch.full((n_blocks,), float("inf"), dtype=torch.float64, device=device).scatter_reduce_(
        0, block_index, sse, reduce="amin")
    winner = torch.where(sse == best[block_index], cand_index, n_cand)
    chosen = torch.full((n_blocks,), n_cand, dtype=torch.long, device=device).scatter_reduce_(
        0, block_index, winner, reduce="amin")
    scales = candidates[chosen.masked_fill_(chosen == n_cand, 0)].unsqueeze(1)
    return torch.where(bmax.isnan(), bmax, scales)


def e8m0_floor(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
               ties: str = "even", compute_dtype: str | None = None) -> torch.Tensor:
    """OCP MX "floor": ``s = 2^(floor(log2 bmax) - floor(log2 top))`` (E2M1: exponent - 2), so
    ``bmax / s`` lies in ``[2^k, 2^(k+1))``, ``k = floor(log2 top)`` (E2M1: [4, 8)) and the block max may saturate.
    An all-zero block gets the smallest scale. Exact powers of two from ``bmax``'s exponent: ``ties`` and
    ``compute_dtype`` change nothing here (they are checked)."""
    Arithmetic.of(ties, compute_dtype)
    bmax = block_amax(blocks)
    top_exponent = math.frexp(elem_fmt.max)[1] - 1  # floor(log2 top), exact from frexp
    raw = torch.where(bmax > 0, exact_exp2(torch.frexp(bmax).exponent - 1 - top_exponent), 0.0)
    return round_scale(torch.where(bmax.isfinite(), raw, bmax), scale_fmt, prevent_zero)


def e8m0_rceil(blocks: torch.Tensor, scale_fmt: Format, elem_fmt: Format, *, prevent_zero: bool = False,
               ties: str = "even", compute_dtype: str | None = None) -> torch.Tensor:
    """Round-up ("RCEIL", cuBLAS): ``s = 2^ceil(log2(bmax / top))`` on the float32 ratio (with
    ``compute_dtype="bfloat16"`` on the ratio rounded to bf16), so the block max never saturates
    (``bmax / s <= top``). The *Finer is Better* authors' E8M0 abs-max is this rule (``torch_eval.py`` at
    0080284, line 298: rounding "ceil" for E8M0). ``ties`` changes nothing (an exact power of two is rounded)."""
    ratio = Arithmetic.of(ties, compute_dtype).op(divide(block_amax(blocks), elem_fmt.max))
    return _power_of_two_scale(ratio, scale_fmt, prevent_zero, round_up=True)


def _power_of_two_scale(ratio: torch.Tensor, scale_fmt: Format, prevent_zero: bool, *,
                        round_up: bool) -> torch.Tensor:
    """``2^ceil(log2 ratio)`` (``round_up``) or ``2^floor(log2 ratio)`` of a float32 ratio, exact, as a scale
    (0 for a zero ratio, non-finite ratios kept); from frexp, ``ratio = m 2^e`` with ``m`` in [1/2, 1)."""
    mantissa, exponent = torch.frexp(ratio)
    log2 = torch.where(mantissa == 0.5, exponent - 1, exponent) if round_up else exponent - 1
    raw = torch.where(ratio > 0, exact_exp2(log2), 0.0)
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

    def __post_init__(self) -> None:
        """The selector's options are the ones :data:`common.scaling.conventions.RULE_OPTIONS` declares for the
        rule (what a spec is validated against without importing this module)."""
        options = tuple(name for name, p in inspect.signature(self.select).parameters.items()
                        if p.kind is p.KEYWORD_ONLY and name not in ("prevent_zero", "ties", "compute_dtype"))
        declared = lookup(RULE_OPTIONS, self.name, "scale rule")
        if options != declared:
            raise ValueError(f"scale rule {self.name!r}: its selector's options {options} are not the declared "
                             f"{declared} (common.scaling.conventions.RULE_OPTIONS)")


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
