"""Rounding onto any registered format: quantize-dequantize ("fake quantization").

``round_to_format(x, fmt)`` returns a tensor of the same shape and dtype as ``x`` whose every value is exactly
representable in ``fmt``. The arithmetic is exact: work happens in float32 with multiplications by exact powers
of two, so the result equals rounding the real number ``x`` onto the format's grid.

Rounding (``rounding=``), for a value between two neighbouring grid points ``lo < hi``:

* ``"rne"`` -- nearest; a tie goes to the neighbour that is an *even* multiple of the gap ``hi - lo``. For
  IEEE-like formats this is the usual ties-to-even-mantissa. For a power-of-two grid (E8M0, the HiF8 denormal
  tier) the gap is ``lo`` itself, so a tie goes up, as ml_dtypes does for E8M0; it is also what the HiF8
  reference formula ``floor(|x| 2^(mb-e) + 0.5)`` becomes with round-half-even in place of round-half-up.
* ``"away"`` -- nearest, ties away from zero (HiF8's "TA", the default for ``hif8``).
* ``"half_down"`` -- nearest, ties toward zero: to the neighbour of smaller magnitude (Python decimal's
  ``ROUND_HALF_DOWN``; for the unsigned scale formats, the smaller value). It is the rounding of the *Finer is
  Better* authors' midpoint bucketing (``clee1994/finer_is_better`` ``torch_eval.py`` at commit 0080284, lines
  282-287 for elements, 139-143 for scale formats other than E4M3): ``torch.bucketize(|x|, midpoints)`` with
  ``right=False`` puts a value equal to a midpoint in the lower bucket, and the sign is restored afterwards.
  Mid-rise ties (``x = m``, neighbours ``m -+ 1`` of equal distance) go to ``m - 1`` for ``m > 0`` and to
  ``m + 1`` for ``m <= 0`` (0 -> +1, as ``"away"``, both neighbours having the same magnitude).
* ``"stochastic"`` -- ``hi`` with probability ``(x - lo) / (hi - lo)``, else ``lo`` (unbiased up to float32
  resolution of the uniform draw); the draws come from ``generator`` so results are seeded.

``rounding=None`` uses the format's default (``"rne"`` everywhere except ``"away"`` for HiF8).

Overflow (``overflow=``), for magnitudes that round beyond the largest finite value ``max`` (``+-Inf`` inputs
included):

* ``"saturate"`` (default) -- clamp to ``+-max``;
* ``"inf_nan"`` -- ``+-Inf`` if the format has Inf (E5M2, HiF8, BF16, FP32), else NaN (E4M3FN, E8M0, UE4M3,
  UE5M3, symmetric INT). Formats with neither (E2M1, E3M2, E2M3, binary) reject this policy.

Other edges, stated once for every format:

* NaN in gives NaN out (for formats without a NaN code too: no finite value would be honest).
* Unsigned formats: a negative input is out of range: ``"saturate"`` gives the smallest value (0, or 2^-127
  for E8M0), ``"inf_nan"`` gives NaN. ``-0.0`` gives ``+0.0``.
* Formats without zero (E8M0): a positive value below the smallest value rounds to it; zero itself gives the
  smallest value under ``"saturate"`` and NaN under ``"inf_nan"`` (as ml_dtypes' float8_e8m0fnu).
* Signed formats keep the sign of zero where the format has -0.0 (FLOAT); elsewhere -0.0 comes back as -0.0 in
  the float tensor but encodes to the single zero code.
* Full two's-complement integers (int3_tc, int4_tc: ``lowest = -max - 1``): magnitudes are rounded as for the
  symmetric integers, and saturate at ``max`` for positive and at ``-lowest`` for negative inputs (so -7.5 gives
  -8 in int4_tc under ``"rne"`` and ``"away"``, +7.5 gives 7).
* Mid-rise formats (midrise2 ``{-3, -1, 1, 3}``, no zero) are rounded on the signed value, not the magnitude:
  with ``m = 2 round(x / 2)`` the even integer within 1 of ``x`` (exact: halving is exact and ``round`` of a
  value ``j + 1/2`` gives an even ``m`` next to the odd grid point ``x``), the neighbours are ``m - 1`` and
  ``m + 1``; ``x > m`` gives ``m + 1``, ``x < m`` gives ``m - 1``, and the tie ``x = m`` goes to the level of even
  two's-complement code (``"rne"``: ``m + 1`` iff ``m`` is a multiple of 4) or away from zero (``"away"``,
  ``m >= 0`` gives ``m + 1``: 0 -> +1). ``"stochastic"`` gives ``m + 1`` with probability ``(x - m + 1) / 2``.
  Inputs are clamped to ``[-max, max]`` first (both ends are levels, so this is exact). Both zeros give +1.

Devices: every kernel here (and in :mod:`common.scaling`, :mod:`common.quantizers.block` and the QAT fake quantizers
built
on them) runs on ``x``'s device and returns a tensor there: constant tables are built once and cached per device,
stochastic draws are made on ``x``'s device (a ``generator`` must live there too), and nothing reads a tensor value
back to the host, so a CUDA input costs no host synchronisation (the exceptions are named where they are:
the pruned ``brute_force`` search and the error checks of ``encode``/``decode``). On CPUs the work goes in chunks of
:data:`CHUNK` elements that stay in cache; elsewhere in passes of up to :data:`DEVICE_CHUNK` elements (one kernel
launch per operation). Results are the same on every device, bit for bit (``"stochastic"`` aside: its draws come
from the device's generator). Divisions by a constant go through :func:`divide`: CUDA turns ``t / c`` with a Python
(CPU) scalar ``c`` into ``t * (1 / c)``, which can be one ulp off the CPU's division.
"""

