"""Quantization-aware training: fake quantization with a straight-through estimator (STE); W8A8 QAT with
quantized gradients and delayed per-tensor scaling (HiF8, ``papers/maxwindow_hif8``); low-bit (1-4 bit) weight
QAT with learnable per-row scales (ParetoQ quantizers, for WinQ: ``common.winq``), their integer codes
(:func:`lowbit_codes`) and checkpoint files (:mod:`common.qat.lowbit_io`)."""

from common.lazy import lazy_exports
from common.recipes import HISTORY_UNITS, INT8_PER_TOKEN, LOWBIT_BITS, ROLES

# the recipe vocabulary above; the quantizers, their training and checkpoint files (torch) on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    "lowbit": ("LOWBIT_CODES", "LowBitHandle", "attach_lowbit", "effective_weight", "hadamard_matrix", "init_alpha",
               "int8_per_token", "lowbit_codes", "lowbit_grads", "lowbit_quantize", "lowbit_selection"),
    "lowbit_io": ("load_lowbit_model",),
    "scaled": ("scaled_qdq",),
    "ste": ("QATHandle", "attach_fake_quant", "ste_quantize"),
    "w8a8": ("TELEMETRY_FIELDS", "W8A8Handle", "W8A8Layer", "W8A8LinearFunction", "attach_w8a8", "saturation_summary",
             "w8a8_linear", "w8a8_selection"),
    "warmup": ("BF16Warmup",),
})

__all__ = ["HISTORY_UNITS", "INT8_PER_TOKEN", "LOWBIT_BITS", "ROLES", *_LAZY]
