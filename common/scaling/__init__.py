"""Block geometry, scale selectors, two-level scaling and numerics conventions (the named recipes are in
:mod:`common.recipes`).

>>> import torch
>>> from common.scaling import quantize_blocks
>>> x = torch.tensor([[0.1, -0.2, 0.3, 5.0]])
>>> quantize_blocks(x, "e2m1", "ue4m3", block_size=4, rule="four_over_six")
tensor([[ 0.0000, -0.1562,  0.3125,  5.0000]])
"""

from common.lazy import lazy_exports

from .conventions import (
    COMPUTE_DTYPES,
    CONVENTIONS,
    E8M0_CANDIDATES,
    GLOBAL_SCALES,
    RULE_OPTIONS,
    TIES,
    NumericsConvention,
    block_options,
    check_block_geometry,
    get_convention,
    spec_options,
)

# the conventions and the vocabulary of a spec above; the quantizers (torch) on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    "blocks": ("BlockScales", "quantize_blocks"),
    "rules": ("RULES", "Arithmetic", "ScaleRule", "block_error", "dequantize_blocks", "get_rule", "round_scale"),
})

__all__ = [
    "COMPUTE_DTYPES",
    "CONVENTIONS",
    "E8M0_CANDIDATES",
    "GLOBAL_SCALES",
    "RULE_OPTIONS",
    "TIES",
    "NumericsConvention",
    "block_options",
    "check_block_geometry",
    "get_convention",
    "spec_options",
    *_LAZY,
]
