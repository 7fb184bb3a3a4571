"""The report context of *Is finer better?* (the dict :mod:`common.report.render` renders), read from the
artifacts: the derivation, figures, tables (both analytic models against simulation on the authors' grid and
their crossovers, our model's fit, crossovers, zero-block probabilities, the sweep, tensors, perplexity gaps, the
numerics conventions against the authors'), claims, provenance and how to rerun a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from common.report import (
    assemble,
    conventions_table,
    first_tokens,
    model_size,
    number_list,
    provenance,
    rerun_entries,
    scored_corpus,
    setup_rows,
)

from .conventions import CONVENTIONS
from .settings import KEY, VARIANTS

PAPER = {
    "key": KEY,
    "title": "Is finer better? The limits of microscaling formats in LLMs",
    "citation": "Fasoli et al., ICLR 2026, arXiv 2601.19026. Reproduced by lowbit-lab at small scale.",
    "question": "Why does shrinking the FP4 block size below a threshold increase the quantization error with "
                "UE4M3 scales for narrow tensors, and do UE5M3 scales fix it without a per-tensor scale?",
    # one step a line, each starting "- " (the report template renders the lines as a list)
    "method": "\n".join([
        "- Two analytic models of the block MSE (common.theory). For a block of n iid values with abs-max M and "
        "scale s = Q_S(M/6), ours (model='exact') is (1/n) E[1{s=0}(M^2 + (n-1) E[X^2 | |X| <= M])] (whole block "
        "rounded to zero) + (1/n) E[1{s>0} (M - s Q_E(M/s))^2] (the max element) + ((n-1)/n) E[1{s>0} E[(X - s "
        "Q_E(X/s))^2 | |X| <= M]] (the other elements), integrated exactly over the density n g(m) G(m)^(n-1) of "
        "M piecewise between the scale and element rounding boundaries.",
        "- The paper's (model='paper', read from the authors' modelling_errors_from_theory_fp8_scales.py and "
        "equal to its output) takes the other elements as Normal truncated at +-6s, s the quantized scale, "
        "instead of at the block max.",
        "- The paper's claim that its model matches experiment is tested against our Monte Carlo simulation on "
        "the authors' own grid; ours against simulation is an implementation check.",
        "- We have one small model, so we move it: a function-preserving sweep (common.models.rescale) divides "
        "the RMSNorm gains before attention and the MLP by c and multiplies the q, k, v, gate and up projections "
        "by c, so the network computes the same function while the weight sigma of those linears is c times the "
        "trained one.",
        "- The sweep quantizes exactly these moved linears (unmoved ones would add the same error at every point "
        "and blur the sigma the claims are about): weights only for the inversion claims (the moved linears' "
        "inputs widen by 1/c, the opposite way) and weights plus activations as the paper's setting.",
        "- Before any model exists the crossover sigma* of blocks n vs 2n is pre-registered from the "
        "configuration under both models; the inversion's onset on the sweep is compared with each in sweep "
        "steps, and the regime card places the sweep against sigma*.",
    ]),
}


def fit_table(validation: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[s.upper(), f["points"], f"{f['max_relative_error']:.3%}", f"{f['chi2']:.2e}"]
            for s, f in validation["fits"].items()]
    return {"caption": "Our exact model vs simulation (an implementation check; Normal data, every simulated sigma "
                       "and block size)",
            "columns": ["scale", "points", "largest relative error", "chi2 (MSE/sigma^2)"], "rows": rows}


def crossover_table(validation: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[c["scale"].upper(), c["rule"], f"{c['block_size']} vs {c['next_block_size']}",
             "none in range" if c["sigma"] is None else f"{c['sigma']:.3g}",
             {True: "yes", False: "no", None: "outside the simulated grid"}[c["simulation_agrees"]]]
            for c in validation["crossovers"]]
    return {"caption": "Crossovers: below this sigma the smaller block has the higher MSE (theory), and whether "
                       "the simulation shows the sign change one grid step either side",
            "columns": ["scale", "rule", "blocks", "crossover sigma", "simulation agrees"], "rows": rows}


MODEL_NAMES = {"paper": "the paper's (truncated at +-6s)", "exact": "ours (exact)"}
SIGMA_STAR_MODELS = {"_paper": "the paper's model", "": "our exact model"}  # sweep summary key suffix -> label


def _place(fit: Mapping[str, Any]) -> str:
    return "" if fit["worst"] is None else f"sigma {fit['sigma']:.3g}, n {fit['block_size']}"


def analytic_models_table(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """Per scale and model: the worst and mean ``|model / simulation - 1|`` over the resolved points of the
    authors' grid (and where the worst is), chi2 (our definition) and the point counts."""
    rows = [[scale.upper(), MODEL_NAMES[model], "" if f["worst"] is None else f"{f['worst_signed']:+.2%}",
             _place(f), "" if f["mean"] is None else f"{f['mean']:.2%}", f"{f['chi2']:.2e}",
             f"{f['resolved_points']} of {f['points']}"]
            for scale, by_model in comparison["fits"].items() for model, f in by_model.items()]
    return {"caption": "The two analytic models against simulation of Normal data on the authors' grid (sigma 1e-4 "
                       "and linspace(1e-3, 0.05, 50), abs-max scales): model / simulation - 1 of the total MSE where "
                       f"the simulation resolves it (relative standard error <= {comparison['resolved_se']:.1%})",
            "columns": ["scale", "model", "worst error", "where", "mean |error|", "chi2 (MSE/sigma^2)",
                        "resolved points"], "rows": rows}


