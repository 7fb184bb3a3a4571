"""The paper's configuration: semantic checks beyond the JSON schema, variants as ``quantize_blocks``
options, and cell names.

A *variant* is a scale-selection setting of the paper: a rule of :data:`common.scaling.RULES`, the
prevent-zero modifier, and hierarchical scaling: an FP32 scale ``c = max|x| / T`` divided out first, block scales
chosen on ``x / c``, ``c`` multiplied back. Ours (:func:`variant_options`): one ``c`` per row
(``global_scale="row"`` of :func:`common.scaling.quantize_blocks`, ``T = hierarchical_target``, 448): a weight's
output row, an activation's token, a row of 4096 samples in the numerical study. The authors' public code takes one
``c`` per dim-0 slice instead (the same for a weight ``(out, in)``; a whole sequence of a ``(1, seq, hidden)``
activation).

The model study's numerics follow config ``numerics``, a convention of :mod:`common.scaling.conventions`
(:func:`model_options`): ``lowbit`` (ours: the options above, bit for bit as before the key existed) or
``finer_is_better_authors`` (the authors' code path: ties to the smaller value, bfloat16 arithmetic, one ``c`` per
dim-0 slice, so per sequence of a ``(1, seq, hidden)`` activation, with ``T = 448`` for UE4M3 and 61440 for UE5M3
scales). The numerical study always uses ours (:func:`variant_options`).

A cell is named ``<element>-<scale>-b<block>-<variant>``, e.g. ``e2m1-ue4m3-b4-four_over_six``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from common.config import active_profile
from common.formats import FORMATS
from common.recipes import QuantSpec
from common.registry import lookup
from common.scaling.conventions import CONVENTIONS, spec_options

from . import authors

KEY = "finer_is_better"
OUR_NUMERICS = "lowbit"  # the convention of variant_options (common.scaling.conventions.CONVENTIONS)
# the report's figure kinds (figure ids mse-<scale>-<variant>, brute-force-ratio-<scale>, sweep-<model>-<operands>)
FIGURES = ("mse", "brute-force-ratio", "sweep")
REFERENCE_SCALE = "ue4m3"  # the paper's E4M3 block scales: the regions and claims are defined on them
CLAIM_VARIANTS = {"numerical": ("absmax", "prevent_zero", "four_over_six", "four_over_six_pz", "brute_force"),
                  "model": ("absmax", "prevent_zero", "four_over_six")}
CLAIM_BLOCKS = {"numerical": (4, 8), "model": (4, 16)}  # the claims' MSE(4)/MSE(8) and ppl(4)/ppl(16)
CELL = re.compile(r"^(?P<element>[a-z0-9]+)-(?P<scale>[a-z0-9]+)-b(?P<block>[0-9]+)-(?P<variant>[a-z0-9_]+)$")


def profile_config(config: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The paper config of ``profile`` (its ``profiles`` entry merged over the rest), checked."""
    active = active_profile(config, profile, KEY)
    check_config(active)
    return active


def check_config(config: Mapping[str, Any]) -> None:
    """What the schema cannot say: every cell's variant exists, every format and the numerics convention are
    registered, every study has the variants and block sizes its claims compare, and the paper rows' cells exist in
    the authors' table (ValueError naming the offending key and value)."""
    variants = config["variants"]
    lookup(FORMATS, config["element"], "format", "finer_is_better.element")
    lookup(CONVENTIONS, config["numerics"], "numerics convention", "finer_is_better.numerics")
    for study in ("numerical", "model"):
        for scale, names in config[study]["cells"].items():
            lookup(FORMATS, scale, "format", f"finer_is_better.{study}.cells")
            for name in names:
                if name not in variants:
                    raise ValueError(f"finer_is_better.{study}.cells.{scale}: unknown variant {name!r}; "
                                     f"defined variants: {', '.join(variants)}")
    for study, needed in CLAIM_VARIANTS.items():
        missing = [v for v in needed if v not in config[study]["cells"].get(REFERENCE_SCALE, [])]
        if missing:
            raise ValueError(f"finer_is_better.{study}.cells.{REFERENCE_SCALE} lacks {', '.join(missing)}: the claims "
                             "need these variants")
    for study, needed in CLAIM_BLOCKS.items():
        missing = [str(block) for block in needed if block not in config[study]["block_sizes"]]
        if missing:
            raise ValueError(f"finer_is_better.{study}.block_sizes {config[study]['block_sizes']} lacks "
                             f"{', '.join(missing)}: the claims compare blocks {' and '.join(map(str, needed))}")
    check_paper_gaps(config)
    sigma = config["numerical"]["sigma"]
    if not sigma["low"] < sigma["high"]:
        raise ValueError(f"finer_is_better.numerical.sigma: low {sigma['low']} must be below high {sigma['high']}")
    model = config["model"]
    if model["stride"] > model["window"]:
        raise ValueError(f"finer_is_better.model.stride {model['stride']} exceeds window {model['window']}")


