"""The report context of *Finer is Better* (the dict :mod:`common.report.render` renders): the paper's question
and method, figures, tables, claims, provenance and how to rerun a cell, all read from the artifacts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from common.report import (
    assemble,
    conventions_table,
    model_size,
    number_list,
    provenance,
    rerun_entries,
    scored_corpus,
    setup_rows,
)

from . import authors
from .claims import SWEEP_POINT
from .model_study import OPERANDS, OUR_EXTENSIONS, operand_label
from .numerical import curves, reference_sigmas, table_from_summary
from .settings import KEY

PAPER_NUMERICS = "finer_is_better_authors"  # the authors' numerics convention (common.scaling.conventions)
SHAPE_BLOCK = 4  # the block size the shape statistics compare settings at (the paper's U-shape sits there)
COMPARISONS = (  # (statistic, reference setting, setting): the change of the block-4 gap from one to the other
    ("4/6's change of the block-4 gap (UE4M3 abs-max -> 4/6)", ("ue4m3", "absmax"), ("ue4m3", "four_over_six")),
    ("prevent-zero's change of the block-4 gap (UE4M3 abs-max -> prevent-zero)", ("ue4m3", "absmax"),
     ("ue4m3", "prevent_zero")),
    ("UE4M3 hierarchical 4/6 beside UE5M3 4/6, block-4 gap (UE5M3 4/6 -> hierarchical 4/6)",
     ("ue5m3", "four_over_six"), ("ue4m3", "hierarchical_four_over_six")),
)

PAPER = {
    "key": KEY,
    "title": "Finer is Better (with the Right Scaling)",
    "citation": "Schaefer & Tabak 2026, arXiv 2605.08565. Reproduced by lowbit-lab at small scale.",
    "question": "With abs-max scaling and E4M3 block scales, smaller FP4 blocks can give higher MSE and perplexity. "
                "Is that inherent to fine granularity, or fixable by the scale-selection algorithm?",
    # one step a line, each starting "- " (the report template renders the lines as a list)
    "method": "\n".join([
        "- Scale rules (FP4 E2M1 elements, block scales along the last dimension): abs-max s = E4M3(bmax/6); "
        "prevent-zero (a scale that rounds to zero becomes 2^-9); 4-over-6 (s4 = E4M3(1.5 bmax/6) replaces s6 = "
        "E4M3(bmax/6) iff its block MSE is strictly smaller); brute force (the best of every representable "
        "scale).",
        "- Hierarchical: an FP32 c = max|x|/T divided out first, block scales on x/c, c multiplied back; its "
        "scope and T follow the numerics convention, tabled below beside the authors'.",
        "- Numerical study: Monte Carlo MSE of Normal(0, sigma^2) data on a log sigma grid, the same seeded draw "
        "for every curve.",
        "- Model study: we cannot choose models whose weights sit in each regime, so we make them: a "
        "function-preserving sweep of the base model (the RMSNorm gain before the MLP divided by c, gate_proj and "
        "up_proj times c) computes the same function with the quantized weights' sigma times c, and the regime "
        "card places every point against the theory's crossover.",
        "- Weights-only runs are our extension (the authors' repository has none). The paper profile evaluates "
        "the paper's models as they are, beside the gaps the authors published (their results.csv).",
        "- Identities the code guarantees are implementation checks, not reproductions.",
    ]),
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


def _operands_cell(operands: str) -> str:
    return f"{operands} (our extension)" if operands in OUR_EXTENSIONS else operands


def sweep_table(models: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every sweep point's perplexity gaps by operands, scale rule and block size."""
    caption = ("The sweep: each point's weight sigma (median over the linears the sweep moves), its unquantized "
               "perplexity (the same function at every point) and the perplexity gap of each cell; operands wa: "
               f"weights and activations (the paper's setting), w: {operand_label('w')}")
    if not any(m["rows"] for m in models):
        return {"caption": caption, "columns": ["sigma", "model", "ppl"], "rows": []}
    rows = pd.DataFrame.from_records([{**r, "model": m["model"], "sigma": m["sigma"], "reference": m["perplexity"]}
                                      for m in models for r in m["rows"]])
    wide = rows.pivot_table(index=["sigma", "model", "reference", "operands", "scale", "variant"],
                            columns="block_size", values="gap", sort=True)
    blocks = sorted(wide.columns)
    return {"caption": caption,
            "columns": ["sigma", "model", "ppl", "operands", "scale", "variant", *(f"b{b}" for b in blocks)],
            "rows": [[f"{sigma:.3g}", model, f"{ref:.3f}", _operands_cell(operands), scale.upper(), variant,
                      *(f"{wide.loc[key, b]:.3f}" for b in blocks)]
                     for key in wide.index for sigma, model, ref, operands, scale, variant in [key]]}


