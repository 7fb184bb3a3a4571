"""The regime card of *Finer is Better* (:mod:`common.report.regime`): our value of every quantity of the config's
``regime:``, measured from the sweep's point summaries (:func:`.model_study.gap_summary`) and the config.

``sigma*`` (:func:`reversal_sigma`) is the largest UE4M3 abs-max crossover of blocks ``n`` vs ``2n`` over the model
study's block sizes (:func:`common.theory.crossover`, exact model): with E2M1 elements 0.02405 at ``n = 4``, the
top of the reversal Regions A and B, the sigma the model rows already compare the sweep with. A point's sigma is
the median weight sigma of its quantized linears.

* ``narrowest_sigma``, ``widest_sigma``: the smallest and the largest point sigma over ``sigma*``.
* ``region_b_sigma``: the point nearest the middle of Region B outside Region A over ``sigma*``; the middle is the
  geometric mean of the quantity's bounds, which are that region's edges (the config states them), so the value
  lies inside them exactly when some point does.
* ``sequence_length``: the evaluation window (``model.window``) over the paper's 2048 tokens (:data:`PAPER_WINDOW`).
* ``evaluated_tokens``: the tokens a point scores (the sum of its windows' scored tokens; the fewest over the
  points, whose tokenizers may differ) over 2048: the text in windows of the paper's length.
* ``smallest_block``, ``largest_block``: of the model study's block sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from common.report.regime import RegimeRow, RegimeSpec, regime_rows, regime_specs
from common.theory import crossover

from .settings import KEY, REFERENCE_SCALE

REGION_B = "region_b_sigma"  # the quantity whose bounds are Region B's edges (module docstring)
PAPER_WINDOW = 2048  # the paper's evaluation window in tokens (fact sheet: the authors' torch_eval.py, stride 2048)


def reversal_sigma(element: str, block_sizes: Sequence[int]) -> float:
    """``sigma*``: the largest UE4M3 abs-max crossover of ``n`` vs ``2n`` over ``block_sizes`` (ValueError when the
    theory has none in its range)."""
    found = [c for n in block_sizes if (c := crossover(n, element, REFERENCE_SCALE)) is not None]
    if not found:
        raise ValueError(f"the theory has no UE4M3 crossover of n vs 2n for block sizes {list(block_sizes)}")
    return max(found)


def _nearest(ratios: Mapping[str, float], bounds: tuple[float | None, float | None]) -> tuple[str, float]:
    """The ``(point, ratio)`` nearest (in log) the geometric mean of ``bounds``."""
    low, high = bounds
    if low is None or high is None:
        raise ValueError(f"regime.{REGION_B}: its bounds must be Region B's two edges, got {list(bounds)}")
    middle = math.sqrt(low * high)
    return min(ratios.items(), key=lambda item: abs(math.log(item[1] / middle)))


def regime_values(specs: Mapping[str, RegimeSpec], config: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]],
                  sigma_star: float) -> tuple[dict[str, float | None], dict[str, str]]:
    """Our value of every quantity (module docstring) and a note on each (the point sigmas over ``sigma_star``, the
    window's stride, the tokens per point); ``specs``: the card's quantities (``region_b_sigma``'s bounds). A run
    without sweep points measures no sigma and no tokens (None, noted)."""
    model, blocks = config["model"], config["model"]["block_sizes"]
    measured: dict[str, float | None] = {"sequence_length": model["window"] / PAPER_WINDOW,
                                         "smallest_block": min(blocks), "largest_block": max(blocks)}
    notes = {"sequence_length": f"{model['window']} tokens, stride {model['stride']}, batch {model['batch_size']}"}
    swept = ("narrowest_sigma", REGION_B, "widest_sigma", "evaluated_tokens")
    if not summaries:
        return measured | dict.fromkeys(swept), notes | dict.fromkeys(swept, "no sweep point in this run")
    points = sorted(summaries, key=lambda s: s["sigma"])
    ratios = {p["model"]: p["sigma"] / sigma_star for p in points}
    tokens = {p["model"]: int(sum(p["window_tokens"])) for p in points}
    nearest, ratio = _nearest(ratios, specs[REGION_B].bounds)
    per_point = (f"sigma* = {sigma_star:.4g}, the largest UE4M3 abs-max crossover of n vs 2n over blocks "
                 f"{', '.join(map(str, blocks))}; per point: " + ", ".join(f"{m} {r:.3g}" for m, r in ratios.items()))
    measured |= {"narrowest_sigma": min(ratios.values()), REGION_B: ratio, "widest_sigma": max(ratios.values()),
                 "evaluated_tokens": min(tokens.values()) / PAPER_WINDOW}
    notes |= {"narrowest_sigma": per_point, "widest_sigma": per_point,
              REGION_B: f"{nearest}, the point nearest Region B's middle; {per_point}",
              "evaluated_tokens": f"{min(tokens.values())} tokens scored by each of the {len(points)} points"
              if len(set(tokens.values())) == 1
              else "the fewest; tokens per point: " + ", ".join(f"{m} {n}" for m, n in tokens.items())}
    return measured, notes


def regime_card(config: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]]) -> list[RegimeRow]:
    """The card's rows: the config's ``regime`` specs with :func:`regime_values` of the sweep (``sigma*`` from
    ``element`` and ``model.block_sizes``)."""
    specs = regime_specs(config["regime"], f"{KEY}.regime")
    sigma_star = reversal_sigma(config["element"], config["model"]["block_sizes"])
    return regime_rows(specs, *regime_values(specs, config, summaries, sigma_star))
