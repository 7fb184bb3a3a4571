"""The report context of *Finer is Better* (the dict :mod:`common.report.render` renders): the paper's question
and method, figures, tables, claims, provenance and how to rerun a cell, all read from the artifacts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from common.report import assemble, provenance, rerun_entries

from .numerical import curves, reference_sigmas, table_from_summary
from .settings import KEY

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
              "seeded draw for every curve. Model study: the paper fake-quantizes the MLP linears of 7-14B models "
              "(weights and activations) and measures the perplexity gap on WikiText-2; we cannot choose models "
              "whose weights sit in each regime, so we make them: a function-preserving sweep of the base model "
              "(the RMSNorm gain before the MLP divided by c, gate_proj and up_proj times c) gives models that "
              "compute the same function with the quantized weights' sigma times c, and we quantize those two "
              "projections, weights only and weights + activations, and score the held-out split of the "
              "pretraining corpus (window = stride). Every claim row states its prediction (written in the "
              "config before the data), the estimate with its 95% interval (Monte Carlo standard errors for the "
              "numerical study, a paired bootstrap over the evaluation windows for perplexities, the same "
              "resampled windows for every model compared) and the verdict the fixed rule gives; identities the "
              "code guarantees are implementation checks, not reproductions.",
}


def regions_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = []
    for name, region in summary["regions"].items():
        spans = ", ".join(f"[{a:.3g}, {b:.3g}]" for a, b in region["intervals"]) or "none"
        rows.append([name, spans, len(region["sigmas"]), region["rule"]])
    return {"caption": "Regions found in the data (sigma intervals of the grid)",
            "columns": ["region", "sigma intervals", "points", "detection rule"], "rows": rows}


def claim_sigmas_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The sigmas the numerical rows are read at, fixed by the theory before the data."""
    rule = {"sigma_A": "the theory's largest abs-max MSE(4)/MSE(8) - 1 on the grid",
            "sigma_B": "the theory's largest prevent-zero MSE(4)/MSE(8) - 1 among the grid sigmas with "
                       "P(scale = 0, n = 4) below the underflow fraction"}
    return {"caption": "Where the numerical claims are read (common.theory, no simulation data)",
            "columns": ["point", "sigma", "chosen as"],
            "rows": [[name, f"{value:.3g}", rule[name]] for name, value in summary["claim_sigmas"].items()]}


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


def sweep_table(models: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every sweep point's perplexity gaps by operands, scale rule and block size."""
    caption = ("The sweep: each point's weight sigma (median over the quantized linears), its unquantized "
               "perplexity (the same function at every point) and the perplexity gap of each cell")
    if not any(m["rows"] for m in models):
        return {"caption": caption, "columns": ["sigma", "model", "ppl"], "rows": []}
    rows = pd.DataFrame.from_records([{**r, "model": m["model"], "sigma": m["sigma"], "reference": m["perplexity"]}
                                      for m in models for r in m["rows"]])
    wide = rows.pivot_table(index=["sigma", "model", "reference", "operands", "scale", "variant"],
                            columns="block_size", values="gap", sort=True)
    blocks = sorted(wide.columns)
    return {"caption": caption,
            "columns": ["sigma", "model", "ppl", "operands", "scale", "variant", *(f"b{b}" for b in blocks)],
            "rows": [[f"{sigma:.3g}", model, f"{ref:.3f}", operands, scale.upper(), variant,
                      *(f"{wide.loc[key, b]:.3f}" for b in blocks)]
                     for key in wide.index for sigma, model, ref, operands, scale, variant in [key]]}


def build_context(*, config: Mapping[str, Any], profile: str, numerical: Mapping[str, Any],
                  models: Sequence[Mapping[str, Any]], claims: Mapping[str, Any],
                  figures: Sequence[Mapping[str, str]], artifacts: Sequence[str], rerun_examples: Sequence[str],
                  seeds: Mapping[str, int], stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The full context (``claims``: the claims document; ``artifacts``: every file the report cites, for
    ``SHA256SUMS``)."""
    return assemble(paper=PAPER, figures=figures,
                    tables=[regions_table(numerical), claim_sigmas_table(numerical), mse_table(numerical),
                            sweep_table(models)],
                    claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