def _change(table: pd.DataFrame, model: str, reference: tuple[str, str], setting: tuple[str, str]) -> str | None:
    """``g_ref -> g (relative change)``, or ``(difference)`` where ``g_ref <= 0`` (a relative change of a gap at or
    below zero has no meaning)."""
    found = authors.gap_change(table, model, reference, setting, SHAPE_BLOCK)
    if found is None:
        return None
    ref, new, relative = found
    return f"{ref:.3f} -> {new:.3f} ({f'{relative:+.1%}' if ref > 0 else f'difference {new - ref:+.3f}'})"


def _best(table: pd.DataFrame, model: str, blocks: Sequence[int]) -> str | None:
    found = authors.best_block(table, model, "ue4m3", "absmax", blocks)
    return None if found is None else f"block {found}"


def _entries(texts: Mapping[str, str | None]) -> str:
    """``label: text`` of every entry that has a text, ``; ``-joined (a statistic per model)."""
    return "; ".join(f"{label}: {text}" for label, text in texts.items() if text is not None) or "not in these cells"


def shape_table(models: Sequence[Mapping[str, Any]], paper: pd.DataFrame, blocks: Sequence[int],
                source: Mapping[str, Any]) -> dict[str, Any]:
    """The paper's shape statistics (:data:`COMPARISONS` and abs-max's best block) computed from the authors'
    table, per model, beside ours per sweep point (weights + activations both)."""
    ours = authors.gap_table(models)
    points = {m["model"]: f"{m['model']} (sigma {m['sigma']:.3g})" for m in sorted(models, key=lambda m: m["sigma"])}
    shared = [b for b in blocks if b in set(paper["block_size"])]
    rows = [[statistic, _entries({name: _change(paper, model, ref, setting) for model, name in authors.MODELS.items()}),
             _entries({label: _change(ours, point, ref, setting) for point, label in points.items()})]
            for statistic, ref, setting in COMPARISONS]
    rows.append([f"abs-max (UE4M3): the block size of the smallest gap, of blocks {', '.join(map(str, shared))}",
                 _entries({name: _best(paper, model, shared) for model, name in authors.MODELS.items()}),
                 _entries({label: _best(ours, point, shared) for point, label in points.items()})])
    return {"caption": f"The paper's shape statistics beside ours, weights + activations: the paper's computed from "
                       f"the authors' published gaps ({authors.citation(source)}) per model, ours from this run's "
                       f"points (sigma: the weight sigma of the linears the sweep moves)",
            "columns": ["statistic", "the paper (the authors' table)", "ours (this run)"], "rows": rows}


def paper_cells_table(models: Sequence[Mapping[str, Any]], paper: pd.DataFrame,
                      source: Mapping[str, Any]) -> dict[str, Any] | None:
    """Per cell of the authors' models evaluated as they are (sweep points ``<model>-c1``): our weights +
    activations gap, the paper's, and the difference; None when this run has none of their models."""
    rows = []
    for m in models:
        model = authors.paper_model(m["model"])
        if model is None:
            continue
        for r in m["rows"]:
            if r["operands"] != authors.PAPER_OPERANDS:
                continue
            theirs = authors.gap(paper, model, r["scale"], r["variant"], r["block_size"])
            rows.append([authors.MODELS[model], r["scale"].upper(), r["variant"], r["block_size"], f"{r['gap']:.3f}",
                         "not in the authors' table (our extension)" if theirs is None else f"{theirs:.3f}",
                         "" if theirs is None else f"{r['gap'] - theirs:+.3f}"])
    if not rows:
        return None
    return {"caption": f"Per cell, our perplexity gap ppl(quantized) - ppl(unquantized) beside the paper's, weights + "
                       f"activations, the model as it is (the paper's: {authors.citation(source)}; our "
                       f"{operand_label('w')} rows are in the sweep table)",
            "columns": ["model", "scale", "variant", "block", "ours", "the paper", "ours - paper"], "rows": rows}


def numerics_table(numerics: str) -> dict[str, Any]:
    """This run's numerics convention beside the authors' (:func:`common.report.conventions_table`)."""
    return conventions_table(numerics, PAPER_NUMERICS,
                             caption=f"Numerics of the model study: this run's convention ({numerics}) beside the "
                                     f"authors' ({PAPER_NUMERICS}, read from their torch_eval.py); the numerical "
                                     "study uses ours in every profile")





