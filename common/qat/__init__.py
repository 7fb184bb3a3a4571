"""Quantization-aware training: fake quantization with a straight-through estimator (STE), and W8A8 QAT with
quantized gradients and delayed per-tensor scaling (HiF8, ``papers/maxwindow_hif8``)."""

from .scaled import scaled_qdq
from .ste import QATHandle, attach_fake_quant, ste_quantize
from .w8a8 import (
    ROLES,
    TELEMETRY_FIELDS,
    W8A8Handle,
    W8A8Layer,
    W8A8LinearFunction,
    attach_w8a8,
    w8a8_linear,
    w8a8_selection,
)
from .warmup import BF16Warmup

__all__ = [
    "ROLES",
    "TELEMETRY_FIELDS",
    "BF16Warmup",
    "QATHandle",
    "W8A8Handle",
    "W8A8Layer",
    "W8A8LinearFunction",
    "attach_fake_quant",
    "attach_w8a8",
    "scaled_qdq",
    "ste_quantize",
    "w8a8_linear",
    "w8a8_selection",
]
