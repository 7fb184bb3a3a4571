"""Bit codes of formats of 8 bits or fewer: ``encode`` (round to the format, then look the value up) and ``decode``.

Codes are returned as ``torch.uint8`` holding the format's ``bits`` low bits (UE4M3 codes are 0..127, E2M1 codes
0..15). Where a value has two codes, ``encode`` picks one canonically: -0.0 encodes to the negative-zero code
only if the format has one (signed FLOAT formats), NaN encodes to the format's lowest NaN code, and a NaN in a
format without a NaN code is a ``ValueError``.

Devices: codes and values stay on the input's device (the code tables are cached per device). The input checks
read one flag back to the host: ``decode``'s range check of the codes, and ``encode``'s NaN check for the formats
without a NaN code (NaN-coded formats map NaN without looking).
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from .registry import get_format
from .rounding import round_to_format
from .spec import Format


def decode(codes: torch.Tensor, fmt: str | Format) -> torch.Tensor:
    """float32 values of integer ``codes`` (any integer dtype; each in ``0 .. 2^bits - 1``)."""
    fmt = _codebook(fmt)
    if not isinstance(codes, torch.Tensor) or codes.dtype.is_floating_point or codes.dtype == torch.bool:
        raise ValueError(f"codes must be an integer tensor, got {getattr(codes, 'dtype', type(codes).__name__)}")
    index = codes.long()
    bad = (index < 0) | (index >= 2**fmt.bits)
    if bool(bad.any()):
        raise ValueError(
            f"code {int(index[bad][0])} is out of range for {fmt.name!r} ({fmt.bits}-bit codes: 0..{2**fmt.bits - 1})"
        )
    return _device_tables(fmt.name, index.device)[0][index]


def encode(
    x: torch.Tensor,
    fmt: str | Format,
    *,
    rounding: str | None = None,
    overflow: str = "saturate",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """uint8 codes of ``round_to_format(x, fmt, ...)`` (same keyword arguments and policies as
    :func:`~common.formats.rounding.round_to_format`)."""
    fmt = _codebook(fmt)
    q = round_to_format(x, fmt, rounding=rounding, overflow=overflow, generator=generator).float()
    _, sorted_values, sorted_codes = _device_tables(fmt.name, q.device)
    specials = _tables(fmt.name)[3]
    index = torch.searchsorted(sorted_values, q.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)).clamp_(
        max=sorted_values.numel() - 1
    )
    codes = sorted_codes[index]
    neg_zero, nan_code, pos_inf, neg_inf = specials
    if neg_zero is not None:
        codes = torch.where((q == 0) & q.signbit(), neg_zero, codes)
    nan = q.isnan()
    if nan_code is not None:
        codes = torch.where(nan, nan_code, codes)
    elif bool(nan.any()):
        raise ValueError(f"NaN cannot be encoded in {fmt.name!r}: the format has no NaN code")
    if pos_inf is not None:
        codes = torch.where(q == float("inf"), pos_inf, torch.where(q == float("-inf"), neg_inf, codes))
    return codes.to(torch.uint8)


def _codebook(fmt: str | Format) -> Format:
    fmt = get_format(fmt)
    if not fmt.is_codebook:
        raise ValueError(f"format {fmt.name!r} has {fmt.bits} bits: encode/decode cover formats of 8 bits or fewer")
    return fmt


@cache
def _device_tables(name: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The three tensors of :func:`_tables` on ``device`` (cached per device)."""
    values, sorted_values, sorted_codes, _ = _tables(name)
    return values.to(device), sorted_values.to(device), sorted_codes.to(device)


@cache
def _tables(name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int | None, ...]]:
    """(value of each code, sorted distinct finite values, their canonical codes, special codes)."""
    fmt = get_format(name)
    values = fmt.code_values
    finite = np.isfinite(values)
    canonical: dict[float, int] = {}
    for code in np.flatnonzero(finite):
        value = float(values[code]) + 0.0  # -0.0 and +0.0 share a key; the lowest code (+0.0) wins
        canonical.setdefault(value, int(code))
    sorted_values = sorted(canonical)
    neg_zero = next((int(c) for c in np.flatnonzero(finite) if values[c] == 0 and np.signbit(values[c])), None)
    if not fmt.has_negative_zero:
        neg_zero = None
    nan_codes = np.flatnonzero(np.isnan(values))
    pos_inf = np.flatnonzero(values == np.inf)
    neg_inf = np.flatnonzero(values == -np.inf)
    specials = (
        neg_zero,
        int(nan_codes[0]) if nan_codes.size else None,
        int(pos_inf[0]) if pos_inf.size else None,
        int(neg_inf[0]) if neg_inf.size else None,
    )
    return (
        torch.tensor(values, dtype=torch.float32),
        torch.tensor(sorted_values, dtype=torch.float32),
        torch.tensor([canonical[v] for v in sorted_values], dtype=torch.int64),
        specials,
    )
