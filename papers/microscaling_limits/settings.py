"""The paper's configuration (schema in ``config.schema.yaml``; the checks the schema cannot state here) and
its cell names.

Perplexity variants (the paper's three scale treatments, FP4 E2M1 elements, abs-max block scales):
``ue4m3`` (UE4M3 block scales), ``ue4m3s`` (UE4M3 with a per-tensor FP32 scale ``g = amax / (6 * 448)``
divided out first: the paper's UE4M3-S; for activations the tensor is the layer input of one forward pass),
``ue5m3`` (UE5M3 block scales, no per-tensor pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.config import active_profile
from common.formats import FORMATS
from common.recipes import QuantSpec
from common.registry import lookup

VARIANTS: dict[str, dict[str, Any]] = {
    "ue4m3": {"scale": "ue4m3"},
    "ue4m3s": {"scale": "ue4m3", "global_scale": "tensor"},
    "ue5m3": {"scale": "ue5m3"},
}
KEY = "microscaling_limits"
# the report's figure kinds (figure ids theory-vs-simulation-<scale>, parts-<scale>-b<block>, fit, crossovers,
# paper-model-<scale>, tensors-<model>, gap-<model>, sweep)
FIGURES = ("theory-vs-simulation", "parts", "fit", "crossovers", "paper-model", "tensors", "gap", "sweep")


def profile_config(config: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The paper config of ``profile`` (its ``profiles`` entry merged over the rest), checked."""
    active = active_profile(config, profile, KEY)
    lookup(FORMATS, active["element"], "format", f"{KEY}.element")
    for scale in active["scales"]:
        lookup(FORMATS, scale, "format", f"{KEY}.scales")
    for variant in active["model"]["variants"]:
        lookup(VARIANTS, variant, "perplexity variant", f"{KEY}.model.variants")
    for part in ("theory", "simulation"):
        sigma = active[part]["sigma"]
        if not sigma["low"] < sigma["high"]:
            raise ValueError(f"{KEY}.{part}.sigma: low {sigma['low']} must be below high {sigma['high']}")
    figure_blocks = set(active["paper_model"]["figure_blocks"]) - set(active["paper_model"]["block_sizes"])
    if figure_blocks:
        raise ValueError(f"{KEY}.paper_model.figure_blocks {sorted(figure_blocks)} are not among its block_sizes "
                         f"{active['paper_model']['block_sizes']}")
    if active["model"]["stride"] > active["model"]["window"]:
        raise ValueError(f"{KEY}.model.stride {active['model']['stride']} exceeds window {active['model']['window']}")
    return active


def variant_spec(element: str, variant: str, block_size: int) -> QuantSpec:
    """The weight and activation spec of a perplexity variant (abs-max block scales along the last dim)."""
    entry = lookup(VARIANTS, variant, "perplexity variant")
    return QuantSpec(element, entry["scale"], block_size, "absmax", False, entry.get("global_scale"))
