"""The named formats. Every constant of a format is derived from these few fields (see :mod:`.spec`)."""

from __future__ import annotations

from common.registry import lookup

from .spec import Family, Format, Specials, Tier


def _float(name: str, e: int, m: int, bias: int, specials: Specials, *, signed: bool = True,
           subnormals: bool = True, description: str = "") -> Format:
    return Format(name=name, family=Family.FLOAT, bits=int(signed) + e + m, exponent_bits=e, mantissa_bits=m,
                  bias=bias, signed=signed, subnormals=subnormals, specials=specials, description=description)


def _int(name: str, bits: int, description: str, specials: Specials = Specials.NAN_MIN_CODE) -> Format:
    return Format(name=name, family=Family.INT, bits=bits, specials=specials, description=description)


HIF8_TIERS = (
    Tier(dot="11", exponent_bits=4, mantissa_bits=1),  # |E| = 8..15
    Tier(dot="10", exponent_bits=3, mantissa_bits=2),  # |E| = 4..7
    Tier(dot="01", exponent_bits=2, mantissa_bits=3),  # |E| = 2..3
    Tier(dot="001", exponent_bits=1, mantissa_bits=3),  # E = +-1
    Tier(dot="0001", exponent_bits=0, mantissa_bits=3),  # E = 0
    Tier(dot="0000", exponent_bits=0, mantissa_bits=3, denormal_offset=-23),  # 2^(M-23), M = 1..7
)

_FORMATS: tuple[Format, ...] = (
    _float("e4m3", 4, 3, 7, Specials.NAN_ALL_ONES, description="OCP FP8 E4M3FN: max 448, no Inf, NaN = S.1111.111"),
    _float("e5m2", 5, 2, 15, Specials.IEEE, description="OCP FP8 E5M2: IEEE-style Inf/NaN, max 57344"),
    _float("e3m2", 3, 2, 3, Specials.NONE, description="OCP FP6 E3M2: max 28, no Inf/NaN"),
    _float("e2m3", 2, 3, 1, Specials.NONE, description="OCP FP6 E2M3: max 7.5, no Inf/NaN"),
    _float("e2m1", 2, 1, 1, Specials.NONE, description="OCP FP4 E2M1: grid 0, 0.5, 1, 1.5, 2, 3, 4, 6"),
    _int("int8", 8, "symmetric INT8: -127..127"),
    _int("int4", 4, "symmetric INT4: -7..7"),
    _int("int2", 2, "symmetric INT2: -1, 0, 1"),
    _int("ternary", 2, "ternary (1.58 bits: log2 3) {-1, 0, 1}, stored in 2-bit codes; the grid of int2"),
    _int("int4_tc", 4, "two's-complement INT4 using every code: -8..7 (ParetoQ/LSQ 4-bit levels)", Specials.NONE),
    _int("int3_tc", 3, "two's-complement INT3 using every code: -4..3 (ParetoQ/LSQ 3-bit levels)", Specials.NONE),
    Format(name="binary", family=Family.BINARY, bits=1,
           description="binary {-1, +1}; the one bit is the sign; zero maps to +1"),
    Format(name="midrise2", family=Family.MIDRISE, bits=2,
           description="2-bit mid-rise {-3, -1, 1, 3}: code k (two's complement, -2..1) is 2k + 1; no zero "
                       "(ParetoQ's 2-bit stretched-elastic levels in units of alpha / 4)"),
    _float("e8m0", 8, 0, 127, Specials.NAN_ALL_ONES, signed=False, subnormals=False,
           description="OCP MX scale E8M0: powers of two 2^-127..2^127, no zero, 0xFF = NaN"),
    _float("ue4m3", 4, 3, 7, Specials.NAN_ALL_ONES, signed=False,
           description="unsigned E4M3 (NVFP4 block scale): 7-bit codes, min 2^-9, max 448"),
    _float("ue5m3", 5, 3, 15, Specials.NAN_ALL_ONES, signed=False,
           description="unsigned E5M3 scale: bias 15, min 2^-17, max 1.75 * 2^16 = 114688, all-ones code NaN"),
    _float("bf16", 8, 7, 127, Specials.IEEE, description="bfloat16"),
    _float("fp32", 8, 23, 127, Specials.IEEE, description="IEEE 754 binary32"),
    Format(name="hif8", family=Family.TAPERED, bits=8, specials=Specials.HIF8, default_rounding="away",
           tiers=HIF8_TIERS,
           description="HiFloat8 (Ascend) tapered float: max 2^15, min 2^-22, 0x80 NaN, 0x6F/0xEF +-Inf"),
)

FORMATS: dict[str, Format] = {fmt.name: fmt for fmt in _FORMATS}


def get_format(name: str | Format) -> Format:
    """The registered format called ``name`` (a :class:`Format` passes through unchanged)."""
    return name if isinstance(name, Format) else lookup(FORMATS, name, "format")
