"""Numerics conventions as data: this project's and the *Finer is Better* authors', and the options they give.

A :class:`NumericsConvention` names every choice where a faithful block quantizer may still differ from another
one that agrees on the formats and the scale rule; :data:`CONVENTIONS` holds ``"lowbit"`` (ours, the defaults of
:func:`common.scaling.quantize_blocks`) and ``"finer_is_better_authors"`` (read from ``clee1994/finer_is_better``
``torch_eval.py`` at commit 0080284, cited below as ``torch_eval.py:<line>``). :func:`block_options` and
:func:`spec_options` turn a convention and a paper variant (rule, prevent-zero, hierarchical, scale format) into
``quantize_blocks`` or :class:`common.recipes.QuantSpec` keyword arguments; :func:`common.report.conventions_table`
sets two conventions side by side in a report.

Under the authors' conventions the paper's variants (abs-max, prevent-zero, 4/6 with and without it, hierarchical
with abs-max, prevent-zero and 4/6, on UE4M3 and UE5M3 scales, blocks 4-32) agree bit for bit with an oracle of
their quantizer on float32 data (``compute_dtype`` None, their code computing in the data's dtype) and on bf16 data
(``"bfloat16"``): ``tests/scaling/test_authors_conformance.py``. What may still differ, each rare or outside the
paper's settings:

* float32 4/6: our second candidate is ``bmax / 4``, theirs ``(bmax / 6) * 1.5`` in float32 (a different scale
  for at most 2 of the 2^23 float32 significands per binade), and our near-ties are re-decided exactly where their
  float32 mean may round them apart (under ``"bfloat16"`` both are theirs, the mean's summation order being the
  device's);
* the UE5M3 maximum (:attr:`NumericsConvention.ue5m3_max`, documentation only: it matters only for a block max
  above ``6 * 61440 = 368640``);
* blocks with ``max|b| < 1e-7``: theirs clamps the max there (``torch_eval.py:291``), which changes no E4M3/UE5M3
  value but does change an E8M0 scale, and their E8M0 grid holds 0 and starts at 2^-126 (``:47-67``);
* E8M0 abs-max, which they round up (``torch_eval.py:298``): our rule ``e8m0_rceil``, named directly by a caller
  that wants it (the mapping below passes ``rule`` through).

The vocabulary a block quantization is checked against lives here too, free of torch, so that a spec
(:class:`common.recipes.QuantSpec`) is validated without loading the quantizers: the tie rules, compute dtypes and
4/6 E8M0 candidates (:func:`check_numerics`; their meaning in :mod:`common.scaling.rules`), the global-scale modes
and the block geometry (:func:`check_block_geometry`; :mod:`common.scaling.blocks`), and the options of each scale
rule (:data:`RULE_OPTIONS`, which :class:`common.scaling.rules.ScaleRule` checks against the rule's selector).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from common.formats import Family, Format, get_format
from common.registry import lookup

TIES = ("even", "down")  # how round-to-nearest breaks ties (common.scaling.rules)
COMPUTE_DTYPES = ("float32", "bfloat16")  # the arithmetic emulated (common.scaling.rules.Arithmetic)
E8M0_CANDIDATES = ("ocp", "floor_ceil")  # four_over_six's two candidates on a power-of-two scale grid
GLOBAL_SCALES = ("tensor", "row", "slice")  # two-level scaling: one global scale per tensor, row or dim-0 slice
# scale rule -> its options: the keyword options of its selector in common.scaling.rules beyond prevent_zero and
# the numerics (ties, compute_dtype), in signature order (ScaleRule checks them against the selector)
RULE_OPTIONS: dict[str, tuple[str, ...]] = {
    "absmax": (),
    "prevent_zero": (),
    "four_over_six": ("criterion", "e8m0_candidates"),
    "brute_force": (),
    "e8m0_floor": (),
    "e8m0_rceil": (),
    "unit": (),
}
HIERARCHICAL_SCOPES = {"token": "row", "sequence": "slice"}  # scope -> quantize_blocks global_scale
HIERARCHICAL_TARGET = 448.0  # c = max|x| / 448 with E4M3 scales, in both conventions (torch_eval.py:262-263)
FINER_IS_BETTER_CODE = "clee1994/finer_is_better torch_eval.py @ 0080284"


def check_numerics(ties: str, compute_dtype: str | None) -> str:
    """The compute dtype of the numerics ``ties`` and ``compute_dtype`` (None is ``"float32"``); ValueError naming
    a value not in :data:`TIES` or :data:`COMPUTE_DTYPES`."""
    if ties not in TIES:
        raise ValueError(f"unknown ties {ties!r}; valid: {', '.join(TIES)}")
    dtype = "float32" if compute_dtype is None else compute_dtype
    if dtype not in COMPUTE_DTYPES:
        raise ValueError(f"unknown compute_dtype {compute_dtype!r}; valid: None, {', '.join(COMPUTE_DTYPES)}")
    return dtype


def check_block_geometry(block_size: int | str | None, global_scale: str | None = None,
                         global_target: float | None = None) -> None:
    """ValueError naming the value unless the block geometry is valid: ``block_size`` an integer >= 1, ``"row"`` or
    None (per tensor); ``global_scale`` None or one of :data:`GLOBAL_SCALES`, ``"row"`` and ``"slice"`` only with
    blocks within rows; ``global_target`` None, or a finite number > 0 with a global scale. The one check of every
    entry point (:func:`common.scaling.quantize_blocks`, :class:`common.recipes.QuantSpec`)."""
    if block_size is not None and block_size != "row" and (
            isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1):
        raise ValueError(f"block_size must be an integer >= 1 or None (per tensor) or 'row' (one block per row), "
                         f"got {block_size!r}")
    if global_scale is not None and global_scale not in GLOBAL_SCALES:
        raise ValueError(f"unknown global_scale {global_scale!r}; valid: None, {', '.join(GLOBAL_SCALES)}")
    if block_size is None and global_scale in ("row", "slice"):
        raise ValueError(f"global_scale={global_scale!r} needs blocks within rows; block_size=None is one block per "
                         "tensor")
    if global_target is not None and (global_scale is None or isinstance(global_target, bool)
                                      or not isinstance(global_target, int | float)
                                      or not 0 < global_target < math.inf):
        raise ValueError(f"global_target must be a finite number > 0 and needs a global_scale mode, got "
                         f"{global_target!r} with global_scale={global_scale!r}")


def is_power_of_two_format(fmt: Format) -> bool:
    """Whether ``fmt`` is a grid of powers of two (a float format without mantissa bits: E8M0)."""
    return fmt.family is Family.FLOAT and fmt.mantissa_bits == 0


def _aspect(label: str, values: dict[str, str] | None = None) -> dict[str, Any]:
    """Field metadata of a compared aspect: its report label and descriptions of its values."""
    return {"aspect": label, "values": values or {}}


@dataclass(frozen=True)
class NumericsConvention:
    """One set of numerics conventions (ValueError naming a bad field value).

    ``hierarchical_scope``: what one FP32 hierarchical scale ``c = max|x| / T`` covers: ``"token"`` (ours, one
    ``c`` per row of the last axis: per token of an activation; ``global_scale="row"``) or ``"sequence"`` (the
    authors': one ``c`` per index of dim 0, amax over every other axis, ``torch_eval.py:258-260``: per 2048-token
    sequence at batch 1; ``global_scale="slice"``). Weights agree: one ``c`` per output row.

    ``ties``: ``"even"`` (ours) or ``"down"`` (the authors': E2M1 elements, ``torch_eval.py:282-287``, and
    non-E4M3 scales, ``:139-143``, by ``bucketize`` on grid midpoints, a tie to the smaller magnitude; E4M3 scales
    by the ``float8_e4m3fn`` cast, ``:106-108``, nearest even in both).

    ``compute_dtype``: ``"float32"`` (ours) or ``"bfloat16"`` (the authors' model and its eager ops are bf16,
    ``torch_eval.py:383``; the op order, lines 257-340, in :class:`common.scaling.rules.Arithmetic`).

    ``e8m0_candidates``: four_over_six's pair on E8M0 scales: ``"ocp"`` (ours: OCP floor and rceil) or
    ``"floor_ceil"`` (the authors': floor and ceiling of ``max/6`` on the power-of-two grid,
    ``torch_eval.py:324-327``).

    ``ue5m3_hierarchical_target``: ``T`` of the hierarchical scale with UE5M3 block scales: 448 (our config) or
    61440 (the authors': the UE5M3 grid's max, ``torch_eval.py:264-272``). E4M3 scales use 448 in both.

    ``ue5m3_max``: the largest UE5M3 scale: 114688 (ours, E4M3FN-style: only the all-ones code is NaN) or 61440
    (the authors' grid reserves the top exponent, ``torch_eval.py:56``). Documentation only: a scale beyond 61440
    needs a block max above 368640, which no option here changes.

    ``source``: whose code the convention is read from ("" for this project); ``where``: the place in ``source``
    of each aspect, ``(field, location)`` pairs sorted by field (a mapping is accepted; keys must be aspect
    fields), for :func:`common.report.conventions_table`.
    """

    name: str
    hierarchical_scope: str = field(metadata=_aspect(
        "hierarchical scale c = max|x|/T",
        {"token": "one c per token (row of the last axis)", "sequence": "one c per dim-0 slice (sequence)"}))
    ties: str = field(metadata=_aspect(
        "round-to-nearest ties (elements, non-E4M3 scales)", {"even": "to even", "down": "to the smaller magnitude"}))
    compute_dtype: str = field(metadata=_aspect(
        "fake-quantization arithmetic", {"float32": "float32", "bfloat16": "bfloat16 eager ops"}))
    e8m0_candidates: str = field(metadata=_aspect(
        "4/6 candidates on E8M0 scales",
        {"ocp": "OCP floor and round-up", "floor_ceil": "floor and ceiling of max/6"}))
    ue5m3_hierarchical_target: float = field(metadata=_aspect("hierarchical T with UE5M3 scales"))
    ue5m3_max: float = field(metadata=_aspect("largest UE5M3 scale"))
    source: str = ""
    where: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for name, valid in (("hierarchical_scope", tuple(HIERARCHICAL_SCOPES)), ("ties", TIES),
                            ("compute_dtype", COMPUTE_DTYPES), ("e8m0_candidates", E8M0_CANDIDATES)):
            if getattr(self, name) not in valid:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; valid: {', '.join(valid)}")
        for name in ("ue5m3_hierarchical_target", "ue5m3_max"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        where = dict(self.where)
        fields_ = [aspect["field"] for aspect in aspects()]
        for key in where:
            if key not in fields_:
                raise ValueError(f"unknown aspect {key!r} in where; valid: {', '.join(fields_)}")
        object.__setattr__(self, "where", tuple(sorted(where.items())))

    def hierarchical_target(self, scale: str) -> float:
        """``T`` of ``c = max|x| / T`` with ``scale`` block scales (UE5M3: the convention's, else 448)."""
        return float(self.ue5m3_hierarchical_target if scale == "ue5m3" else HIERARCHICAL_TARGET)


def aspects() -> list[dict[str, Any]]:
    """The compared aspects of :class:`NumericsConvention` (the fields with an ``aspect`` label): ``{"field",
    "aspect", "values"}`` from the fields' metadata, in field order."""
    return [{"field": f.name, **f.metadata} for f in fields(NumericsConvention) if "aspect" in f.metadata]


CONVENTIONS: dict[str, NumericsConvention] = {
    "lowbit": NumericsConvention("lowbit", "token", "even", "float32", "ocp", 448.0, 114688.0),
    "finer_is_better_authors": NumericsConvention(
        "finer_is_better_authors", "sequence", "down", "bfloat16", "floor_ceil", 61440.0, 61440.0,
        source=FINER_IS_BETTER_CODE,
        where={"hierarchical_scope": "torch_eval.py:258-260", "ties": "torch_eval.py:139-143, 282-287",
               "compute_dtype": "torch_eval.py:383 (bf16 model), 257-340",
               "e8m0_candidates": "torch_eval.py:324-327", "ue5m3_hierarchical_target": "torch_eval.py:264-274",
               "ue5m3_max": "torch_eval.py:56, 139"}),
}


def get_convention(name: str | NumericsConvention) -> NumericsConvention:
    """The convention ``name`` of :data:`CONVENTIONS` (a :class:`NumericsConvention` passes through)."""
    return name if isinstance(name, NumericsConvention) else lookup(CONVENTIONS, name, "numerics convention")


def spec_options(convention: str | NumericsConvention, rule: str, *, prevent_zero: bool = False,
                 hierarchical: bool = False, scale: str = "ue4m3") -> dict[str, Any]:
    """:class:`common.recipes.QuantSpec` keyword arguments of a variant under ``convention``: ``rule``,
    ``prevent_zero``, ``global_scale`` and ``global_target`` (hierarchical: the scope's mode and ``T``, else None),
    ``ties``, ``compute_dtype`` (None for float32) and ``rule_options`` (``e8m0_candidates`` for four_over_six on
    a power-of-two scale format when not ``"ocp"``, else empty: our convention gives today's specs exactly)."""
    convention = get_convention(convention)
    power_of_two = is_power_of_two_format(get_format(scale))
    rule_options = ({"e8m0_candidates": convention.e8m0_candidates}
                    if rule == "four_over_six" and power_of_two and convention.e8m0_candidates != "ocp" else {})
    return {"rule": rule, "prevent_zero": prevent_zero,
            "global_scale": HIERARCHICAL_SCOPES[convention.hierarchical_scope] if hierarchical else None,
            "global_target": convention.hierarchical_target(scale) if hierarchical else None,
            "ties": convention.ties,
            "compute_dtype": None if convention.compute_dtype == "float32" else convention.compute_dtype,
            "rule_options": rule_options}


def block_options(convention: str | NumericsConvention, rule: str, *, prevent_zero: bool = False,
                  hierarchical: bool = False, scale: str = "ue4m3") -> dict[str, Any]:
    """:func:`common.scaling.quantize_blocks` keyword arguments of a variant under ``convention``:
    :func:`spec_options` with the rule options spread out."""
    options = spec_options(convention, rule, prevent_zero=prevent_zero, hierarchical=hierarchical, scale=scale)
    rule_options = options.pop("rule_options")
    return {**options, **rule_options}