def model_crossover_table(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """Per block pair: the crossover sigma under the paper's model, ours, and in the simulation."""
    def show(sigma: float | None) -> str:
        return "none in range" if sigma is None else f"{sigma:.4g}"

    rows = [[c["scale"].upper(), f"{c['block_size']} vs {c['next_block_size']}", show(c["paper"]), show(c["exact"]),
             show(c["simulation"])] for c in comparison["crossovers"]]
    return {"caption": "Crossovers under each analytic model and in the simulation on the authors' grid (linear "
                       "interpolation between the two grid sigmas where MSE(n) - MSE(2n) changes sign)",
            "columns": ["scale", "blocks", "the paper's model", "ours (exact)", "simulation"], "rows": rows}


def zero_block_table(validation: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["scale"].upper(), r["block_size"], f"{r['theory']:.3g}", f"{r['simulation']:.3g}",
             "" if r["reconstruction"] is None else f"{r['reconstruction']:.2g}"] for r in validation["zero_block"]]
    return {"caption": "P(block scale rounds to zero) at sigma = 0.005 (an implementation check; the last column is "
                       "our reconstruction from the fact sheet's formula, not numbers of the paper)",
            "columns": ["scale", "block size", "theory", "simulation", "our reconstruction"], "rows": rows}


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


def _interval(row: Mapping[str, Any]) -> str:
    return f"{row['value']:+.2%} [{row['low']:+.2%}, {row['high']:+.2%}]"


