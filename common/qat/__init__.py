"""Quantization-aware training: fake quantization with a straight-through estimator (STE)."""

from .ste import QATHandle, attach_fake_quant, ste_quantize

__all__ = ["QATHandle", "attach_fake_quant", "ste_quantize"]
