"""Per-tensor scaled quantize-dequantize ``Q(t) = round_to_format(t s, fmt) / s``, fast, bit-exact with common.formats.

``scaled_qdq(t, s, fmt)`` equals ``round_to_format(t.float() * s, fmt) / s`` (cast back to ``t``'s dtype) bit for bit,
saturating overflow and the format's default rounding. Two paths, chosen by :func:`lookup_bits`:

* lookup table, for ties-away formats with few mantissa bits (HiF8's TA rounding, at most 3 mantissa bits): the
  result of rounding ``y = t s`` depends only on the sign, the exponent and the top ``m + 1`` mantissa bits of
  ``y``'s float32 pattern (``m`` the most mantissa bits of any binade: the kept bits plus the round bit; ties away
  from zero need no sticky bits; below the lowest binade and in saturation only the exponent matters). So
  ``Q(t) = T_s[bits(y) >> (23 - m - 1)]`` with ``T_s = round_to_format(representatives, fmt) / s`` a table of
  ``2^(9 + m + 1)`` values (8192 for HiF8), the representative of a key being its pattern with zero low bits.
  Per element: one multiply, one shift, one mask, one gather, in chunks that stay in cache. NaN: ``t s`` of a NaN
  is a quiet NaN (IEEE 754: the top mantissa bit set), whose representative is a NaN, so NaN gives NaN.
* otherwise ``quantize_float32`` on chunks of ``t s``, divided by ``s`` in place.

``s`` should be a float32 value (:func:`float32`): the product and the division are then float32 operations
whichever way the backend converts the Python scalar (the division by a 0-dim tensor on the device:
:func:`common.formats.rounding.divide`).

Devices: the work runs on ``t``'s device (the lookup table is cached per device, :func:`lookup_table`) with no
host synchronisation; the chunks are cache-sized on CPUs, whole passes elsewhere
(:func:`common.formats.rounding.chunk_elements`). The scale is a Python float by design: the delayed-scaling
observers that choose it keep their amax histories on the host (:mod:`common.quantizers.w8a8`).
"""

from __future__ import annotations

import torch

from common.formats import Format, get_format
from common.formats.rounding import (
    as_float32,
    check_rounding,
    chunk_elements,
    divide,
    quantize_float32,
    round_to_format,
)
from common.formats.spec import Family

CHUNK = 1 << 15  # elements per CPU pass (128 KiB of float32 plus 128 KiB of keys: inside L2)
MAX_LOOKUP_BITS = 16  # sign + 8 exponent bits + up to 7 mantissa bits: a table of at most 65536 floats

_TABLES: dict[tuple[str, str], torch.Tensor] = {}


def float32(value: float) -> float:
    """``value`` rounded to the nearest float32 (the scale as the tensors see it)."""
    return float(torch.tensor(value, dtype=torch.float32))


def lookup_bits(fmt: str | Format) -> int | None:
    """Key width of the lookup path for ``fmt`` (``1 + 8 + m + 1``), None where the path does not apply.

    Applies to FLOAT and TAPERED formats whose default rounding is ties-away (HiF8) and whose key fits
    :data:`MAX_LOOKUP_BITS`; round-to-nearest-even needs the sticky bits, so those take the generic path.
    """
    fmt = get_format(fmt)
    if fmt.default_rounding != "away" or fmt.family not in (Family.FLOAT, Family.TAPERED):
        return None
    mantissa = max(fmt.mantissa_bits_by_exponent.values()) if fmt.family is Family.TAPERED else fmt.mantissa_bits
    bits = 1 + 8 + mantissa + 1
    return bits if bits <= MAX_LOOKUP_BITS else None


def lookup_table(fmt: str | Format, device: torch.device | str = "cpu") -> torch.Tensor:
    """``round_to_format`` of every key's representative, float32 on ``device`` (cached); see the module docstring."""
    fmt = get_format(fmt)
    bits = lookup_bits(fmt)
    if bits is None:
        raise ValueError(f"format {fmt.name!r} has no lookup table (rounding {fmt.default_rounding!r})")
    key = (fmt.name, str(torch.device(device)))
    if key not in _TABLES:
        codes = torch.arange(1 << bits, dtype=torch.int64)
        representatives = (codes << (32 - bits)).to(torch.int32).view(torch.float32)  # int64 -> int32 wraps the sign
        _TABLES[key] = round_to_format(representatives, fmt).to(device)
    return _TABLES[key]


def scaled_qdq(t: torch.Tensor, scale: float, fmt: str | Format = "hif8") -> torch.Tensor:
    """``round_to_format(t.float() * scale, fmt) / scale`` in ``t``'s dtype and shape (module docstring), a new
    tensor."""
    fmt = get_format(fmt)
    x = as_float32(t).contiguous()
    flat = x.view(-1)
    out = torch.empty_like(flat)
    bits = lookup_bits(fmt)
    chunk = chunk_elements(flat.device, CHUNK)
    if bits is None:
        rounding = check_rounding(None, fmt)
        divisor = torch.full((), scale, dtype=torch.float32, device=flat.device)  # a true division on CUDA too
        for start in range(0, flat.numel(), chunk):
            part = quantize_float32(flat[start : start + chunk] * scale, fmt, rounding, "saturate", None)
            torch.div(part, divisor, out=out[start : start + chunk])
    else:
        table = divide(lookup_table(fmt, flat.device), scale)
        shift, mask = 32 - bits, (1 << bits) - 1
        size = min(chunk, flat.numel())
        scaled = torch.empty(size, dtype=torch.float32, device=flat.device)
        keys = torch.empty(size, dtype=torch.int32, device=flat.device)
        for start in range(0, flat.numel(), chunk):
            n = min(chunk, flat.numel() - start)
            y, k = scaled[:n], keys[:n]
            torch.mul(flat[start : start + n], scale, out=y)
            torch.bitwise_right_shift(y.view(torch.int32), shift, out=k)
            k.bitwise_and_(mask)
            torch.index_select(table, 0, k, out=out[start : start + n])
    out = out.view(x.shape)
    return out if t.dtype == torch.float32 else out.to(t.dtype)
