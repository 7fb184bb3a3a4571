"""Element and scale formats as data, quantize-dequantize onto them, and their bit codes.

>>> import torch
>>> from common.formats import get_format, quantize, encode, decode
>>> quantize(torch.tensor([0.3, 2.5, 7.0]), "e2m1")
tensor([0.5000, 2.0000, 6.0000])
>>> encode(torch.tensor([1.0]), "hif8")
tensor([8], dtype=torch.uint8)
"""

from common.lazy import lazy_exports

from .registry import FORMATS, HIF8_TIERS, get_format
from .spec import Family, Format, Specials, Tier

# the formats as data above; quantize-dequantize and the codes (torch) on first use
lazy_exports(__name__, {"codec": ("decode", "encode"), "precision": ("mantissa_bits",),
                        "quantize": ("OVERFLOWS", "ROUNDINGS", "quantize")})

__all__ = [
    "FORMATS",
    "HIF8_TIERS",
    "OVERFLOWS",
    "ROUNDINGS",
    "Family",
    "Format",
    "Specials",
    "Tier",
    "decode",
    "encode",
    "get_format",
    "mantissa_bits",
    "quantize",
]
