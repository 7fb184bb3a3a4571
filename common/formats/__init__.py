"""Element and scale formats as data, rounding onto them (quantize-dequantize), and their bit codes.

>>> import torch
>>> from common.formats import get_format, round_to_format, encode, decode
>>> round_to_format(torch.tensor([0.3, 2.5, 7.0]), "e2m1")
tensor([0.5000, 2.0000, 6.0000])
>>> encode(torch.tensor([1.0]), "hif8")
tensor([8], dtype=torch.uint8)
"""

from common.lazy import lazy_exports

from .registry import FORMATS, HIF8_TIERS, get_format
from .spec import Family, Format, Specials, Tier

# the formats as data above; rounding onto them and the codes (torch) on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {"codec": ("decode", "encode"), "precision": ("mantissa_bits",),
                                                      "rounding": ("OVERFLOWS", "ROUNDINGS", "round_to_format")})

__all__ = ["FORMATS", "HIF8_TIERS", "Family", "Format", "Specials", "Tier", "get_format", *_LAZY]
