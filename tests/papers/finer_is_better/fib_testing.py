"""Synthetic *Finer is Better* artifacts with planted reversals, regions and gaps (helpers of the tests here).

MSEs are binary fractions, so every ratio the rules compute is exact. Per sigma of :data:`GRID`, a variant's
curve is a ``(MSE(4), MSE(8), MSE(16))`` triple: :data:`NORMAL` (finer is better, MSE(n)/MSE(2n) = 0.5),
:data:`REVERSED` (excess 0.5), :data:`SLIGHT` (excess 1/32, just above the 0.02 tolerance) or :data:`WITHIN`
(excess 1/64, a tie under the tolerance).

The planted scenario (:func:`planted_cells`), UE4M3 unless stated:

* abs-max reverses at indices 0-4, 6, 7, 9 (index 2 through the (8, 16) pair only); its block-4 zero-scale
  fraction is 1.0, 0.5, 0.02, 0.005, 0.01 at indices 0-4 and 0.9 at 5 (no reversal there): Region A = {0, 1, 2, 4}
  (3 misses the 1% underflow threshold, 4 meets it exactly);
* prevent-zero reverses slightly at 4, 6, 7, 9 (Region B), never above abs-max, no zero scale;
* 4-over-6 reverses at index 0 (inside Region A); 4-over-6 + prevent-zero never reverses;
* brute force is half of NORMAL everywhere except a tie at index 0, where every block sits on the scale floor;
* UE5M3 4-over-6 reverses everywhere (must not leak into the UE4M3 rules).
"""

import copy
from pathlib import Path

import yaml

from common.report import claim_specs
from papers.finer_is_better.claims import claim_entries
from papers.finer_is_better.settings import profile_config

CONFIG = profile_config(yaml.safe_load((Path(__file__).resolve().parents[3] / "papers" / "finer_is_better"
                                        / "config.yaml").read_text())["finer_is_better"], "default")
SPECS = claim_specs(claim_entries(CONFIG["claims"]))  # the paper's predictions, as the config states them

GRID = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0]
BLOCKS = (4, 8, 16)
THRESHOLDS = {"reversal_tolerance": 0.02, "underflow_fraction": 0.01, "comparable_ratio": 1.25,
              "gap_tolerance": 0.02}

NORMAL = (1.0, 2.0, 4.0)
REVERSED = (3.0, 2.0, 4.0)
SLIGHT = (2.0625, 2.0, 4.0)
WITHIN = (2.03125, 2.0, 4.0)
BRUTE = (0.5, 1.0, 2.0)

SE = 2.0**-10  # every planted MSE's Monte Carlo standard error, relative to it
REGION_A = [0, 1, 2, 4]
REGION_B = [4, 6, 7, 9]

PLANTED = {
    ("ue4m3", "absmax"): {
        "mse": {0: REVERSED, 1: REVERSED, 2: (1.0, 6.0, 4.0), 3: REVERSED, 4: REVERSED, 5: WITHIN, 6: SLIGHT,
                7: SLIGHT, 9: SLIGHT},
        "zero": {0: (1.0, 1.0, 1.0), 1: (0.5, 0.2, 0.0), 2: (0.02, 0.0, 0.0), 3: (0.005, 0.0, 0.0),
                 4: (0.01, 0.0, 0.0), 5: (0.9, 0.5, 0.0)},
    },
    ("ue4m3", "prevent_zero"): {"mse": {i: SLIGHT for i in REGION_B}, "floor": {0: (1.0, 1.0, 1.0)}},
    ("ue4m3", "four_over_six"): {"mse": {0: REVERSED}},
    ("ue4m3", "four_over_six_pz"): {},
    ("ue4m3", "brute_force"): {"default": BRUTE, "mse": {0: (1.0, 1.0, 2.0)}, "floor": {0: (1.0, 1.0, 1.0)}},
    ("ue5m3", "four_over_six"): {"default": REVERSED},
}


def curve_cells(scale, variant, spec):
    """The numerical cells (one per block size) of one variant, in :func:`numerical.numerical_cell`'s format."""
    default = spec.get("default", NORMAL)
    cells = []
    for b, block in enumerate(BLOCKS):
        rows = []
        for i, sigma in enumerate(GRID):
            mse = spec.get("mse", {}).get(i, default)[b]
            zero = spec.get("zero", {}).get(i, (0.0, 0.0, 0.0))[b]
            floor = max(zero, spec.get("floor", {}).get(i, (0.0, 0.0, 0.0))[b])
            rows.append({"sigma": sigma, "mse": mse, "relative_mse": mse / sigma**2, "zero_scale_fraction": zero,
                         "floor_scale_fraction": floor, "mse_standard_error": mse * SE})
        cells.append({"cell": f"e2m1-{scale}-b{block}-{variant}", "element": "e2m1", "scale": scale,
                      "block_size": block, "variant": variant, "rows": rows, "wall_time_s": 0.25})
    return cells


def planted_cells(changes=None):
    """Every cell of the planted scenario; ``changes`` maps ``(scale, variant)`` to a replacement spec (or
    merges ``{"mse": ..., ...}`` overrides into the planted one when wrapped as ``("merge", spec)``)."""
    specs = copy.deepcopy(PLANTED)
    for key, spec in (changes or {}).items():
        if isinstance(spec, tuple) and spec[0] == "merge":
            for part, values in spec[1].items():
                if part == "default":
                    specs[key]["default"] = values
                else:
                    specs[key].setdefault(part, {}).update(values)
        else:
            specs[key] = spec
    return [cell for (scale, variant), spec in specs.items() for cell in curve_cells(scale, variant, spec)]


WINDOWS, WINDOW_TOKENS = 32, 100


def point_summary(model, sigma, log_ratios, *, noise=0.0, seed=0, perplexity=10.0, operands=("w", "wa")):
    """A sweep point's summary (:func:`model_study.gap_summary`'s format) on :data:`WINDOWS` windows of
    :data:`WINDOW_TOKENS` tokens: ``log_ratios`` maps ``(scale, variant, block)`` to the cell's log perplexity
    over the unquantized model's (exact when ``noise`` is 0; else each window's mean NLL gets seeded Normal noise
    of that standard deviation, a different draw per cell)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    base = np.full(WINDOWS, WINDOW_TOKENS * np.log(perplexity))
    rows = []
    for operand in operands:
        for (scale, variant, block), log_ratio in log_ratios.items():
            nll = base + WINDOW_TOKENS * (log_ratio + noise * rng.standard_normal(WINDOWS))
            ppl = float(np.exp(nll.sum() / (WINDOWS * WINDOW_TOKENS)))
            rows.append({"cell": f"e2m1-{scale}-b{block}-{variant}", "operands": operand, "scale": scale,
                         "variant": variant, "block_size": block, "perplexity": ppl, "gap": ppl - perplexity,
                         "window_nll": nll.tolist()})
    return {"model": model, "sigma": sigma, "perplexity": perplexity, "tokens": WINDOWS * WINDOW_TOKENS,
            "window_nll": base.tolist(), "window_tokens": [WINDOW_TOKENS] * WINDOWS, "rows": rows,
            "wall_time_s": 1.0}
