"""The report context of *Finer is Better* (the dict :mod:`common.report.render` renders): the paper's question
and method, figures, tables, claims, provenance and how to rerun a cell, all read from the artifacts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from common.report import assemble, provenance, rerun_entries

from .numerical import curves, reference_sigmas, table_from_summary

KEY = "finer_is_better"
PAPER = {
    "key": KEY,
    "title": "Finer is Better (with the Right Scaling)",
    "citation": "Schaefer & Tabak 2026, arXiv 2605.08565. Reproduced by lowbit-lab at small scale.",
    "question": "With abs-max scaling and E4M3 block scales, smaller FP4 blocks can give higher MSE and perplexity. "
                "Is that inherent to fine granularity, or fixable by the scale-selection algorithm?",
    "method": "FP4 E2M1 elements with UE4M3 (or UE5M3) block scales along the last dimension. Scale rules: abs-max "
              "s = E4M3(bmax/6); prevent-zero (a scale that rounds to zero becomes 2^-9); 4-over-6 (s4 = "
              "E4M3(1.5 bmax/6) replaces s6 = E4M3(bmax/6) iff its block MSE is strictly smaller); brute force "
              "(the best of every representable scale); hierarchical (c = max|x|/448 per row first, block scales "
              "on x/c). Numerical study: Monte Carlo MSE of Normal(0, sigma^2) data on a log sigma grid, the same "
              "seeded draw for every curve. Model study: the MLP linears' weights and activations fake-quantized "
              "(every Linear except lm_head and attention), perplexity gap to the unquantized model on the "
              "held-out split of the pretraining corpus (window = stride). Reversals and Regions A/B are "
              "detected from the data by the rules in the tables; verdicts are computed by the rules in the "
              "claims table.",
}


def regions_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = []
    for name, region in summary["regions"].items():
        spans = ", ".join(f"[{a:.3g}, {b:.3g}]" for a, b in region["intervals"]) or "none"
        rows.append([name, spans, len(region["sigmas"]), region["rule"]])
    return {"caption": "Regions found in the data (sigma intervals of the grid)",
            "columns": ["region", "sigma intervals", "points", "detection rule"], "rows": rows}


def mse_table(summary: Mapping[str, Any], targets: Sequence[float] = (1e-3, 1e-2, 1.0)) -> dict[str, Any]:
    table = table_from_summary(summary)
    sigmas = reference_sigmas(table["sigma"].unique(), targets)
    blocks = sorted(table["block_size"].unique())
    rows = []
    for (scale, variant), _ in table.groupby(["scale", "variant"], sort=False):
        relative = curves(table, scale, variant, "relative_mse")
        for s in sigmas:
            rows.append([scale.upper(), variant, f"{s:.3g}", *(f"{relative.loc[s, b]:.4g}" for b in blocks)])
    return {"caption": "Relative MSE (MSE / sigma^2) at three sigmas, by block size",
            "columns": ["scale", "variant", "sigma", *(f"b{b}" for b in blocks)], "rows": rows}


def gap_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = pd.DataFrame.from_records(summary["rows"])
    wide = rows.pivot_table(index=["scale", "variant"], columns="block_size", values="gap", sort=False)
    blocks = sorted(wide.columns)
    return {"caption": f"{summary['model']}: perplexity gap to the unquantized model (perplexity "
                       f"{summary['perplexity']:.3f}, {summary['tokens']} tokens)",
            "columns": ["scale", "variant", *(f"b{b}" for b in blocks)],
            "rows": [[scale.upper(), variant, *(f"{wide.loc[(scale, variant), b]:.3f}" for b in blocks)]
                     for scale, variant in wide.index]}


def build_context(*, config: Mapping[str, Any], profile: str, numerical: Mapping[str, Any],
                  models: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]],
                  figures: Sequence[Mapping[str, str]], artifacts: Sequence[str], rerun_examples: Sequence[str],
                  seeds: Mapping[str, int], stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The full context (``artifacts``: every file the report cites, for ``SHA256SUMS``)."""
    return assemble(paper=PAPER, figures=figures,
                    tables=[regions_table(numerical), mse_table(numerical), *(gap_table(m) for m in models)],
                    claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
