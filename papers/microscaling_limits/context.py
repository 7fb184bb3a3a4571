"""The report context of *Is finer better?* (the dict :mod:`common.report.render` renders), read from the
artifacts: the derivation, figures, tables (fit, crossovers, zero-block probabilities, tensors, perplexity
gaps), claims, provenance and how to rerun a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from common.report import assemble, provenance, rerun_entries

from .settings import KEY

PAPER = {
    "key": KEY,
    "title": "Is finer better? The limits of microscaling formats in LLMs",
    "citation": "Fasoli et al., ICLR 2026, arXiv 2601.19026. Reproduced by lowbit-lab at small scale.",
    "question": "Why does shrinking the FP4 block size below a threshold increase the quantization error with "
                "UE4M3 scales for narrow tensors, and do UE5M3 scales fix it without a per-tensor scale?",
    "method": "Theory (common.theory, derived here since the paper's equations are not public): for a block of n "
              "iid values with abs-max M and scale s = Q_S(M/6), the expected per-element MSE is "
              "(1/n) E[1{s=0}(M^2 + (n-1) E[X^2 | |X| <= M])] (whole block rounded to zero) + "
              "(1/n) E[1{s>0} (M - s Q_E(M/s))^2] (the max element) + ((n-1)/n) E[1{s>0} E[(X - s Q_E(X/s))^2 | "
              "|X| <= M]] (the other elements), integrated exactly over the density n g(m) G(m)^(n-1) of M "
              "piecewise between the scale and element rounding boundaries. Validated against Monte Carlo "
              "simulation; applied to every linear weight tensor of the models with its fitted sigma; and the "
              "perplexity gap of FP4 weight+activation microscaling of every block Linear is measured with UE4M3, "
              "UE4M3-S (per-tensor FP32 scale amax/(6*448) first) and UE5M3 block scales.",
}


def fit_table(validation: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[s.upper(), f["points"], f"{f['max_relative_error']:.3%}", f"{f['chi2']:.2e}"]
            for s, f in validation["fits"].items()]
    return {"caption": "Theory vs simulation (Normal data, every simulated sigma and block size)",
            "columns": ["scale", "points", "largest relative error", "chi2 (MSE/sigma^2)"], "rows": rows}


def crossover_table(validation: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[c["scale"].upper(), c["rule"], f"{c['block_size']} vs {c['next_block_size']}",
             "none in range" if c["sigma"] is None else f"{c['sigma']:.3g}",
             {True: "yes", False: "no", None: "outside the simulated grid"}[c["simulation_agrees"]]]
            for c in validation["crossovers"]]
    return {"caption": "Crossovers: below this sigma the smaller block has the higher MSE (theory), and whether "
                       "the simulation shows the sign change one grid step either side",
            "columns": ["scale", "rule", "blocks", "crossover sigma", "simulation agrees"], "rows": rows}


def zero_block_table(validation: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["scale"].upper(), r["block_size"], f"{r['theory']:.3g}", f"{r['simulation']:.3g}",
             "" if r["paper"] is None else f"{r['paper']:.2g}"] for r in validation["zero_block"]]
    return {"caption": "P(block scale rounds to zero) at sigma = 0.005",
            "columns": ["scale", "block size", "theory", "simulation", "paper"], "rows": rows}


def tensor_table(cell: Mapping[str, Any]) -> dict[str, Any]:
    rows = pd.DataFrame(cell["rows"])
    summary = rows.groupby(["scale", "block_size"]).agg(
        tensors=("name", "nunique"), relative_mse=("relative_mse", "median"),
        prediction_error=("prediction_error", "median"), worst=("prediction_error", "max")).reset_index()
    stds = rows.drop_duplicates("name")["std"]
    inverting = {t["name"] for t in cell["tensors"] if t["inverts"]}
    source = f" ({cell['source']})" if cell.get("source") else ""
    return {"caption": f"{cell['model']}{source}: {len(stds)} linear weights, sigma {stds.min():.3g}-{stds.max():.3g}; "
                       f"inverting (measured, scale: tensor): "
                       + (", ".join(f"{t['scale']}: {t['name']}" for t in cell["tensors"] if t["inverts"])
                          or "none") + f" ({len(inverting)})",
            "columns": ["scale", "block size", "tensors", "median MSE/sigma^2", "median |theory/measured - 1|",
                        "largest"],
            "rows": [[r.scale.upper(), r.block_size, r.tensors, f"{r.relative_mse:.4g}", f"{r.prediction_error:.2%}",
                      f"{r.worst:.2%}"] for r in summary.itertuples()]}


def gap_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = pd.DataFrame(summary["rows"])
    wide = rows.pivot_table(index="variant", columns="block_size", values="gap", sort=False)
    blocks = sorted(wide.columns)
    return {"caption": f"{summary['model']}: perplexity gap to the unquantized model (perplexity "
                       f"{summary['perplexity']:.3f}, {summary['tokens']} tokens)",
            "columns": ["variant", *(f"b{b}" for b in blocks)],
            "rows": [[v, *(f"{wide.loc[v, b]:.3f}" for b in blocks)] for v in wide.index]}


def build_context(*, config: Mapping[str, Any], profile: str, validation: Mapping[str, Any],
                  tensors: Sequence[Mapping[str, Any]], models: Sequence[Mapping[str, Any]],
                  claims: Sequence[Mapping[str, Any]], figures: Sequence[Mapping[str, str]], artifacts: Sequence[str],
                  rerun_examples: Sequence[str], seeds: Mapping[str, int],
                  stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    tables = [fit_table(validation), crossover_table(validation), zero_block_table(validation),
              *(tensor_table(t) for t in tensors), *(gap_table(m) for m in models)]
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