def sweep_table(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """Per sweep point: factor, the moved weights' sigma, the unquantized perplexity and each variant's
    weights-only ``ppl(n) / ppl(2n) - 1`` with its 95% bootstrap interval."""
    n, m = sweep["pair"]
    ratios = {(r["model"], r["variant"]): r for r in sweep["ratios"]}
    variants = [v for v in ("ue4m3", "ue4m3s", "ue5m3") if any(k[1] == v for k in ratios)]
    star = "; ".join(f"{label}: " + (", ".join(
        f"{s.upper()} {c:.3g}" + ("" if sweep[f"position{x}"][s] is None
                                  else f" (sweep position {sweep[f'position{x}'][s]:.2f})")
        for s, c in sweep[f"crossover{x}"].items() if c is not None) or "none")
        for x, label in SIGMA_STAR_MODELS.items() if f"crossover{x}" in sweep)
    rows = [[f"{p['factor']:g}", f"{p['sigma']:.3g} ({p['sigma_low']:.3g}-{p['sigma_high']:.3g})",
             f"{sweep['unquantized'][p['model']]:.3f}",
             *(_interval(ratios[(p["model"], v)]) if (p["model"], v) in ratios else "" for v in variants)]
            for p in sweep["points"]]
    return {"caption": f"The sweep: per factor c, the median sigma of the {sweep['points'][0]['tensors']} moved "
                       f"weight tensors (range), the unquantized perplexity (the same function at every c) and "
                       f"ppl(b{n}) / ppl(b{m}) - 1 with the moved weights in FP4 (95% paired bootstrap over "
                       f"windows; > 0: the inversion). Pre-registered sigma*: {star or 'none'}",
            "columns": ["c", "sigma (range)", "ppl unquantized", *(f"{v} b{n}/b{m} - 1" for v in variants)],
            "rows": rows}


def sweep_gap_table(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """Per sweep point: the relative perplexity gap ``ppl / ppl(unquantized) - 1`` of every cell at block n
    (weights only, then weights and activations)."""
    n = sweep["pair"][0]
    cells = {(c["model"], c["variant"], c["activations"]): c["gap"] for c in sweep["cells"] if c["block_size"] == n}
    keys = [(v, a) for a in (False, True) for v in ("ue4m3", "ue4m3s", "ue5m3")
            if any(k[1:] == (v, a) for k in cells)]
    rows = [[f"{p['factor']:g}", f"{p['sigma']:.3g}",
             *(f"{cells[(p['model'], v, a)]:+.2%}" if (p["model"], v, a) in cells else "" for v, a in keys)]
            for p in sweep["points"]]
    return {"caption": f"The sweep at block {n}: relative perplexity gap to the unquantized model, weights (W) or "
                       "weights and activations (W+A) of the moved linears in FP4",
            "columns": ["c", "sigma", *(f"{v} {'W+A' if a else 'W'}" for v, a in keys)], "rows": rows}


def zero_shot_table(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """The zero-shot cells: cloze accuracy and choice length-normalised accuracy."""
    where = {p["model"]: p for p in sweep["points"]}
    rows = [[f"{where[z['model']]['factor']:g}", f"{where[z['model']]['sigma']:.3g}", z["variant"],
             f"b{z['block_size']}", z["examples"], f"{z['cloze']:.3f}", f"{z['choice']:.3f}"]
            for z in sorted(sweep["zero_shot"], key=lambda z: (-where[z["model"]]["sigma"], z["variant"]))]
    return {"caption": "Zero-shot accuracy on the sweep (moved weights in FP4)",
            "columns": ["c", "sigma", "variant", "block", "examples", "cloze accuracy", "choice accuracy (norm)"],
            "rows": rows}






def our_setup(config: Mapping[str, Any], sweep: Mapping[str, Any], models: Sequence[Mapping[str, Any]],
              tensors: Sequence[Mapping[str, Any]], base_models: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Our side of the setup table, one text per aspect of the config's ``paper_setup``, from the config this run
    used, the sweep summary (its points, pair and zero-shot cells), the perplexity studies' and tensor studies'
    models, and the embedded base models' recorded metadata (``base_models``: name -> ``lowbit_metadata.json``)."""
    study, points, (n, m) = config["model"], sweep["points"], sweep["pair"]
    sources = list(dict.fromkeys(p["model"].removesuffix(f"-c{p['factor']:g}") for p in points))
    factors = number_list([p["factor"] for p in points])
    examples = sorted({z["examples"] for z in sweep["zero_shot"]})
    variants = ", ".join(VARIANTS[v]["scale"].upper() + ("-S (a per-tensor FP32 scale first)"
                                                         if VARIANTS[v].get("global_scale") else "")
                         for v in study["variants"])
    moved = sorted({p["tensors"] for p in points})
    simulation, grid = config["simulation"], config["simulation"]["sigma"]
    return {
        "Models": f"sweep: {', '.join(model_size(s, base_models) for s in sources)} at c = {factors} (the moved "
                  f"linears' weight sigma times c, the same function); perplexity study: "
                  f"{', '.join(model_size(g['model'], base_models) for g in models) or 'none'}; tensor studies: "
                  f"{', '.join(t['model'] for t in tensors) or 'none'}",
        "Data": f"{scored_corpus(config['model']['corpus'], base_models)}, {study['split']} split"
                + (f"; zero-shot cloze and 4-way choice tasks, {' or '.join(map(str, examples))} examples"
                   if examples else ""),
        "Tokens evaluated": f"sweep cells {first_tokens(config['sweep']['max_tokens'])}; perplexity study "
                            f"{first_tokens(study['max_tokens'])}",
        "Sequence length": f"{study['window']} tokens a window, stride {study['stride']}, batch {study['batch_size']}",
        "Block sizes": f"sweep {number_list(sorted({n, m, *config['sweep']['figure_blocks']}))} (the claims' pair "
                       f"{n} vs {m}); perplexity study {number_list(study['block_sizes'])}; theory "
                       f"{number_list(config['theory']['block_sizes'])}; the authors' grid "
                       f"{number_list(config['paper_model']['block_sizes'])}",
        "Scale formats": f"{config['element'].upper()} elements, abs-max block scales in {variants}",
        "Layers quantized": f"sweep: the linears it moves ({' or '.join(map(str, moved))} weight tensors a point), "
                            f"weights only and weights and activations; perplexity study: the linears matching "
                            + f"{study['include']}".replace("$", "\\$") + ", weights and activations",
        "Theory": f"the paper's model and our exact model (common.theory) against simulated Normal data: "
                  f"{config['paper_model']['samples']} samples a point of the authors' grid, "
                  f"{simulation['samples']} a point of {grid['points']} sigmas log-spaced in "
                  f"[{grid['low']:g}, {grid['high']:g}]",
        "Evaluation": "perplexity ratios and zero-shot accuracies with paired bootstrap intervals over windows or "
                      "examples, Clopper-Pearson intervals over tensors, Monte Carlo standard errors for the "
                      "simulation; the verdict of one rule",
    }


def build_context(*, config: Mapping[str, Any], profile: str, validation: Mapping[str, Any],
                  comparison: Mapping[str, Any], tensors: Sequence[Mapping[str, Any]],
                  models: Sequence[Mapping[str, Any]],
                  sweep: Mapping[str, Any], claims: Mapping[str, Any], figures: Sequence[Mapping[str, str]],
                  artifacts: Sequence[str], rerun_examples: Sequence[str], seeds: Mapping[str, int],
                  stage_seconds: Mapping[str, float],
                  base_models: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The report context; ``claims`` is the claims document (``claims.json``); ``base_models``: the embedded base
    models' recorded metadata by name, for the setup table (:func:`our_setup`)."""
    tables = [analytic_models_table(comparison), model_crossover_table(comparison), fit_table(validation),
              crossover_table(validation), zero_block_table(validation),
              sweep_table(sweep), sweep_gap_table(sweep), zero_shot_table(sweep),
              *(tensor_table(t) for t in tensors), *(gap_table(m) for m in models),
              conventions_table(CONVENTIONS["lowbit"], CONVENTIONS["microscaling_limits_authors"])]
    setup = setup_rows(config["paper_setup"], our_setup(config, sweep, models, tensors, base_models or {}))
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims, setup=setup,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