def our_setup(config: Mapping[str, Any], numerical: Mapping[str, Any], models: Sequence[Mapping[str, Any]],
              base_models: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Our side of the setup table, one text per aspect of the config's ``paper_setup``, from the config this run
    used, its point summaries (``models``: sources and factors from ``<source>-c<factor>``, scored tokens) and the
    embedded base models' recorded metadata (``base_models``: name -> ``lowbit_metadata.json``)."""
    study, sample = config["model"], config["numerical"]
    factors: dict[str, list[float]] = {}
    for m in models:
        match = SWEEP_POINT.fullmatch(m["model"])
        if match is None:
            raise ValueError(f"model {m['model']!r} is not a sweep point <model>-c<factor>")
        factors.setdefault(match["source"], []).append(float(match["factor"]))
    swept = any(f != 1.0 for fs in factors.values() for f in fs)
    sources = "; ".join(f"{model_size(src, base_models)} " + (f"at c = {number_list(sorted(fs, reverse=True))}"
                                                          if swept else "as it is") for src, fs in factors.items())
    scored = sorted({int(sum(m["window_tokens"])) for m in models})
    first = "the whole split" if study["max_tokens"] is None else f"the first {study['max_tokens']} tokens of the split"
    cells = "; ".join(f"{scale.upper()}: {', '.join(names)}" for scale, names in study["cells"].items())
    numerical_cells = "; ".join(f"{scale.upper()}: {', '.join(names)}" for scale, names in sample["cells"].items())
    sigma, whose = sample["sigma"], "the authors'" if config["numerics"] == PAPER_NUMERICS else "our"
    return {
        "Models": (sources + (" (c: the moved linears' weight sigma times c, the same function)" if swept else "")
                   ) if factors else "no model study in this run",
        "Data": f"{scored_corpus(config['model']['corpus'], base_models)}, {study['split']} split",
        "Tokens evaluated": first + (f"; {' or '.join(map(str, scored))} scored a point" if scored else ""),
        "Sequence length": f"{study['window']} tokens a window, stride {study['stride']}, batch {study['batch_size']}",
        "Block sizes": f"model study {number_list(study['block_sizes'])}; numerical study "
                       f"{number_list(numerical['block_sizes'])}",
        "Scale rules": f"model study {cells}; numerical study {numerical_cells}",
        "Layers quantized": f"the linears matching {study['include']}".replace("$", "\\$")
                            + f" ({' and '.join(OPERANDS[o] for o in study['operands'])}"
                            + ("; activations at the model's own scale at every sweep point" if swept
                               and "wa" in study["operands"] else "") + ")"
                            + (f"; a point's sigma: the median over {study['sigma_include']}".replace("$", "\\$")
                               if swept and study.get("sigma_include") else ""),
        "Numerics": f"the model study under {whose} convention ({config['numerics']}; tabled below beside theirs), "
                    "the numerical study under ours",
        "Numerical study": f"{sample['samples']} Normal samples a sigma (seed {sample['seed']}), {sigma['points']} "
                           f"sigmas log-spaced in [{sigma['low']:g}, {sigma['high']:g}], blocks "
                           f"{number_list(numerical['block_sizes'])}",
        "Evaluation": "perplexity gap ppl(quantized) - ppl(unquantized) per cell; each claim's estimate with its "
                      "interval (a paired bootstrap over the evaluation windows; Monte Carlo standard errors in the "
                      "numerical study) and the verdict of one rule",
    }


def build_context(*, config: Mapping[str, Any], profile: str, numerical: Mapping[str, Any],
                  models: Sequence[Mapping[str, Any]], claims: Mapping[str, Any],
                  figures: Sequence[Mapping[str, str]], artifacts: Sequence[str], rerun_examples: Sequence[str],
                  seeds: Mapping[str, int], stage_seconds: Mapping[str, float],
                  paper_results: str | Path = authors.RESULTS,
                  base_models: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The full context (``claims``: the claims document; ``artifacts``: every file the report cites, for
    ``SHA256SUMS``; ``paper_results``: the authors' table, :mod:`.authors`; ``base_models``: the embedded base
    models' recorded metadata by name, for the setup table, :func:`our_setup`)."""
    paper, source = authors.load_results(paper_results), authors.load_source(paper_results)
    cells = paper_cells_table(models, paper, source)
    setup = setup_rows(config["paper_setup"], our_setup(config, numerical, models, base_models or {}))
    return assemble(paper=PAPER, figures=figures, setup=setup,
                    tables=[regions_table(numerical), claim_sigmas_table(numerical), mse_table(numerical),
                            sweep_table(models), *([cells] if cells else []),
                            shape_table(models, paper, config["model"]["block_sizes"], source),
                            numerics_table(config["numerics"])],
                    claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