from __future__ import annotations

import math

import torch

from .registry import get_format
from .spec import Family, Format

ROUNDINGS = ("rne", "away", "stochastic", "half_down")
OVERFLOWS = ("saturate", "inf_nan")
SUPPORTED_DTYPES = (torch.float32, torch.bfloat16)
CHUNK = 1 << 17  # elements per pass on CPUs: keeps the temporaries of one chunk inside the L2 cache
DEVICE_CHUNK = 1 << 26  # elements per pass on other devices: one launch per operation, 256 MiB float32 temporaries


def round_to_format(
    x: torch.Tensor,
    fmt: str | Format,
    *,
    rounding: str | None = None,
    overflow: str = "saturate",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Round each element of ``x`` to the grid of ``fmt`` (the format's values) and return the dequantized values:
    the grid values themselves, in ``x``'s dtype and shape, not their codes (:func:`common.formats.encode` gives
    those). Rounding, overflow and the edges are the module docstring's. gfloat calls this operation
    ``round_float`` (``gfloat.round_float(fi, v)``, one value at a time)."""
    fmt = get_format(fmt)
    rounding = check_rounding(rounding, fmt)
    check_overflow(overflow, fmt)
    x32 = as_float32(x).contiguous()
    out = torch.empty_like(x32)
    flat_in, flat_out = x32.view(-1), out.view(-1)
    step = chunk_elements(x32.device)
    for start in range(0, flat_in.numel(), step):
        chunk = flat_in[start : start + step]
        flat_out[start : start + step] = quantize_float32(chunk, fmt, rounding, overflow, generator)
    return out if x.dtype == torch.float32 else out.to(x.dtype)


def chunk_elements(device: torch.device, cpu_chunk: int = CHUNK) -> int:
    """Elements per pass of the kernels on ``device``: ``cpu_chunk`` on CPUs (cache-sized temporaries),
    :data:`DEVICE_CHUNK` elsewhere (a GPU pays a launch per operation per chunk)."""
    return cpu_chunk if device.type == "cpu" else DEVICE_CHUNK


def divide(t: torch.Tensor, divisor: float) -> torch.Tensor:
    """``t / divisor``, one correctly rounded division by ``divisor`` rounded to ``t``'s dtype, on every device
    (module docstring): the divisor is a 0-dim tensor on ``t``'s device (filled there in float64 and cast, no copy
    from the host; beyond the dtype's range it becomes +-Inf as a Python scalar would), which CUDA divides by, where
    it would multiply by the reciprocal of a Python scalar. On CPUs it equals ``t / divisor`` bit for bit for
    float32 and float64 ``t`` (and for bfloat16 when ``divisor`` is a bfloat16 value)."""
    return t / torch.full((), divisor, dtype=torch.float64, device=t.device).to(t.dtype)


def quantize_float32(
    x: torch.Tensor, fmt: Format, rounding: str, overflow: str, generator: torch.Generator | None,
    *, nonnegative: bool = False,
) -> torch.Tensor:
    """The kernel on a float32 tensor, arguments already validated (no chunking; returns a new tensor).

    ``nonnegative=True`` promises ``x >= 0`` (magnitudes) and skips taking and restoring the sign.
    """
    if fmt.family is Family.BINARY:
        return _round_binary(x, rounding, generator)
    if fmt.family is Family.MIDRISE:
        return _round_midrise(x, fmt, rounding, generator)
    if nonnegative:
        ax = x.clamp(max=fmt.max) if overflow == "saturate" else x
    else:
        ax = x.abs()
        if overflow == "saturate":
            ax.clamp_(max=fmt.max)  # rounding max or anything above it gives max: clamping first is exact
            if not fmt.symmetric:  # two's complement: negative magnitudes reach -lowest
                ax = torch.where(x < 0, x.abs().clamp_(max=-fmt.lowest), ax)
    q = _MAGNITUDE_RULES[_rule_key(fmt)](ax, fmt, rounding, generator)
    return _apply_range(q, x, ax, fmt, overflow, keep_sign=not nonnegative)


# --------------------------------------------------------------------------------------------- validation
def check_rounding(rounding: str | None, fmt: Format) -> str:
    rounding = fmt.default_rounding if rounding is None else rounding
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; valid roundings: {', '.join(ROUNDINGS)}")
    return rounding


def check_overflow(overflow: str, fmt: Format) -> None:
    if overflow not in OVERFLOWS:
        raise ValueError(f"unknown overflow {overflow!r}; valid policies: {', '.join(OVERFLOWS)}")
    if overflow == "inf_nan" and not (fmt.has_inf or fmt.has_nan):
        raise ValueError(
            f"overflow='inf_nan' is impossible for format {fmt.name!r}: it has no Inf and no NaN code; "
            "use overflow='saturate'"
        )


def as_float32(x: torch.Tensor) -> torch.Tensor:
    """``x`` as float32 (exact for the supported dtypes); anything else is a ``ValueError`` naming the dtype."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"unsupported dtype {x.dtype}; quantize takes {', '.join(str(d) for d in SUPPORTED_DTYPES)} "
            "(cast float16/float64 yourself: a silent cast would round twice)"
        )
    return x.float()


