"""PTQ recipes: what to quantize in a Linear layer (weights, activations) and how.

A :class:`QuantSpec` is one block quantization, applied with :func:`common.scaling.quantize_blocks` along the
*last* axis of the tensor, which for both operands of ``y = x W^T`` is the reduction dimension: the
``in_features`` axis of the ``(out_features, in_features)`` weight, and the hidden axis of the input ``x``
(so activations are scaled per token, in blocks; ``block_size="row"``: one scale per output channel of a weight,
one per token of an activation). A :class:`QuantRecipe` pairs a weight spec and an optional activation spec
(either may be None, not both).

Learned scales: a weight spec with ``rule=None`` says that the scales are not selected from the data but were
learned (QAT, e.g. ParetoQ's per-row ``alpha``): such a spec describes how a checkpoint stores its weights (element
codes, scale format, block geometry), but it cannot quantize a tensor (:meth:`QuantSpec.quantize` raises); the
caller supplies the codes and scales (``common.ptq.save_quantized_checkpoint(..., weight_scales=...)``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from common.formats import FORMATS
from common.registry import lookup
from common.scaling import GLOBAL_SCALES, RULES, BlockScales, get_recipe, quantize_blocks

_SPEC_FIELDS = ("elem", "scale", "block_size", "rule", "prevent_zero", "global_scale", "rule_options", "global_target")
_RECIPE_FIELDS = ("name", "weights", "activations")


@dataclass(frozen=True)
class QuantSpec:
    """One block quantization: ``quantize_blocks(x, elem, scale, block_size, rule, prevent_zero=...,
    global_scale=..., global_target=..., axis=-1, **rule_options)``.

    ``elem``/``scale``: registered format names (:data:`common.formats.FORMATS`); ``block_size``: elements per
    block along the last axis, ``"row"`` for one block spanning the whole last axis (per output channel of a
    weight, per token of an activation), None for one scale per tensor; ``rule``: a name from
    :data:`common.scaling.RULES`, or None when the scales are learned (QAT) rather than selected from the data (see
    the module docstring; then ``prevent_zero``, ``global_scale`` and ``rule_options`` must keep their defaults,
    which only a rule would use); ``global_scale``: None, ``"tensor"`` or ``"row"`` (two-level scaling; for
    activations ``"row"`` is per token); ``rule_options``: extra keyword arguments of the rule (e.g.
    ``{"criterion": "mae"}`` for four_over_six), stored as sorted ``(key, value)`` pairs so that the spec stays
    hashable (a mapping is accepted and converted); ``global_target``: the divisor of the global scale
    ``g = amax / global_target`` (None: the rule's default, see :mod:`common.scaling.blocks`).
    """

    elem: str
    scale: str
    block_size: int | str | None = 16
    rule: str | None = "absmax"
    prevent_zero: bool = False
    global_scale: str | None = None
    rule_options: tuple[tuple[str, Any], ...] = ()
    global_target: float | None = None

    def __post_init__(self) -> None:
        lookup(FORMATS, self.elem, "format")  # names only (JSON-able); a Format object is refused
        lookup(FORMATS, self.scale, "format")
        rule = None if self.rule is None else lookup(RULES, self.rule, "scale rule")
        if self.block_size is not None and self.block_size != "row" and (
            isinstance(self.block_size, bool) or not isinstance(self.block_size, int) or self.block_size < 1
        ):
            raise ValueError(f"block_size must be an integer >= 1 or None (per tensor) or 'row' (one block per row), "
                             f"got {self.block_size!r}")
        if self.global_scale is not None and self.global_scale not in GLOBAL_SCALES:
            raise ValueError(f"unknown global_scale {self.global_scale!r}; valid: None, {', '.join(GLOBAL_SCALES)}")
        if self.block_size is None and self.global_scale == "row":
            raise ValueError("global_scale='row' needs blocks within rows; block_size=None is one block per tensor")
        if self.global_target is not None and (self.global_scale is None or isinstance(self.global_target, bool)
                                               or not isinstance(self.global_target, (int, float))
                                               or not 0 < self.global_target < math.inf):
            raise ValueError(f"global_target must be a number > 0 with a global_scale, got {self.global_target!r}")
        if not isinstance(self.prevent_zero, bool):
            raise ValueError(f"prevent_zero must be a bool, got {self.prevent_zero!r}")
        options = dict(self.rule_options)
        if rule is None:
            for field, value, default in (("prevent_zero", self.prevent_zero, False),
                                          ("global_scale", self.global_scale, None), ("rule_options", options, {})):
                if value != default:
                    raise ValueError(f"{field}={value!r} needs a scale rule: with rule=None (learned scales) it must "
                                     f"be {default!r}")
            object.__setattr__(self, "rule_options", ())
            return
        valid = [name for name, p in inspect.signature(rule.select).parameters.items()
                 if p.kind is p.KEYWORD_ONLY and name != "prevent_zero"]
        for key in options:
            if key not in valid:
                raise ValueError(f"unknown option {key!r} of scale rule {self.rule!r}; "
                                 f"valid options: {', '.join(valid) or 'none'}")
        object.__setattr__(self, "rule_options", tuple(sorted(options.items())))

    def quantize(self, x: torch.Tensor, *, return_scales: bool = False) -> torch.Tensor | tuple[torch.Tensor,
                                                                                                   BlockScales]:
        """Quantize-dequantize ``x`` along its last axis (see :func:`common.scaling.quantize_blocks`); ValueError for
        a spec of learned scales (``rule=None``), which has no rule to choose scales from ``x``."""
        if self.rule is None:
            raise ValueError(f"QuantSpec({self.elem!r}, {self.scale!r}, block_size={self.block_size!r}, rule=None): "
                             "the scales are learned (QAT), not selected from data, so this spec cannot quantize a "
                             "tensor; store the learned codes and scales instead "
                             "(save_quantized_checkpoint(..., weight_scales=...))")
        return quantize_blocks(x, self.elem, self.scale, self.block_size, self.rule, prevent_zero=self.prevent_zero,
                               global_scale=self.global_scale, global_target=self.global_target, axis=-1,
                               return_scales=return_scales,
                               **dict(self.rule_options))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``rule_options`` as a dict; ``block_size`` an integer, ``"row"`` or None; ``rule``
        None for learned scales)."""
        return {"elem": self.elem, "scale": self.scale, "block_size": self.block_size, "rule": self.rule,
                "prevent_zero": self.prevent_zero, "global_scale": self.global_scale,
                "rule_options": dict(self.rule_options), "global_target": self.global_target}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuantSpec:
        """Inverse of :meth:`to_dict`; missing keys take their defaults, unknown keys are a ValueError."""
        _check_keys(data, _SPEC_FIELDS, "quantization spec")
        fields = dict(data)
        fields["rule_options"] = tuple(dict(fields.get("rule_options") or {}).items())
        return cls(**fields)

    @classmethod
    def from_name(cls, name: str) -> QuantSpec:
        """The spec of the named recipe ``name`` in :data:`common.scaling.RECIPES`."""
        r = get_recipe(name)
        return cls(r.elem, r.scale, r.block_size, r.rule, r.prevent_zero, r.global_scale)


@dataclass(frozen=True)
class QuantRecipe:
    """Weight and activation quantization of the selected Linear layers.

    ``weights``: applied once to each selected weight (blocks along ``in_features``); ``activations``: applied
    on every forward pass to the layer input (blocks along its last, hidden axis). Either may be None, not
    both. ``name`` is a label for reports.
    """

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

    @classmethod
    def from_name(cls, name: str, activations: bool | str = False) -> QuantRecipe:
        """Weights quantized with the named recipe ``name`` (:data:`common.scaling.RECIPES`); activations not
        (False), with the same recipe (True), or with another named recipe (its name, e.g. ``"MXFP8"``)."""
        weights = QuantSpec.from_name(name)
        if isinstance(activations, str):
            return cls(weights, QuantSpec.from_name(activations), f"W:{name},A:{activations}")
        if activations is True:
            return cls(weights, weights, f"W:{name},A:{name}")
        if activations is False:
            return cls(weights, None, f"W:{name}")
        raise ValueError(f"activations must be a bool or a recipe name, got {activations!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict: ``{"name", "weights", "activations"}`` with specs as :meth:`QuantSpec.to_dict`."""
        return {"name": self.name,
                "weights": None if self.weights is None else self.weights.to_dict(),
                "activations": None if self.activations is None else self.activations.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuantRecipe:
        """Inverse of :meth:`to_dict`; a missing part is None, unknown keys are a ValueError."""
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
