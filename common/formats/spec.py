"""Number formats as data.

A :class:`Format` is a frozen description of a number format; every constant a user might want (largest finite
value ``max``, most negative value ``lowest``, smallest normal and subnormal, number of distinct finite values, the
full value grid) is *derived* from the fields, never typed twice: a FLOAT format's ``max`` by its formula, the
others from the value of every code (``code_values``: ``lowest``, the integer and mid-rise ``max`` and the counts
are its extremes and its size). Families:

``FLOAT``
    ``sign | exponent | mantissa`` with an exponent ``bias``; optional sign bit (``signed=False`` gives the
    unsigned scale formats UE4M3/UE5M3/E8M0); optional subnormals (without them the exponent field 0 is a
    normal binade and the format has no zero, as E8M0). Value of a normal code:
    ``(-1)^s * 2^(field - bias) * (1 + mant / 2^m)``; of a subnormal code: ``(-1)^s * 2^(1 - bias) * mant / 2^m``.
``INT``
    two's-complement integers, code ``c`` read as ``c - 2^b`` when ``c >= 2^(b-1)``. With
    ``Specials.NAN_MIN_CODE`` they are symmetric, ``-(2^(b-1) - 1) .. 2^(b-1) - 1``, and the most negative code
    ``100..0`` is NaN (int8, int4, int2, ternary); with ``Specials.NONE`` every code is a number,
    ``-2^(b-1) .. 2^(b-1) - 1`` (the LSQ grids int3_tc ``-4 .. 3`` and int4_tc ``-8 .. 7``): ``max`` is
    ``2^(b-1) - 1`` and ``lowest`` one step further out, ``-2^(b-1)``.
``BINARY``
    the two values ``{-1, +1}`` in one bit (the bit is the sign).
``MIDRISE``
    mid-rise levels, the odd integers ``+-1, +-3, .., +-(2^b - 1)`` (no zero): code ``c`` is the two's-complement
    integer ``k = c - 2^b if c >= 2^(b-1) else c`` in ``-2^(b-1) .. 2^(b-1) - 1`` and its value is ``2k + 1``
    (midrise2: ``{-3, -1, 1, 3}``, ParetoQ's 2-bit stretched-elastic levels in units of ``alpha / 4``). The grid
    step is 2; rounding is to the nearest level, a tie (an even integer ``2j``) going to the level of even code
    ``k`` (``"rne"``: ``2j + 1`` if ``j`` is even, else ``2j - 1``, so 0 -> 1, 2 -> 1, -2 -> -3, which is ParetoQ's
    ``round(2u - 1/2)`` half to even) or away from zero (``"away"``; 0 -> +1).
``TAPERED``
    the HiF8 dot-prefix layout (``hif8.md``): ``sign | dot | exponent (sign-magnitude, implicit leading 1) |
    mantissa``, where the dot prefix selects how many exponent and mantissa bits follow (:class:`Tier`).

Special-value conventions (:class:`Specials`) are data too; see each member's docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

import numpy as np


class Family(StrEnum):
    """How a format's codes map to values (see the module docstring)."""

    FLOAT = "float"
    INT = "int"
    BINARY = "binary"
    MIDRISE = "midrise"
    TAPERED = "tapered"


class Specials(StrEnum):
    """Which codes are not finite numbers."""

    NONE = "none"
    """Every code is a finite number (E2M1, E3M2, E2M3, binary, midrise2, the full two's-complement integers
    int3_tc/int4_tc): there is no Inf and no NaN."""
    IEEE = "ieee"
    """The all-ones exponent field holds Inf (mantissa 0) and NaN (mantissa != 0), as IEEE 754 (E5M2, BF16, FP32)."""
    NAN_ALL_ONES = "nan_all_ones"
    """Only the all-ones magnitude code is NaN; the top binade is otherwise finite; no Inf (OCP E4M3FN, E8M0)."""
    NAN_MIN_CODE = "nan_min_code"
    """Symmetric integers: the unused most negative two's-complement code (``100..0``) is read as NaN, so that a
    NaN survives encode/decode; there is no Inf."""
    HIF8 = "hif8"
    """HiF8: 0x80 (the would-be negative zero) is NaN; the two codes of magnitude 1.5 * 2^15 are +Inf / -Inf."""


@dataclass(frozen=True)
class Tier:
    """One dot-prefix tier of a tapered format.

    ``exponent_bits`` counts the exponent's sign bit: the magnitude is a 1 followed by the remaining
    ``exponent_bits - 1`` bits, so a tier with ``exponent_bits = k >= 1`` covers ``|E| = 2^(k-1) .. 2^k - 1``
    (``k = 1``: ``E = +-1``) and ``k = 0`` is ``E = 0``. A tier with ``denormal_offset`` set is a denormal
    tier: its ``mantissa_bits`` hold an integer M >= 1 and the value is ``2^(M + denormal_offset)``.
    """

    dot: str
    exponent_bits: int
    mantissa_bits: int
    denormal_offset: int | None = None

    @property
    def exponents(self) -> range:
        """Exponents E this tier covers (normal tiers), or the denormal exponents ``M + offset``."""
        if self.denormal_offset is not None:
            return range(1 + self.denormal_offset, 2**self.mantissa_bits + self.denormal_offset)
        if self.exponent_bits == 0:
            return range(0, 1)
        low = 2 ** (self.exponent_bits - 1)
        return range(low, 2 * low)