# ------------------------------------------------------------------------------------------ rounding rules
def _round_half(y: torch.Tensor, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Round non-negative ``y`` (below 2^23, or already integral) to an integer, in place where possible.

    "away", "half_down" and "stochastic" compare the exact fraction ``y - floor(y)`` (never ``floor(y + 0.5)``,
    whose float addition rounds 0.49999997 up): away adds 1 iff the fraction >= 1/2, half_down iff it is > 1/2;
    stochastic adds 1 iff a uniform draw u in [0, 1) is below the fraction.
    """
    if rounding == "rne":
        return y.round_()
    whole = y.floor()
    fraction = y.sub_(whole)
    if rounding == "away":
        return whole.add_(fraction >= 0.5)
    if rounding == "half_down":
        return whole.add_(fraction > 0.5)
    return whole.add_(torch.rand(y.shape, generator=generator, dtype=y.dtype, device=y.device) < fraction)


def _pow2(n: torch.Tensor) -> torch.Tensor:
    """Exact float32 ``2^n`` for integer ``n`` in [-126, 127], built from the bit pattern."""
    return ((n + 127) << 23).view(torch.float32)


def exact_exp2(n: torch.Tensor) -> torch.Tensor:
    """float32 ``2^n`` for an int32 tensor ``n``, exact where representable (subnormals down to 2^-149), otherwise
    correctly rounded: 0 for ``n <= -150``, +Inf for ``n >= 128``. Built from bit patterns as ``2^h 2^(n-h)``,
    ``h = floor(n / 2)``, so every device gives the same bits (``torch.exp2`` is an approximation on GPUs)."""
    n = n.clamp(-252, 254)
    return _mul_pow2(torch.ones(n.shape, dtype=torch.float32, device=n.device), n, split=True)


def _mul_pow2(x: torch.Tensor, n: torch.Tensor, split: bool) -> torch.Tensor:
    """``x * 2^n`` exactly; ``split`` multiplies by two factors when ``n`` may leave [-126, 127]."""
    if not split:
        return x.mul_(_pow2(n))
    half = n >> 1
    return x.mul_(_pow2(half)).mul_(_pow2(n - half))


def _round_binades(ax: torch.Tensor, fmt: Format, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Magnitudes of FLOAT and TAPERED formats.

    With ``e = floor(log2 |x|)`` clamped to the format's binades and ``mb(e)`` the mantissa bits of binade e
    (constant for FLOAT, by tier for HiF8, 0 in HiF8's power-of-two denormal tier; clamping e at the lowest
    binade gives the fixed subnormal step): ``q = R(|x| 2^(mb - e)) 2^(e - mb)``, R the integer rounding. This is
    the HiF8 reference formula (``hif8.md``) and IEEE rounding alike. The powers of two are built from the
    biased exponent ``E = e + 127`` as float32 bit patterns: ``2^(mb - e)`` has bits ``(254 + mb - E) << 23``.
    """
    e_floor, e_top, tables, split = _binade_constants(fmt, ax.device)
    biased = (ax.view(torch.int32) >> 23).clamp_(e_floor + 127, e_top + 127)
    if tables is not None:  # tapered: both powers of two looked up by biased exponent
        index = biased.view(-1)
        up = tables[0].index_select(0, index).view(ax.shape)
        down = tables[1].index_select(0, index).view(ax.shape)
        return _round_half(ax * up, rounding, generator).mul_(down)
    m = fmt.mantissa_bits
    if split:
        shift = m - (biased - 127)
        y = _mul_pow2(ax.clone(), shift, split=True)
        return _mul_pow2(_round_half(y, rounding, generator), shift.neg_(), split=True)
    up = ((254 + m) - biased).bitwise_left_shift_(23).view(torch.float32)
    down = biased.sub_(m).bitwise_left_shift_(23).view(torch.float32)
    return _round_half(ax * up, rounding, generator).mul_(down)


def _round_fp32_prefix(ax: torch.Tensor, fmt: Format, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Magnitudes of formats sharing float32's exponent field (BF16, FP32): round the bit pattern's low bits.

    Dropping ``23 - m`` low bits of the float32 pattern is exact rounding to ``m`` mantissa bits, subnormals
    included; a carry into the exponent is the step to the next binade, and into the all-ones exponent is
    overflow (handled by the caller).
    """
    drop = 23 - fmt.mantissa_bits
    if drop == 0:
        return ax.clone()
    bits = ax.view(torch.int32)
    half = 1 << (drop - 1)
    if rounding == "rne":
        bits = bits + (half - 1) + ((bits >> drop) & 1)
    elif rounding == "away":
        bits = bits + half
    elif rounding == "half_down":
        bits = bits + (half - 1)
    else:
        bits = bits + torch.randint(0, 1 << drop, bits.shape, generator=generator, dtype=torch.int32,
                                    device=bits.device)
    q = (bits & ~((1 << drop) - 1)).view(torch.float32)
    # NaN patterns may have carried; Inf input carried into a NaN pattern: restore both, range is checked later.
    return torch.where(ax.isfinite(), q, ax)


def _round_int(ax: torch.Tensor, fmt: Format, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Magnitudes of symmetric integer formats: ``R(|x|)`` (unbounded; the range is applied by the caller)."""
    return _round_half(ax.clone(), rounding, generator)


def _round_binary(x: torch.Tensor, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Binary {-1, +1}: -1 for x < 0, +1 for x >= 0 (either zero; the usual BNN ``where(w >= 0, 1, -1)``, which
    keeps the map monotone); stochastic: +1 with probability (clamp(x, -1, 1) + 1) / 2."""
    if rounding == "stochastic":
        p_plus = (x.clamp(-1.0, 1.0) + 1.0) * 0.5
        u = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        q = torch.where(u < p_plus, 1.0, -1.0)
    else:
        q = torch.where(x < 0, -1.0, 1.0)
    return torch.where(x.isnan(), x, q)


def _round_midrise(x: torch.Tensor, fmt: Format, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Mid-rise levels (odd integers, ``|q| <= max``) of signed ``x`` (module docstring): neighbours ``m -+ 1`` of
    ``m = 2 round(x / 2)``, ties to the even code (``"rne"``), away from zero (``"away"``) or toward zero
    (``"half_down"``; 0 -> +1); saturating."""
    c = x.clamp(-fmt.max, fmt.max)
    m = torch.round(c * 0.5).mul_(2.0)
    if rounding == "stochastic":
        up = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device) < (c - m + 1.0) * 0.5
    elif rounding == "rne":
        up = (c > m) | ((c == m) & (torch.remainder(m, 4.0) == 0))
    else:  # a tie goes up for m >= 0 away from zero, for m <= 0 toward zero (0 -> +1 both)
        up = (c > m) | ((c == m) & ((m >= 0) if rounding == "away" else (m <= 0)))
    q = torch.where(up, m + 1.0, m - 1.0)
    return torch.where(x.isnan(), x, q)


_MAGNITUDE_RULES = {"binades": _round_binades, "fp32_prefix": _round_fp32_prefix, "int": _round_int}


def _rule_key(fmt: Format) -> str:
    if fmt.family is Family.INT:
        return "int"
    if fmt.family is Family.FLOAT and fmt.exponent_bits == 8 and fmt.bias == 127 and fmt.subnormals:
        return "fp32_prefix"
    return "binades"


_Tables = tuple[torch.Tensor, torch.Tensor]
_BINADE_CACHE: dict[str, tuple[int, int, _Tables | None, bool]] = {}
_TABLES_BY_DEVICE: dict[tuple[str, torch.device], _Tables] = {}


def _binade_constants(fmt: Format, device: torch.device) -> tuple[int, int, _Tables | None, bool]:
    """(lowest binade exponent, top binade exponent, tapered tables on ``device`` or None, needs split powers of
    two).

    Tapered formats get two float32 tables indexed by the biased exponent ``E = e + 127`` (0..255): ``2^(mb - e)``
    and ``2^(e - mb)`` with ``mb`` the mantissa bits of binade e (entries outside the clamped range are unused);
    they are built once on the CPU and cached per device (:data:`_TABLES_BY_DEVICE`).
    """
    if fmt.name not in _BINADE_CACHE:
        tables = None
        if fmt.family is Family.TAPERED:
            mb_of = fmt.mantissa_bits_by_exponent
            e_floor, e_top = min(mb_of), max(mb_of)
            exps = range(-127, 129)
            up = [math.ldexp(1.0, mb_of.get(e, 0) - e) if e in mb_of else 1.0 for e in exps]
            down = [math.ldexp(1.0, e - mb_of.get(e, 0)) if e in mb_of else 1.0 for e in exps]
            tables = (torch.tensor(up, dtype=torch.float32), torch.tensor(down, dtype=torch.float32))
            split = False
        else:
            e_floor, e_top, m = fmt.min_exponent, fmt.max_exponent, fmt.mantissa_bits
            # shift = m - e and its negation must both stay inside [-126, 127] for one-factor powers of two
            split = not (m - e_top >= -126 and m - e_floor <= 126 and e_floor - m >= -126 and e_top - m <= 126)
        _BINADE_CACHE[fmt.name] = (e_floor, e_top, tables, split)
    e_floor, e_top, tables, split = _BINADE_CACHE[fmt.name]
    if tables is not None:
        key = (fmt.name, device)
        if key not in _TABLES_BY_DEVICE:
            _TABLES_BY_DEVICE[key] = (tables[0].to(device), tables[1].to(device))
        tables = _TABLES_BY_DEVICE[key]
    return e_floor, e_top, tables, split


def _apply_range(q: torch.Tensor, x: torch.Tensor, ax: torch.Tensor, fmt: Format, overflow: str,
                 keep_sign: bool = True) -> torch.Tensor:
    """Overflow policy, zero-less and unsigned formats, then the sign (see the module docstring)."""
    if overflow == "inf_nan":
        q = torch.where(q > fmt.max, float("inf") if fmt.has_inf else float("nan"), q)
    if not fmt.has_zero:
        zero_value = fmt.min_subnormal if overflow == "saturate" else float("nan")
        q = torch.where(q == 0, torch.where(ax == 0, zero_value, fmt.min_subnormal), q)
    if not fmt.signed:
        below_range = fmt.min_subnormal if not fmt.has_zero else 0.0
        return torch.where(x < 0, below_range if overflow == "saturate" else float("nan"), q)
    return q.copysign_(x) if keep_sign else q
