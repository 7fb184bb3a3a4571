"""This report's numerics against the *Is finer better?* authors', as data for
:func:`common.report.conventions_table` (one row per field with an ``aspect`` label, the authors' ``where``).

The authors' repository ``iclr2016codeshare/microscaling`` holds two numerics that disagree with each other: the
analytic model (``modelling_errors_from_theory_fp8_scales.py`` at 3c3dae1, cited ``theory.py:<line>``) and the
UE5M3 fork of microxcaling that ran their models (``microxcaling/mx/cpp/mx.cuh`` and ``mx/specs.py``, ``main.py``,
``run_model.sh`` at ff4346c; ``run_model.sh:145`` sets ``custom_cuda=true``, so the CUDA kernel quantizes). Ours:
:mod:`common.theory` and :func:`common.scaling.quantize_blocks` with their defaults, both models in the report.

* Analytic model: ours is exact (the other elements of a block conditioned on its max); the paper's truncates them
  at +-6s, s the quantized scale (``theory.py:124-151``). The report uses both: the paper's for its claims, ours
  for the implementation check and our finding.
* Integration: ours is Gauss-Legendre between every rounding boundary (float64, :mod:`common.theory.block_mse`);
  theirs is ``scipy.integrate.quad`` per scale bin with ``limit=100`` and no breakpoints at the element roundings
  (``theory.py:104-115``), which leaves up to 5e-5 of the total MSE (n 2, sigma 0.005; measured on 96 points of
  their grid, all 8 block sizes).
* UE4M3 largest scale: 448 in both analytic models (``theory.py:46-47`` skips 480); the kernel saturates at 480
  (``mx.cuh:65-69``, scale_mode 143), an E4M3 value that E4M3FN reserves for NaN.
* A block whose scale rounds to 0: both models and ``quantize_blocks`` make it zero; the kernel replaces the scale by
  1 (``mx.cuh:70``), whose elements (all below ``6 * 2^-10``) still round to 0 in E2M1: the same values.
* UE5M3 largest scale: 114688 here (only the all-ones code is NaN, as their ``get_positive_scale_qlevels(5, 3)``
  would give); the kernel's 61440 (``mx.cuh:77-81``, scale_mode 53). A scale above 61440 needs a block max above
  ``6 * 61440 = 368640``.
* Ties: to even here; their ``round = "nearest"`` (``mx/specs.py:103``) is ``rd_away``, ties away from zero
  (``mx/cpp/common.cuh:131``), for the scale and the elements.
* Arithmetic: float32 here; their models load in the checkpoint's dtype (``main.py:67, 79``, ``torch_dtype='auto'``:
  bf16 for their models) and the kernel forms ``x / s`` and ``q * s`` in that dtype, the rounding in float32
  (``mx.cuh:95-101``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AUTHORS_CODE = ("iclr2016codeshare/microscaling: theory.py = modelling_errors_from_theory_fp8_scales.py @ 3c3dae1; "
                "kernel microxcaling/mx/cpp/mx.cuh @ ff4346c")


def _aspect(label: str, values: dict[str, str] | None = None) -> dict[str, Any]:
    """Field metadata of a compared aspect (:func:`common.report.conventions_table`): its label and value texts."""
    return {"aspect": label, "values": values or {}}


@dataclass(frozen=True)
class MicroscalingConvention:
    """The numerics of one side (module docstring); ``source`` and ``where`` (``(field, location)`` pairs) say where
    the authors' code does each aspect."""

    name: str
    analytic_model: str = field(metadata=_aspect("analytic MSE model: the other elements of a block", {
        "both": "both: the paper's (its claims) and ours, conditioned on the block max (checks, our finding)",
        "paper": "Normal truncated at +-6s, s the quantized scale"}))
    integration: str = field(metadata=_aspect("analytic model: integration", {
        "gauss_legendre": "Gauss-Legendre between every rounding boundary (float64)",
        "quad": "scipy quad per scale bin, limit 100, no breakpoints at element roundings (total within 5e-5)"}))
    ue4m3_max_theory: float = field(metadata=_aspect("largest UE4M3 scale, analytic model"))
    ue4m3_max_quantizer: float = field(metadata=_aspect("largest UE4M3 scale, quantizer (saturation)"))
    zero_scale_quantizer: str = field(metadata=_aspect("quantizer: a block whose scale rounds to 0", {
        "zero": "becomes zero",
        "one": "scale replaced by 1 (its elements, all below 6 * 2^-10, still round to 0 in E2M1)"}))
    ue5m3_max_quantizer: float = field(metadata=_aspect("largest UE5M3 scale, quantizer (differs only for a block "
                                                        "max above 368640)"))
    ties: str = field(metadata=_aspect("round-to-nearest ties (scales and elements)", {
        "even": "to even", "away": "away from zero"}))
    arithmetic: str = field(metadata=_aspect("quantizer arithmetic", {
        "float32": "float32",
        "model_dtype": "x / s and q * s in the model's dtype (bf16), rounding in float32"}))
    source: str = ""
    where: tuple[tuple[str, str], ...] = ()


CONVENTIONS = {
    "lowbit": MicroscalingConvention("lowbit", "both", "gauss_legendre", 448.0, 448.0, "zero", 114688.0, "even",
                                     "float32"),
    "microscaling_limits_authors": MicroscalingConvention(
        "microscaling_limits_authors", "paper", "quad", 448.0, 480.0, "one", 61440.0, "away", "model_dtype",
        source=AUTHORS_CODE,
        where=(("analytic_model", "theory.py:124-151"), ("integration", "theory.py:104-115"),
               ("ue4m3_max_theory", "theory.py:46-47"), ("ue4m3_max_quantizer", "mx.cuh:65-69"),
               ("zero_scale_quantizer", "mx.cuh:70"), ("ue5m3_max_quantizer", "mx.cuh:77-81"),
               ("ties", "mx/specs.py:103, mx/cpp/common.cuh:131"),
               ("arithmetic", "main.py:67, 79 (torch_dtype='auto'); mx.cuh:95-101"))),
}
