"""Named recipes."""

import pytest
import torch

from common.scaling import RECIPES, Recipe, get_recipe, quantize_blocks


def test_recipe_definitions():
    assert (RECIPES["MXFP4"].elem, RECIPES["MXFP4"].scale, RECIPES["MXFP4"].block_size) == ("e2m1", "e8m0", 32)
    assert (RECIPES["MXFP8"].elem, RECIPES["MXFP8"].scale, RECIPES["MXFP8"].block_size) == ("e4m3", "e8m0", 32)
    nvfp4 = RECIPES["NVFP4"]
    assert (nvfp4.elem, nvfp4.scale, nvfp4.block_size, nvfp4.global_scale) == ("e2m1", "ue4m3", 16, "tensor")
    assert RECIPES["NVFP4_4over6"].rule == "four_over_six"


def test_recipe_quantize_is_quantize_blocks():
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    for recipe in RECIPES.values():
        expected = quantize_blocks(x, recipe.elem, recipe.scale, recipe.block_size, recipe.rule,
                                   global_scale=recipe.global_scale)
        assert torch.equal(recipe.quantize(x), expected)


def test_nvfp4_4over6_is_more_accurate_than_nvfp4():
    x = torch.randn(256, 256, generator=torch.Generator().manual_seed(1))
    err = {name: ((get_recipe(name).quantize(x) - x) ** 2).mean().item() for name in ("NVFP4", "NVFP4_4over6")}
    assert err["NVFP4_4over6"] < err["NVFP4"]


def test_bad_recipes():
    with pytest.raises(ValueError, match="unknown recipe 'NVFP8'"):
        get_recipe("NVFP8")
    with pytest.raises(ValueError, match="unknown scale rule 'best'"):
        Recipe("X", "e2m1", "ue4m3", 16, rule="best")
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        Recipe("X", "e2m1", "ue4m3", 0)