@dataclass(frozen=True)
class Format:
    """A number format. Construct through the registry (:func:`common.formats.get_format`)."""

    name: str
    family: Family
    bits: int
    exponent_bits: int = 0
    mantissa_bits: int = 0
    bias: int = 0
    signed: bool = True
    subnormals: bool = True
    specials: Specials = Specials.NONE
    default_rounding: str = "rne"
    tiers: tuple[Tier, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if self.family is Family.FLOAT and self.bits != int(self.signed) + self.exponent_bits + self.mantissa_bits:
            raise ValueError(
                f"format {self.name!r}: bits={self.bits} != sign + exponent + mantissa "
                f"({int(self.signed)} + {self.exponent_bits} + {self.mantissa_bits})"
            )

    # ----------------------------------------------------------------------------------------------- FLOAT
    @property
    def min_exponent(self) -> int:
        """Exponent of the smallest normal binade (the subnormal step is ``2^(min_exponent - mantissa_bits)``)."""
        if self.family is Family.FLOAT:
            return (1 if self.subnormals else 0) - self.bias
        if self.family is Family.TAPERED:
            return min(e for t in self.tiers if t.denormal_offset is None for e in (*t.exponents, *_neg(t)))
        return 0

    @property
    def max_exponent(self) -> int:
        """Exponent of the binade holding the largest finite value."""
        return math.floor(math.log2(self.max))

    # ----------------------------------------------------------------------------------------------- derived
    @cached_property
    def max(self) -> float:
        """Largest finite value."""
        if self.family is Family.FLOAT:
            m = self.mantissa_bits
            top_field = 2**self.exponent_bits - 1
            if self.specials is Specials.IEEE:
                max_field, max_mant = top_field - 1, 2**m - 1
            elif self.specials is Specials.NAN_ALL_ONES:
                max_field, max_mant = (top_field, 2**m - 2) if m > 0 else (top_field - 1, 0)
            else:
                max_field, max_mant = top_field, 2**m - 1
            return math.ldexp(1.0 + max_mant / 2**m, max_field - self.bias)
        return float(self.finite_values.max())

    @cached_property
    def lowest(self) -> float:
        """Most negative finite value: ``-max`` for symmetric signed formats, ``-2^(b-1)`` for the full
        two's-complement integers (int3_tc, int4_tc), the smallest value (0, or 2^-127 for E8M0) for unsigned
        formats."""
        if not self.is_codebook:  # BF16, FP32: symmetric
            return -self.max if self.signed else 0.0
        return float(self.finite_values.min())

    @property
    def symmetric(self) -> bool:
        """Whether the finite values are symmetric about zero, ``lowest == -max`` (False for unsigned formats and
        the full two's-complement integers)."""
        return self.lowest == -self.max

    @cached_property
    def min_normal(self) -> float:
        """Smallest positive normal value (the smallest positive value of INT/BINARY/MIDRISE formats: 1)."""
        if self.family in (Family.FLOAT, Family.TAPERED):
            return math.ldexp(1.0, self.min_exponent)
        return 1.0

    @cached_property
    def min_subnormal(self) -> float:
        """Smallest positive value."""
        if self.family is Family.FLOAT:
            return math.ldexp(1.0, self.min_exponent - (self.mantissa_bits if self.subnormals else 0))
        positive = self.finite_values[self.finite_values > 0]
        return float(positive.min())

    @cached_property
    def ulp_at_max(self) -> float:
        """Grid step in the binade of the largest value: ``max + ulp_at_max`` is where the grid would continue
        (the overflow boundary; round-to-nearest overflows from ``max + ulp_at_max / 2`` on, ties by the rule)."""
        if self.family is Family.FLOAT:
            return math.ldexp(1.0, self.max_exponent - self.mantissa_bits)
        if self.family is Family.TAPERED:
            return math.ldexp(1.0, self.max_exponent - self.mantissa_bits_by_exponent[self.max_exponent])
        return 1.0 if self.family is Family.INT else 2.0  # BINARY and MIDRISE: odd levels, step 2

    @property
    def has_zero(self) -> bool:
        """Whether 0 is representable (a FLOAT format without subnormals, such as E8M0, has no zero)."""
        return self.family not in (Family.BINARY, Family.MIDRISE) and (self.family is not Family.FLOAT
                                                                       or self.subnormals)

    @property
    def has_inf(self) -> bool:
        return self.specials in (Specials.IEEE, Specials.HIF8)

    @property
    def has_nan(self) -> bool:
        return self.specials is not Specials.NONE

    @property
    def has_negative_zero(self) -> bool:
        """Whether a code for -0.0 exists (signed FLOAT formats with a zero)."""
        return self.family is Family.FLOAT and self.signed and self.has_zero

    @property
    def is_codebook(self) -> bool:
        """Whether every code can be listed (8 bits or fewer): encode/decode and the value grid exist."""
        return self.bits <= 8

    @cached_property
    def code_values(self) -> np.ndarray:
        """float64 value of every code ``0 .. 2^bits - 1`` (NaN for NaN codes, +-inf for Inf codes)."""
        if not self.is_codebook:
            raise ValueError(f"format {self.name!r} has {self.bits} bits: only formats of 8 bits or fewer have codes")
        return np.array([_decode_code(self, c) for c in range(2**self.bits)], dtype=np.float64)

    @cached_property
    def finite_values(self) -> np.ndarray:
        """Sorted distinct finite values (float64; -0.0 and +0.0 count once)."""
        values = self.code_values
        return np.unique(values[np.isfinite(values)] + 0.0)

    @property
    def num_finite(self) -> int:
        """Number of distinct finite values (+0 and -0 counted once)."""
        return int(self.finite_values.size)

    @cached_property
    def mantissa_bits_by_exponent(self) -> dict[int, int]:
        """For TAPERED formats: mantissa bits of each binade exponent, denormal binades included (0 bits)."""
        table: dict[int, int] = {}
        for tier in self.tiers:
            if tier.denormal_offset is not None:
                table.update({e: 0 for e in tier.exponents})
            else:
                table.update({e: tier.mantissa_bits for e in (*tier.exponents, *_neg(tier))})
        return dict(sorted(table.items()))

    def __str__(self) -> str:
        return self.name


def _neg(tier: Tier) -> tuple[int, ...]:
    return tuple(-e for e in tier.exponents if e != 0)


def _decode_code(fmt: Format, code: int) -> float:
    """Value of one code (the definition every table is built from)."""
    if fmt.family is Family.FLOAT:
        return _decode_float(fmt, code)
    signed_code = code - 2**fmt.bits if code >= 2 ** (fmt.bits - 1) else code  # two's complement
    if fmt.family is Family.INT:
        if fmt.specials is Specials.NAN_MIN_CODE and code == 2 ** (fmt.bits - 1):
            return math.nan
        return float(signed_code)
    if fmt.family is Family.MIDRISE:
        return float(2 * signed_code + 1)
    if fmt.family is Family.BINARY:
        return -1.0 if code & 1 else 1.0
    return _decode_tapered(fmt, code)


def _decode_float(fmt: Format, code: int) -> float:
    m, ebits = fmt.mantissa_bits, fmt.exponent_bits
    sign = -1.0 if fmt.signed and code >> (ebits + m) & 1 else 1.0
    magnitude = code & ((1 << (ebits + m)) - 1)
    field, mant = magnitude >> m, magnitude & ((1 << m) - 1)
    top_field = 2**ebits - 1
    if fmt.specials is Specials.IEEE and field == top_field:
        return sign * math.inf if mant == 0 else math.nan
    if fmt.specials is Specials.NAN_ALL_ONES and magnitude == (1 << (ebits + m)) - 1:
        return math.nan
    if field == 0 and fmt.subnormals:
        return sign * math.ldexp(mant, fmt.min_exponent - m)
    return sign * math.ldexp(1.0 + mant / 2**m, field - fmt.bias)


def _decode_tapered(fmt: Format, code: int) -> float:
    sign = -1.0 if code >> (fmt.bits - 1) & 1 else 1.0
    body_bits = fmt.bits - 1
    body = format(code & ((1 << body_bits) - 1), f"0{body_bits}b")
    for tier in fmt.tiers:
        if not body.startswith(tier.dot):
            continue
        rest = body[len(tier.dot) :]
        mant = int(rest[len(rest) - tier.mantissa_bits :] or "0", 2)
        if tier.denormal_offset is not None:
            if mant == 0:
                return math.nan if sign < 0 else 0.0
            return sign * math.ldexp(1.0, mant + tier.denormal_offset)
        exp_field = rest[: tier.exponent_bits]
        if tier.exponent_bits == 0:
            exponent = 0
        else:
            magnitude = int("1" + exp_field[1:], 2)
            exponent = -magnitude if exp_field[0] == "1" else magnitude
        top_exponent = max(fmt.mantissa_bits_by_exponent)
        if fmt.specials is Specials.HIF8 and exponent == top_exponent and mant == 2**tier.mantissa_bits - 1:
            return sign * math.inf
        return sign * math.ldexp(1.0 + mant / 2**tier.mantissa_bits, exponent)
    raise AssertionError(f"code {code:#x} matches no dot prefix of {fmt.name}")