def check_paper_gaps(config: Mapping[str, Any]) -> None:
    """``paper_gaps`` names defined variants and cells of the authors' table (ValueError naming the first that is
    not)."""
    gaps = config["paper_gaps"]
    lookup(authors.MODELS, gaps["model"], "model of the authors' table", "finer_is_better.paper_gaps.model")
    table = authors.load_results()
    for variant in gaps["variants"]:
        if variant not in config["variants"]:
            raise ValueError(f"finer_is_better.paper_gaps.variants: unknown variant {variant!r}; defined variants: "
                             f"{', '.join(config['variants'])}")
        if authors.gap(table, gaps["model"], gaps["scale"], variant, gaps["block_size"]) is None:
            raise ValueError(f"finer_is_better.paper_gaps: the authors' table has no {gaps['model']} {gaps['scale']} "
                             f"{variant} block {gaps['block_size']}")


def cell_name(element: str, scale: str, block_size: int, variant: str) -> str:
    return f"{element}-{scale}-b{block_size}-{variant}"


def parse_cell(name: str) -> dict[str, Any]:
    """``{"element", "scale", "block_size", "variant"}`` of a cell name (ValueError naming a malformed one)."""
    match = CELL.fullmatch(name)
    if match is None:
        raise ValueError(f"cell name {name!r} is not <element>-<scale>-b<block>-<variant>")
    return {"element": match["element"], "scale": match["scale"], "block_size": int(match["block"]),
            "variant": match["variant"]}


def cells(config: Mapping[str, Any], study: str) -> list[str]:
    """Every cell name of ``study`` ("numerical" or "model") in config order."""
    part = config[study]
    return [cell_name(config["element"], scale, block, variant)
            for scale, names in part["cells"].items() for variant in names for block in part["block_sizes"]]


def variant_options(config: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """``quantize_blocks`` keyword arguments of ``variant`` (rule, prevent_zero, global scale)."""
    variants = config["variants"]
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; defined variants: {', '.join(variants)}")
    entry = variants[variant]
    options: dict[str, Any] = {"rule": entry["rule"], "prevent_zero": bool(entry.get("prevent_zero", False))}
    if entry.get("hierarchical", False):
        options.update(global_scale="row", global_target=float(config["hierarchical_target"]))
    return options


def model_options(config: Mapping[str, Any], scale: str, variant: str) -> dict[str, Any]:
    """:class:`common.ptq.QuantSpec` keyword options of a model-study cell under config ``numerics``: ours
    (:func:`variant_options`; also when a partial config has no ``numerics``, as before the key existed) or the
    convention's (:func:`common.scaling.conventions.spec_options`)."""
    options = variant_options(config, variant)
    numerics = config.get("numerics", OUR_NUMERICS)
    if numerics == OUR_NUMERICS:
        return options
    entry = config["variants"][variant]
    return spec_options(numerics, options["rule"], prevent_zero=options["prevent_zero"],
                        hierarchical=bool(entry.get("hierarchical", False)), scale=scale)


def quant_spec(config: Mapping[str, Any], cell: str) -> QuantSpec:
    """The :class:`common.ptq.QuantSpec` of a model-study cell (the same spec for weights and activations)."""
    parts = parse_cell(cell)
    return QuantSpec(parts["element"], parts["scale"], parts["block_size"],
                     **model_options(config, parts["scale"], parts["variant"]))
