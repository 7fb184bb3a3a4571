"""The regime card of *Is finer better?* (:mod:`common.report.regime`): our value of every quantity of the config's
``regime:``, measured from the sweep's artifacts: its points (:func:`.sweep.sweep_points`: each point's sigma is the
median fitted sigma of its moved weight tensors), the pre-registered crossovers (:func:`.sweep.preregister`) and the
perplexity cell records (:func:`.model_study.model_cell`).

``sigma*`` is the pre-registered UE4M3 crossover of the claims' block pair ``n`` vs ``2n`` under the paper's analytic
model (``crossover_paper``; ours, the exact model's, in the notes): the sigma the paper's rows compare the sweep with.

* ``narrowest_sigma``, ``widest_sigma``: the narrowest and the widest point's sigma over ``sigma*``.
* ``sequence_length``: the sweep cells' evaluation window over :data:`REFERENCE_WINDOW` (2048 tokens).
* ``evaluated_tokens``: the tokens a sweep cell scores (the sum of its windows' scored tokens, the same for every
  cell) over 2048: the text in 2048-token windows.
* ``block_pair``: the claims' block size ``n``; ``smallest_block``: the smallest block size a sweep cell quantizes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.report.regime import RegimeRow, regime_rows, regime_specs

from .model_study import UNQUANTIZED
from .settings import KEY

REFERENCE_WINDOW = 2048  # tokens: the WikiText-2 convention (sequence and stride 2048) the ratios are taken to
SIGMA_ROWS = ("narrowest_sigma", "widest_sigma")


def regime_values(points: Sequence[Mapping[str, Any]], preregistered: Mapping[str, Any],
                  records: Sequence[Mapping[str, Any]]) -> tuple[dict[str, float | None], dict[str, str]]:
    """Our value of every quantity (module docstring) and a note on each. ``points``: widest first; ``records``:
    the sweep's perplexity cells (one ``unquantized`` at least). The sigma rows are None (noted) when the paper's
    model has no crossover of the pair, or the sweep no point; ValueError naming records without a reference."""
    n, pair = preregistered["pair"][0], preregistered["pair"]
    star, exact = preregistered["crossover_paper"]["ue4m3"], preregistered["crossover"]["ue4m3"]
    reference = next((r for r in records if r["cell"] == UNQUANTIZED), None)
    if reference is None:
        raise ValueError(f"no {UNQUANTIZED!r} perplexity cell among the {len(records)} sweep records")
    ppl = reference["metrics"]["perplexity"]
    blocks = sorted({r["block_size"] for r in records if r["cell"] != UNQUANTIZED})
    tokens = int(sum(ppl["window_tokens"]))
    measured: dict[str, float | None] = {
        "sequence_length": ppl["window"] / REFERENCE_WINDOW, "evaluated_tokens": tokens / REFERENCE_WINDOW,
        "block_pair": n, "smallest_block": blocks[0] if blocks else None}
    notes = {"sequence_length": f"{ppl['window']} tokens, stride {ppl['stride']}",
             "evaluated_tokens": f"{tokens} tokens scored by every sweep cell",
             "block_pair": f"blocks {pair[0]} vs {pair[1]}",
             "smallest_block": f"the sweep's blocks {', '.join(map(str, blocks))}" if blocks
             else "no quantized sweep cell"}
    if star is None or not points:
        why = (f"the paper's model has no UE4M3 crossover of blocks {pair[0]} vs {pair[1]}" if star is None
               else "no sweep point")
        return measured | dict.fromkeys(SIGMA_ROWS), notes | dict.fromkeys(SIGMA_ROWS, why)
    per_point = (f"sigma* = {star:.4g}, the paper's model's UE4M3 crossover of blocks {pair[0]} vs {pair[1]} (ours, "
                 + ("none" if exact is None else f"{exact:.4g}") + "); per point: "
                 + ", ".join(f"c={p['factor']:g} {p['sigma'] / star:.3g}" for p in points))
    measured |= {"narrowest_sigma": points[-1]["sigma"] / star, "widest_sigma": points[0]["sigma"] / star}
    return measured, notes | dict.fromkeys(SIGMA_ROWS, per_point)


def regime_card(regime: Mapping[str, Mapping[str, Any]], points: Sequence[Mapping[str, Any]],
                preregistered: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> list[RegimeRow]:
    """The card's rows: the config's ``regime`` specs with :func:`regime_values` of the sweep."""
    return regime_rows(regime_specs(regime, f"{KEY}.regime"), *regime_values(points, preregistered, records))
