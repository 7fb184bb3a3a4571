"""Precision of a format by magnitude: how many explicit mantissa (fraction) bits it keeps at a value.

``mantissa_bits(v, fmt)`` is derived from the format's own fields, the same binade rule :func:`round_to_format` rounds
with (``q = R(|x| 2^(mb - e)) 2^(e - mb)``, ``e = floor(log2 |x|)``): the grid step at ``v`` is
``2^(e - mantissa_bits(v))`` for every positive ``v`` below the largest finite value.
"""

from __future__ import annotations

from functools import cache

import torch

from .registry import get_format
from .rounding import as_float32
from .spec import Family, Format


def mantissa_bits(v: torch.Tensor, fmt: str | Format) -> torch.Tensor:
    """Explicit mantissa bits ``fmt`` has at magnitude ``v`` (int64, ``v``'s shape; ``v >= 0`` float32 or bf16).

    With ``e = floor(log2 v)`` the binade of ``v``, and ``v > fmt.max`` (+Inf included) counted in the binade of the
    largest finite value (a value clipped by the format gets the bits at the maximum):

    * TAPERED (HiF8): the mantissa bits of binade ``e``'s tier (``fmt.mantissa_bits_by_exponent``, ``e`` clamped to
      the tiers' exponents): HiF8 has 3 for ``|e| <= 3``, 2 for ``|e| = 4..7``, 1 for ``|e| = 8..15`` and 0 in its
      power-of-two denormal tier ``2^-22 .. 2^-16`` and below it.
    * FLOAT: ``m = fmt.mantissa_bits`` for normals (``e >= fmt.min_exponent``); below the smallest normal a
      subnormal's significant bits after its leading one, ``max(m + e - min_exponent, 0)`` (0 without subnormals).

    Zero gives 0; NaN gives an unspecified value. Formats of other families (integers, binary, mid-rise) have no
    mantissa: ValueError naming the format.
    """
    fmt = get_format(fmt)
    if fmt.family not in (Family.FLOAT, Family.TAPERED):
        raise ValueError(f"format {fmt.name!r} ({fmt.family.value}) has no mantissa bits")
    x = as_float32(v)
    e = torch.frexp(x).exponent.to(torch.int64) - 1  # x = f 2^k with f in [0.5, 1): floor(log2 x) = k - 1
    e = torch.where(x > fmt.max, fmt.max_exponent, e)
    if fmt.family is Family.TAPERED:
        by_exponent = fmt.mantissa_bits_by_exponent
        low, high = min(by_exponent), max(by_exponent)
        bits = _tier_table(fmt, x.device)[e.clamp(low, high) - low]
    else:
        m = fmt.mantissa_bits
        below = (e + (m - fmt.min_exponent)).clamp_(min=0) if fmt.subnormals else torch.zeros_like(e)
        bits = torch.where(e >= fmt.min_exponent, m, below)
    return torch.where(x == 0, 0, bits)


@cache
def _tier_table(fmt: Format, device: torch.device) -> torch.Tensor:
    """int64 mantissa bits of each binade exponent of a TAPERED format, lowest first, on ``device`` (cached per
    device: no host-to-device copy per call)."""
    by_exponent = fmt.mantissa_bits_by_exponent
    return torch.tensor([by_exponent[k] for k in range(min(by_exponent), max(by_exponent) + 1)], dtype=torch.int64,
                        device=device)
