"""Named block-quantization recipes: validated dataclasses with documented fields."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from common.formats.registry import get_format
from common.registry import lookup

from .blocks import GLOBAL_SCALES, quantize_blocks
from .rules import get_rule


@dataclass(frozen=True)
class Recipe:
    """A complete microscaling recipe.

    ``elem``/``scale``: format names; ``block_size``: elements per block along the last axis; ``rule``: scale
    rule name; ``global_scale``: None, "tensor" or "row" (two-level scaling); ``prevent_zero``: the modifier.
    """

    name: str
    elem: str
    scale: str
    block_size: int
    rule: str = "absmax"
    global_scale: str | None = None
    prevent_zero: bool = False

    def __post_init__(self) -> None:
        get_format(self.elem)
        get_format(self.scale)
        get_rule(self.rule)
        if self.global_scale is not None and self.global_scale not in GLOBAL_SCALES:
            raise ValueError(f"recipe {self.name}: unknown global_scale {self.global_scale!r}")
        if self.block_size < 1:
            raise ValueError(f"recipe {self.name}: block_size must be >= 1, got {self.block_size}")

    def quantize(self, x: torch.Tensor, *, axis: int = -1) -> torch.Tensor:
        """Quantize-dequantize ``x`` with this recipe (blocks along ``axis``)."""
        return quantize_blocks(x, self.elem, self.scale, self.block_size, self.rule, prevent_zero=self.prevent_zero,
                               global_scale=self.global_scale, axis=axis)


RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe("MXFP4", "e2m1", "e8m0", 32, rule="e8m0_floor"),
        Recipe("MXFP6_E2M3", "e2m3", "e8m0", 32, rule="e8m0_floor"),
        Recipe("MXFP8", "e4m3", "e8m0", 32, rule="e8m0_floor"),
        Recipe("NVFP4", "e2m1", "ue4m3", 16, global_scale="tensor"),
        Recipe("NVFP4_4over6", "e2m1", "ue4m3", 16, rule="four_over_six", global_scale="tensor"),
    )
}


def get_recipe(name: str) -> Recipe:
    return lookup(RECIPES, name, "recipe")
