"""Quantization recipes as data: frozen dataclasses that name the numerics of a model's Linear layers, validated on
construction and read by the code that applies them (in the style of TransformerEngine's
``transformer_engine.common.recipe``: plain recipe types deriving from one :class:`Recipe` base, and modules that
read them). A recipe knows nothing of that code: which implementation applies which recipe type is the dispatch
table of the front door, :data:`common.quantization.RECIPE_PATHS`.

* :class:`QuantSpec`: one block quantization of a tensor along one axis (element and scale formats, block size or
  ``"row"`` or ``None`` per tensor, scale rule and its options, prevent-zero, global scale and its target);
  ``rule=None`` describes learned (QAT) scales. The one function that quantizes a tensor with a spec is
  :func:`common.quantizers.quantize_tensor`.
* :class:`QuantRecipe` (``record_type`` ``"block"``): the block specs of a Linear layer's roles, ``weights`` and
  ``activations`` (the layer input): post-training quantization and quantized checkpoints, or fake-quant QAT with a
  straight-through estimator.
* :class:`DelayedScalingRecipe` (``"delayed_scaling"``): per-tensor delayed scaling of all three GEMM operands
  (input, weight, output gradient), the HiF8 W8A8 QAT of *Max-Window*.
* :class:`LowBitRecipe` (``"lowbit"``): ParetoQ low-bit weight QAT with learned per-row scales, optional int8
  per-token inputs and Hadamard rotation.

Each validates itself on construction (the one validator of every entry point: ValueError naming the field and
the value). A spec is checked against the names and options of :mod:`common.scaling.conventions`, so importing
this module loads no quantizer and not torch (a step that only reads records never needs them).

``to_dict``/``from_dict`` are the JSON records; :func:`recipe_to_dict`/:func:`recipe_from_dict` add and read a
``"type"`` (:data:`RECIPE_TYPES`). Names are resolved here and only here: :data:`RECIPES` is the one registry of
named recipes (the block ones built from :data:`SPECS`, the table of named block specs), :func:`get_recipe` looks a
name up and :func:`resolve_recipe` reads what a caller or a command line gives (a recipe, a name, a JSON object or
a ``.json`` file).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from common.formats import FORMATS
from common.observers import HIF8_MAX_VAL, OBSERVERS, make_observer
from common.registry import lookup
from common.scaling.conventions import RULE_OPTIONS, check_block_geometry, check_numerics

_SPEC_FIELDS = ("elem", "scale", "block_size", "rule", "prevent_zero", "global_scale", "rule_options", "global_target",
                "axis", "ties", "compute_dtype")
_NUMERICS_DEFAULTS = {"ties": "even", "compute_dtype": None}  # written to a record only when not these (to_dict)
_RECIPE_FIELDS = ("name", "weights", "activations")
HISTORY_UNITS = ("call", "step")  # what one amax history entry is: a forward/backward call or an optimizer step
ROLES = ("input", "weight", "grad_output")  # the operands of a Linear's three GEMMs (forward, dgrad, wgrad)
AMAX_REDUCTIONS = ("none", "data_parallel")  # whose amax a call observes: its own rank's, or the max over the ranks
LOWBIT_BITS = (1, 1.58, 2, 3, 4)  # ParetoQ weight bit widths (1.58: ternary)
ACTIVATION_BITS = (8,)  # ParetoQ's A8: int8 per token


@dataclass(frozen=True)
class QuantSpec:
    """One block quantization: ``quantize_blocks(x, elem, scale, block_size, rule, prevent_zero=...,
    global_scale=..., global_target=..., axis=axis, ties=..., compute_dtype=..., **rule_options)``.

    ``elem``/``scale``: registered format names (:data:`common.formats.FORMATS`); ``block_size``: elements per block
    along ``axis``, ``"row"`` for one block spanning the whole of ``axis`` (with the default axis: per output
    channel of a weight, per token of an activation), None for one scale per tensor; ``axis``: the axis the blocks
    run along, -1 by default (a Linear weight's ``in_features`` and an activation's hidden axis: the reduction axis
    of the forward GEMM, as MX and NVFP4 define it; 0 blocks a weight along ``out_features``, as the transposed
    weight of a backward GEMM needs; quantized checkpoints store weights blocked along -1 only); ``rule``: a name
    from :data:`common.scaling.RULES`, or None when the scales are learned (QAT) rather than selected from the data
    (see the module docstring; then ``prevent_zero``, ``global_scale`` and ``rule_options`` must keep their
    defaults, which only a rule would use); ``global_scale``: None, ``"tensor"``, ``"row"`` or ``"slice"``
    (two-level scaling; for activations ``"row"`` is per token, ``"slice"`` per index of dim 0: per sequence of a
    ``(batch, seq, hidden)`` input; for a weight both are per output row); ``rule_options``: extra keyword
    arguments of the rule (e.g. ``{"criterion": "mae"}`` or ``{"e8m0_candidates": "floor_ceil"}`` for
    four_over_six), stored as sorted ``(key, value)`` pairs so that the spec stays hashable (a mapping is accepted
    and converted); ``global_target``: the divisor of the global scale ``g = amax / global_target`` (None: the
    rule's default, see :mod:`common.scaling.blocks`); ``ties``: ``"even"`` (default) or ``"down"`` (the *Finer is
    Better* authors' midpoint bucketing), and ``compute_dtype``: None (float32, default; ``"float32"`` is stored as
    None) or ``"bfloat16"`` (the authors' bf16 arithmetic): the numerics conventions of
    :mod:`common.scaling.rules`, which a spec of learned scales leaves at their defaults. ``to_dict`` writes these
    two only when they differ from the defaults, so every record written before they existed is unchanged and
    reads back as before.
    """

    elem: str
    scale: str
    block_size: int | str | None = 16
    rule: str | None = "absmax"
    prevent_zero: bool = False
    global_scale: str | None = None
    rule_options: tuple[tuple[str, Any], ...] = ()
    global_target: float | None = None
    axis: int = -1
    ties: str = "even"
    compute_dtype: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.axis, int) or isinstance(self.axis, bool):
            raise ValueError(f"axis must be an integer (the axis the blocks run along), got {self.axis!r}")
        lookup(FORMATS, self.elem, "format")  # names only (JSON-able); a Format object is refused
        lookup(FORMATS, self.scale, "format")
        valid = () if self.rule is None else lookup(RULE_OPTIONS, self.rule, "scale rule")
        check_block_geometry(self.block_size, self.global_scale, self.global_target)
        if not isinstance(self.prevent_zero, bool):
            raise ValueError(f"prevent_zero must be a bool, got {self.prevent_zero!r}")
        if check_numerics(self.ties, self.compute_dtype) == "float32":
            object.__setattr__(self, "compute_dtype", None)
        options = dict(self.rule_options)
        if self.rule is None:
            for field, value, default in (("prevent_zero", self.prevent_zero, False),
                                          ("global_scale", self.global_scale, None), ("rule_options", options, {}),
                                          *((name, getattr(self, name), default)
                                            for name, default in _NUMERICS_DEFAULTS.items())):
                if value != default:
                    raise ValueError(f"{field}={value!r} needs a scale rule: with rule=None (learned scales) it must "
                                     f"be {default!r}")
            object.__setattr__(self, "rule_options", ())
            return
        for key in options:
            if key not in valid:
                raise ValueError(f"unknown option {key!r} of scale rule {self.rule!r}; "
                                 f"valid options: {', '.join(valid) or 'none'}")
        object.__setattr__(self, "rule_options", tuple(sorted(options.items())))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``rule_options`` as a dict; ``block_size`` an integer, ``"row"`` or None; ``rule``
        None for learned scales; ``ties`` and ``compute_dtype`` only when not at their defaults)."""
        numerics = {name: getattr(self, name) for name, default in _NUMERICS_DEFAULTS.items()
                    if getattr(self, name) != default}
        return {"elem": self.elem, "scale": self.scale, "block_size": self.block_size, "rule": self.rule,
                "prevent_zero": self.prevent_zero, "global_scale": self.global_scale,
                "rule_options": dict(self.rule_options), "global_target": self.global_target, "axis": self.axis,
                **numerics}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuantSpec:
        """Inverse of :meth:`to_dict`; missing keys take their defaults, unknown keys are a ValueError."""
        _check_keys(data, _SPEC_FIELDS, "quantization spec")
        values = dict(data)
        values["rule_options"] = tuple(dict(values.get("rule_options") or {}).items())
        return cls(**values)


INT8_PER_TOKEN = QuantSpec("int8", "fp32", "row", "absmax")  # ParetoQ's A8: int8 per token (LowBitRecipe)


class Recipe(ABC):
    """The base of every recipe type (as TransformerEngine's ``Recipe``): a frozen dataclass, validated on
    construction, naming the numerics of the selected Linear layers (``name``: a label for reports). It holds data
    only; the front door :mod:`common.quantization` looks up how a recipe type is applied.

    ``record_type`` is the ``"type"`` of the recipe's record (:func:`recipe_to_dict`, :data:`RECIPE_TYPES`).
    """

    record_type: ClassVar[str]
    name: str | None

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict of the fields (:func:`recipe_to_dict` adds ``"type"``)."""


def check_recipe(recipe: Any, kind: type[Recipe]) -> Any:
    """``recipe`` if it is a ``kind``, else ValueError naming it (the attach functions take one recipe type)."""
    if not isinstance(recipe, kind):
        raise ValueError(f"expected a {kind.__name__}, got {recipe!r}")
    return recipe


@dataclass(frozen=True)
class QuantRecipe(Recipe):
    """Weight and activation quantization of the selected Linear layers.

    ``weights``: applied once to each selected weight (blocks along ``in_features``); ``activations``: applied
    on every forward pass to the layer input (blocks along its last, hidden axis). Either may be None, not
    both. ``name`` is a label for reports.
    """

    record_type: ClassVar[str] = "block"
    weights: QuantSpec | None
    activations: QuantSpec | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        for part in ("weights", "activations"):
            value = getattr(self, part)
            if value is not None and not isinstance(value, QuantSpec):
                raise ValueError(f"{part} must be a QuantSpec or None, got {value!r}")
        if self.weights is None and self.activations is None:
            raise ValueError("a QuantRecipe needs weights, activations or both; got neither")
        if self.activations is not None and self.activations.rule is None:
            raise ValueError("activations are quantized on every forward pass from their own values: their spec needs "
                             "a scale rule, got rule=None (learned scales apply to weights)")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict: ``{"name", "weights", "activations"}`` with specs as :meth:`QuantSpec.to_dict`
        (the record of quantized checkpoints; :func:`recipe_to_dict` adds ``"type": "block"``)."""
        return {"name": self.name,
                "weights": None if self.weights is None else self.weights.to_dict(),
                "activations": None if self.activations is None else self.activations.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuantRecipe:
        """Inverse of :meth:`to_dict` (a ``"type": "block"`` key is accepted); a missing part is None, unknown keys
        are a ValueError."""
        data = _without_type(data, cls.record_type)
        _check_keys(data, _RECIPE_FIELDS, "recipe")
        parts = {part: None if data.get(part) is None else QuantSpec.from_dict(data[part])
                 for part in ("weights", "activations")}
        return cls(parts["weights"], parts["activations"], data.get("name"))


def _check_keys(data: Mapping[str, Any], valid: tuple[str, ...], what: str) -> None:
    if not isinstance(data, Mapping):
        raise ValueError(f"a {what} must be a mapping, got {data!r}")
    for key in data:
        if key not in valid:
            raise ValueError(f"unknown {what} key {key!r}; valid keys: {', '.join(valid)}")


def check_roles(roles: Any) -> tuple[str, ...]:
    """``roles`` as a tuple in :data:`ROLES` order: a non-empty subset of :data:`ROLES` without repeats; ValueError
    naming the value otherwise."""
    if isinstance(roles, str) or not roles or len(set(roles)) != len(roles) or not set(roles) <= set(ROLES):
        raise ValueError(f"roles must be a non-empty subset of {', '.join(ROLES)} without repeats, got {roles!r}")
    return tuple(role for role in ROLES if role in roles)


def check_amax_reduction(amax_reduction: Any) -> str:
    """``amax_reduction`` if it is one of :data:`AMAX_REDUCTIONS`, else ValueError naming it."""
    if amax_reduction not in AMAX_REDUCTIONS:
        raise ValueError(f"unknown amax_reduction {amax_reduction!r}; valid: {', '.join(AMAX_REDUCTIONS)}")
    return amax_reduction


def _field_names(kind: type) -> tuple[str, ...]:
    """The dataclass fields of ``kind`` (its ``record_type`` is a class variable, not a field)."""
    return tuple(field.name for field in fields(kind))


def _without_type(data: Mapping[str, Any], expected: str) -> dict[str, Any]:
    """``data`` without its ``"type"`` key; ValueError when that key names another recipe type."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a {expected} recipe must be a mapping, got {data!r}")
    values = dict(data)
    kind = values.pop("type", expected)
    if kind != expected:
        raise ValueError(f"recipe type {kind!r} is not {expected!r}")
    return values


@dataclass(frozen=True)
class DelayedScalingRecipe(Recipe):
    """Per-tensor delayed scaling of a Linear layer's three GEMM operands (input, weight, output gradient), each
    quantized to ``format`` with ``Q(t) = qdq(t s) / s``, ``s = max_val / p`` and ``p`` the amax its ``observer``
    predicts from earlier entries (:mod:`common.observers`; *Max-Window*'s HiF8 W8A8 QAT, Cheng et al. 2026, and
    TransformerEngine's ``DelayedScaling``).

    Parameters
    ----------
    format: element format of all three operands (a :data:`common.formats.FORMATS` name; the paper's ``hif8``).
    max_val: the largest magnitude a scaled tensor may reach (HiF8: 15, the authors' target).
    observer: ``most_recent``, ``max_window``, ``exp_smooth`` or ``current`` (current scaling).
    observer_options: the observer's keyword arguments (``window`` for max_window, ``alpha`` for exp_smooth), sorted
        ``(key, value)`` pairs (a mapping is accepted).
    history_unit: ``"call"`` (one history entry per forward or backward call, i.e. per micro-batch, as the authors'
        code) or ``"step"`` (the step's maximum, once per optimizer step).
    roles: the operands quantized, a subset of :data:`ROLES` (default all three, the paper's W8A8 with 8-bit
        gradients; ``("input", "weight")`` quantizes the forward only); the others stay in full precision.
    name: a label.
    amax_reduction: whose amax a training call observes (:data:`AMAX_REDUCTIONS`):

        * ``"none"`` (default; per rank, as the authors' code): each data-parallel rank observes its own amax
          ``a = max |t|``, so the ranks' histories and scales drift apart where their micro-batches differ.
        * ``"data_parallel"``: the call's amax is all-reduced with MAX over the default process group (or the group
          given to :func:`common.quantizers.attach_w8a8`), ``a = max_r max |t_r|``, BEFORE it is used (cold start,
          ``current``) and before it enters the history: every rank holds the same history and quantizes with the
          same scale, the one a single device would use on the call's whole data-parallel batch. Without an
          initialised process group, or with a group of one rank, nothing is reduced (``"none"``'s numerics).

        TransformerEngine's analogue is ``DelayedScaling(reduce_amax=True)`` (TE's default, not ours) under
        ``autocast(amax_reduction_group=group)`` (formerly ``fp8_autocast(fp8_group=group)``): each tensor's amax
        is recorded during its cast; at the end of the forward region (and of the backward) the region's amaxes
        are concatenated, all-reduced with MAX over the group and only then rolled into the histories and turned
        into scales. What is reduced (this call's amax, before it enters the history) and the effect (identical
        histories and scales on every rank) are the same here. The cost is not batched: one blocking all-reduce
        of two float64 numbers per quantized tensor per training call (three per layer per micro-batch with every
        role), issued at once because the cold start and ``current`` need the reduced amax before the cast.
        Evaluation calls (under ``torch.no_grad()``) never communicate.
    """

    record_type: ClassVar[str] = "delayed_scaling"
    format: str = "hif8"
    max_val: float = HIF8_MAX_VAL
    observer: str = "max_window"
    observer_options: tuple[tuple[str, Any], ...] = ()
    history_unit: str = "call"
    roles: tuple[str, ...] = ROLES
    name: str | None = None
    amax_reduction: str = "none"

    def __post_init__(self) -> None:
        lookup(FORMATS, self.format, "format")
        if isinstance(self.max_val, bool) or not isinstance(self.max_val, int | float) or not (
                0 < self.max_val < math.inf):
            raise ValueError(f"max_val must be finite and > 0, got {self.max_val!r}")
        lookup(OBSERVERS, self.observer, "observer")
        options = dict(self.observer_options)
        make_observer(self.observer, **options)  # validates the option names and values
        object.__setattr__(self, "observer_options", tuple(sorted(options.items())))
        if self.history_unit not in HISTORY_UNITS:
            raise ValueError(f"unknown history_unit {self.history_unit!r}; valid: {', '.join(HISTORY_UNITS)}")
        object.__setattr__(self, "roles", check_roles(self.roles))
        check_amax_reduction(self.amax_reduction)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``observer_options`` as a dict, ``roles`` as a list)."""
        return {**asdict(self), "observer_options": dict(self.observer_options), "roles": list(self.roles)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DelayedScalingRecipe:
        """Inverse of :meth:`to_dict` (a ``"type"`` key is accepted; a record without ``amax_reduction``, written
        before the field existed, reads as ``"none"``); unknown keys are a ValueError."""
        values = _without_type(data, cls.record_type)
        _check_keys(values, _field_names(cls), "delayed-scaling recipe")
        values["observer_options"] = tuple(dict(values.get("observer_options") or {}).items())
        return cls(**values)


@dataclass(frozen=True)
class LowBitRecipe(Recipe):
    """ParetoQ low-bit weight QAT (Liu et al. 2025, as WinQ trains it): each weight ``W`` of a selected Linear
    layer is used as ``Q(W) = alpha q(W / alpha)`` with a learned per-row scale ``alpha`` and the bit width's
    quantizer ``q`` (binary, ternary, stretched 2-bit, or LSQ 3-4 bit; :mod:`common.quantizers.lowbit`).

    Parameters
    ----------
    bits: weight bit width, one of :data:`LOWBIT_BITS` (1.58: ternary).
    activation_bits: None (A16) or 8 (int8 per token, absmax per row: ParetoQ's A8).
    hadamard: quantize ``W H`` and use ``Q(W H) H^T`` (QuEST-style rotation; needs power-of-two ``in_features``).
    name: a label.
    """

    record_type: ClassVar[str] = "lowbit"
    bits: float
    activation_bits: int | None = None
    hadamard: bool = False
    name: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int | float) or self.bits not in LOWBIT_BITS:
            raise ValueError(f"unknown weight bit width {self.bits!r}; valid: {', '.join(map(str, LOWBIT_BITS))}")
        object.__setattr__(self, "bits", LOWBIT_BITS[LOWBIT_BITS.index(self.bits)])  # 2.0 is stored as 2
        if self.activation_bits is not None and (isinstance(self.activation_bits, bool)
                                                 or self.activation_bits not in ACTIVATION_BITS):
            raise ValueError(f"unknown activation bit width {self.activation_bits!r}; valid: None (A16), 8")
        if not isinstance(self.hadamard, bool):
            raise ValueError(f"hadamard must be a bool, got {self.hadamard!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LowBitRecipe:
        """Inverse of :meth:`to_dict` (a ``"type"`` key is accepted); unknown keys are a ValueError."""
        values = _without_type(data, cls.record_type)
        _check_keys(values, _field_names(cls), "low-bit recipe")
        return cls(**values)


RECIPE_TYPES: dict[str, type[Recipe]] = {kind.record_type: kind
                                         for kind in (QuantRecipe, DelayedScalingRecipe, LowBitRecipe)}


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """``{"type": recipe.record_type, **recipe.to_dict()}``: the record :func:`recipe_from_dict` reads back."""
    return {"type": check_recipe(recipe, Recipe).record_type, **recipe.to_dict()}


def recipe_from_dict(data: Mapping[str, Any]) -> Recipe:
    """The recipe of a :func:`recipe_to_dict` record (a record without ``"type"`` is a block recipe, as quantized
    checkpoints store it); ValueError naming an unknown type or field."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a recipe must be a mapping, got {data!r}")
    return lookup(RECIPE_TYPES, data.get("type", QuantRecipe.record_type), "recipe type").from_dict(data)


SPECS: dict[str, QuantSpec] = {  # named block specs (OCP MX v1.0; NVIDIA NVFP4; Finer is Better's 4/6)
    "MXFP4": QuantSpec("e2m1", "e8m0", 32, "e8m0_floor"),
    "MXFP6_E2M3": QuantSpec("e2m3", "e8m0", 32, "e8m0_floor"),
    "MXFP8": QuantSpec("e4m3", "e8m0", 32, "e8m0_floor"),
    "NVFP4": QuantSpec("e2m1", "ue4m3", 16, global_scale="tensor"),
    "NVFP4_4over6": QuantSpec("e2m1", "ue4m3", 16, "four_over_six", global_scale="tensor"),
}

RECIPES: dict[str, Recipe] = {  # the one registry of named recipes (get_recipe, resolve_recipe)
    **{name: QuantRecipe(spec, None, f"W:{name}") for name, spec in SPECS.items()},
    "HIF8_W8A8": DelayedScalingRecipe(name="HIF8_W8A8", observer_options=(("window", 64),)),
    **{f"PARETOQ_W{bits:g}": LowBitRecipe(bits, name=f"PARETOQ_W{bits:g}") for bits in LOWBIT_BITS},
    "PARETOQ_W1A8": LowBitRecipe(1, 8, name="PARETOQ_W1A8"),
    "PARETOQ_W2A8": LowBitRecipe(2, 8, name="PARETOQ_W2A8"),
}


def get_recipe(name: str, activations: bool = False) -> Recipe:
    """The named recipe ``name`` of :data:`RECIPES` (ValueError naming an unknown one and the valid names); with
    ``activations=True`` a named block recipe whose layer inputs are quantized with its weight spec too, labelled
    ``W:<name>,A:<name>`` (ValueError for another recipe type)."""
    recipe = lookup(RECIPES, name, "recipe")
    if not isinstance(activations, bool):
        raise ValueError(f"activations must be a bool, got {activations!r}")
    if not activations:
        return recipe
    if not isinstance(recipe, QuantRecipe) or recipe.weights is None:
        raise ValueError(f"activations=True quantizes the inputs with a block recipe's weight spec; {name!r} is a "
                         f"{type(recipe).__name__}")
    return QuantRecipe(recipe.weights, recipe.weights, f"W:{name},A:{name}")


def resolve_recipe(recipe: Recipe | str, *, activations: bool = False) -> Recipe:
    """The recipe ``recipe`` stands for (what :mod:`common.quantization` and both command lines accept): a
    :class:`Recipe` itself; a name of :data:`RECIPES` (:func:`get_recipe`, with ``activations``); a JSON object in
    :func:`recipe_to_dict` form (without ``"type"``: a block recipe); or the path of a ``.json`` file holding one.
    ``activations=True`` applies to names only. ValueError naming anything else."""
    if isinstance(recipe, Recipe) and not activations:
        return recipe
    if not isinstance(recipe, str):
        raise ValueError(f"recipe must be a common.recipes recipe or its name, got {recipe!r}"
                         + (" with activations=True (which applies to names)" if activations else ""))
    if recipe in RECIPES:
        return get_recipe(recipe, activations)
    if recipe.lstrip().startswith("{"):
        source, text = "JSON recipe", recipe
    elif recipe.endswith(".json") and Path(recipe).is_file():
        source, text = f"recipe file {recipe!r}", Path(recipe).read_text(encoding="utf-8")
    else:
        raise ValueError(f"unknown recipe {recipe!r}; valid: a name ({', '.join(RECIPES)}), a JSON object or a "
                         ".json file")
    if activations:
        raise ValueError("activations=True (--activations) applies to named recipes; give a JSON recipe its "
                         "'activations' entry")
    try:
        return recipe_from_dict(json.loads(text))
    except json.JSONDecodeError as err:
        raise ValueError(f"{source} is not valid JSON: {err}") from None
