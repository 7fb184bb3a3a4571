"""The quantizers that apply a recipe of :mod:`common.recipes` to a model's Linear layers, one module per recipe
type, and the one function that quantizes a tensor with a :class:`common.recipes.QuantSpec`
(:func:`quantize_tensor`). The front door :mod:`common.quantization` dispatches to them (its table
:data:`common.quantization.RECIPE_PATHS`); every caller of the project that applies a recipe to a model goes
through it.

* :mod:`.block`: :func:`quantize_tensor`, and post-training fake quantization of weights and inputs with a block
  recipe, in place and reversibly (:func:`apply_quantization`);
* :mod:`.ste`: fake-quant QAT with a block recipe and a straight-through estimator (:func:`attach_fake_quant`);
* :mod:`.w8a8` and :mod:`.scaled`: W8A8 QAT with delayed per-tensor scaling of the three GEMM operands (HiF8,
  *Max-Window*; :func:`attach_w8a8`);
* :mod:`.lowbit`: ParetoQ low-bit weight QAT with learned per-row scales (WinQ; :func:`attach_lowbit`).

Every module here imports torch; the recipes, their names and their records do not (:mod:`common.recipes`).
"""

from .block import QuantizationHandle, apply_quantization, quantize_tensor
from .lowbit import (
    LOWBIT_CODES,
    LowBitHandle,
    attach_lowbit,
    effective_weight,
    hadamard_matrix,
    init_alpha,
    int8_per_token,
    lowbit_codes,
    lowbit_grads,
    lowbit_quantize,
    lowbit_selection,
)
from .scaled import scaled_qdq
from .ste import QATHandle, attach_fake_quant, ste_quantize
from .w8a8 import (
    TELEMETRY_FIELDS,
    W8A8Handle,
    W8A8Layer,
    W8A8LinearFunction,
    attach_w8a8,
    saturation_summary,
    w8a8_linear,
    w8a8_selection,
)

__all__ = [
    "LOWBIT_CODES",
    "TELEMETRY_FIELDS",
    "LowBitHandle",
    "QATHandle",
    "QuantizationHandle",
    "W8A8Handle",
    "W8A8Layer",
    "W8A8LinearFunction",
    "apply_quantization",
    "attach_fake_quant",
    "attach_lowbit",
    "attach_w8a8",
    "effective_weight",
    "hadamard_matrix",
    "init_alpha",
    "int8_per_token",
    "lowbit_codes",
    "lowbit_grads",
    "lowbit_quantize",
    "lowbit_selection",
    "quantize_tensor",
    "saturation_summary",
    "scaled_qdq",
    "ste_quantize",
    "w8a8_linear",
    "w8a8_selection",
]
