"""Block geometry, scale selectors and two-level scaling (the named recipes are in :mod:`common.recipes`).

>>> import torch
>>> from common.scaling import quantize_blocks
>>> x = torch.tensor([[0.1, -0.2, 0.3, 5.0]])
>>> quantize_blocks(x, "e2m1", "ue4m3", block_size=4, rule="four_over_six")
tensor([[ 0.0000, -0.1562,  0.3125,  5.0000]])
"""

from .blocks import GLOBAL_SCALES, BlockScales, check_block_geometry, quantize_blocks
from .rules import RULES, ScaleRule, block_error, dequantize_blocks, get_rule, round_scale

__all__ = [
    "GLOBAL_SCALES",
    "RULES",
    "BlockScales",
    "ScaleRule",
    "block_error",
    "check_block_geometry",
    "dequantize_blocks",
    "get_rule",
    "quantize_blocks",
    "round_scale",
]
