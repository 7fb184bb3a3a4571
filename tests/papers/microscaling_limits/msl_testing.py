"""Synthetic *Is finer better?* artifacts (helpers of the tests here).

* :func:`tiny_config`: the paper config (default profile) shrunk to a few sigmas, block sizes and 4096 samples.
* :func:`sim_cell`: a simulation cell with chosen rows, for exact validation/crossover arithmetic.
* :func:`fake_block_mse`: a stand-in for :func:`common.theory.block_mse` reading a table of binary fractions, so
  that every ratio :func:`papers.microscaling_limits.curves.validation` computes is exact; :func:`fake_models`
  the same per analytic model (``model="exact"`` or ``"paper"``).
* :func:`model_fit`, :func:`comparison_result`: the analytic models' comparison on the authors' grid, in the format
  ``analytic_models.compare`` writes.
* :func:`validation_result`, :func:`tensor_summary`, :func:`gap_summary`: the inputs of the claims, figures and
  context, in the formats ``curves.validation``, ``tensors.tensor_cell`` and ``model_study.gap_summary`` write.
* The sweep (:mod:`papers.microscaling_limits.sweep`): :func:`sweep_models`, :func:`sweep_tensor_cell`,
  :func:`ppl_record` (planted per-window NLLs whose perplexity ratio to a reference is exact) and
  :func:`zero_shot_record`.
"""

import copy
import math
from pathlib import Path

import numpy as np
import yaml

from common.config import merged
from common.report import claim_specs
from common.uncertainty import Evidence
from papers.microscaling_limits.model_study import parse_cell
from papers.microscaling_limits.settings import KEY, profile_config

PAPER = Path(__file__).resolve().parents[3] / "papers" / "microscaling_limits"
SCHEMA = str(PAPER / "config.schema.yaml")
PROFILES = ("smoke", "default", "full", "paper", "standin")
PARTS = ("non_max", "max_element", "zero_blocks")
EVIDENCE = Evidence(0.95, 1000, 0)  # the workflow's interval settings, 1000 resamples
WINDOWS, WINDOW_TOKENS, BASE_NLL = 64, 16, 3.0  # planted windows: 16 scored tokens each, mean NLL 3 per token

TINY = {
    "theory": {"sigma": {"low": 1.0e-3, "high": 1.0e-1, "points": 3}, "block_sizes": [4, 8],
               "distributions": ["normal", "laplace"]},
    "simulation": {"sigma": {"low": 1.0e-3, "high": 1.0e-1, "points": 3}, "samples": 4096, "seed": 0,
                   "block_sizes": [4, 8]},
    "paper_model": {"block_sizes": [4, 8], "samples": 4096, "figure_blocks": [8]},
    "tensors": {"models": ["base"], "block_sizes": [8, 16]},
    "model": {"block_sizes": [4, 8], "window": 128, "stride": 128, "max_tokens": 8192},
}


def raw_config():
    """The ``microscaling_limits`` section of ``config.yaml``, as read."""
    return yaml.safe_load((PAPER / "config.yaml").read_text())[KEY]


def tiny_config():
    """The default profile with :data:`TINY` merged in (3 sigmas, block sizes 4 and 8, 4096 samples)."""
    return merged(profile_config(raw_config(), "default"), copy.deepcopy(TINY))


def sim_cell(scale, block_size, rows, rule="absmax"):
    """A simulation cell; ``rows`` are ``(sigma, mse, mse_standard_error)`` or with a 4th zero-scale fraction."""
    out = []
    for row in rows:
        sigma, mse, se, zero = (*row, 0.0) if len(row) == 3 else row
        out.append({"setting": rule, "block_size": block_size, "sigma": sigma, "mse": mse,
                    "relative_mse": mse / sigma**2, "mse_standard_error": se, "zero_scale_fraction": zero,
                    "floor_scale_fraction": zero})
    return {"element": "e2m1", "scale": scale, "block_size": block_size, "rule": rule, "samples": 4096, "seed": 0,
            "rows": out, "wall_time_s": 0.5}


def fake_block_mse(totals, calls=None):
    """A ``block_mse(sigma, n, elem, scale, rule)`` returning ``totals[(scale, n, sigma)]`` split 1/2, 1/4, 1/4
    into non_max, max_element and zero_blocks (exact for binary fractions); ``calls`` collects the arguments."""

    def block_mse(sigma, n, elem="e2m1", scale="ue4m3", rule="absmax", **options):
        if calls is not None:
            calls.append((sigma, n, elem, scale, rule))
        total = totals[(scale, n, sigma)]
        return {"non_max": total / 2, "max_element": total / 4, "zero_blocks": total / 4, "total": total}

    return block_mse


def fake_models(totals, calls=None):
    """A ``block_mse(sigma, n, elem, scale, rule, model=...)`` whose total is ``totals[(model, scale, n, sigma)]``
    (parts as :func:`fake_block_mse`); ``calls`` collects ``(sigma, n, scale, model)``."""

    def block_mse(sigma, n, elem="e2m1", scale="ue4m3", rule="absmax", *, model="exact", **options):
        if calls is not None:
            calls.append((sigma, n, scale, model))
        return fake_block_mse({(scale, n, sigma): totals[(model, scale, n, sigma)]})(sigma, n, elem, scale, rule)

    return block_mse


def model_fit(worst, signed=None, sigma=0.0075, block_size=32, relative_se=0.002, mean=0.005, chi2=1e-8,
              resolved_points=10, points=12):
    """One model's entry of ``analytic_models.compare(...)["fits"][scale]`` (``worst`` None: nothing resolved)."""
    out = {"points": points, "resolved_points": resolved_points if worst is not None else 0, "worst": worst,
           "mean": mean if worst is not None else None, "chi2": chi2}
    if worst is not None:
        out |= {"worst_signed": -worst if signed is None else signed, "sigma": sigma, "block_size": block_size,
                "relative_se": relative_se}
    return out


def model_point(n, sigma, simulation, paper, exact=None, relative_se=0.002, scale="ue4m3"):
    """One point of ``analytic_models.compare(...)["points"]`` (``exact`` defaults to the simulation)."""
    exact = simulation if exact is None else exact
    se = relative_se * simulation
    return {"scale": scale, "block_size": n, "sigma": sigma, "simulation": simulation, "relative_se": relative_se,
            "resolved": relative_se <= 0.005,
            **{k: v for model, total in (("paper", paper), ("exact", exact)) for k, v in (
                (model, total), (f"{model}_error", total / simulation - 1),
                (f"{model}_z", abs(total - simulation) / se if se > 0 else 0.0))}}


def model_crossover(n, paper, simulation, exact=None, scale="ue4m3"):
    """One entry of ``analytic_models.compare(...)["crossovers"]``."""
    return {"scale": scale, "block_size": n, "next_block_size": 2 * n, "paper": paper,
            "exact": paper if exact is None else exact, "simulation": simulation}


def comparison_result(paper, exact, points=(), crossovers=(), scale="ue4m3"):
    """An ``analytic_models.compare`` result with the fits ``paper`` and ``exact`` (:func:`model_fit`)."""
    return {"element": "e2m1", "rule": "absmax", "resolved_se": 0.005, "points": list(points),
            "fits": {scale: {"exact": exact, "paper": paper}}, "crossovers": list(crossovers), "wall_time_s": 3.0}


def fit(max_relative_error=0.25, resolved=0.015, resolved_points=3, points=4, max_z=2.0, chi2=3.125e-8):
    """One scale's entry of ``validation["fits"]``."""
    return {"max_relative_error": max_relative_error, "max_relative_error_resolved": resolved,
            "resolved_points": resolved_points, "max_z": max_z, "chi2": chi2, "points": points}


def crossover_row(scale, n, sigma, zero_share=0.75, agrees=True, rule="absmax"):
    """One ``validation["crossovers"]`` entry; the drivers' shares are ``zero_share`` for zero blocks, the rest
    split evenly (None sigma: no crossover, no drivers)."""
    drivers = None
    if sigma is not None:
        rest = (1 - zero_share) / 2
        drivers = {"sigma": sigma / 1.2, "non_max": rest, "max_element": rest, "zero_blocks": zero_share}
    return {"scale": scale, "rule": rule, "block_size": n, "next_block_size": 2 * n, "sigma": sigma,
            "simulation_agrees": None if sigma is None else agrees, "drivers": drivers}


def zero_block_row(scale, n, theory, simulation, reconstruction):
    return {"scale": scale, "block_size": n, "sigma": 0.005, "theory": theory, "simulation": simulation,
            "samples": 2**20, "reconstruction": reconstruction}


def validation_result(fits=None, crossovers=None, zero_block=None, points=None):
    """A ``curves.validation`` result (defaults: two good fits, no crossovers, no zero-block rows)."""
    return {"points": points or [], "fits": fits if fits is not None else {"ue4m3": fit(), "ue5m3": fit()},
            "crossovers": crossovers or [], "zero_block": zero_block or [], "wall_time_s": 2.0}


def tensor_summary(model, tensors, blocks=(8, 16)):
    """A ``tensors.tensor_cell`` result from ``(name, scale, std, inverts, predicted_inverts)`` tuples; its rows
    hold MSEs of 2^-k so medians and prediction errors are exact (measured = std^2 / 8 at the small block, / 4
    at the large one for inverting tensors, the reverse otherwise; predicted = measured * 1.25)."""
    rows, summary = [], []
    for name, scale, std, inv, predicted in tensors:
        for block in blocks:
            small = block == blocks[0]
            relative = (0.25 if small else 0.125) if inv else (0.125 if small else 0.25)
            mse = relative * std**2
            rows.append({"name": name, "shape": (64, 256), "std": std, "scale": scale, "block_size": block,
                         "mse": mse, "relative_mse": relative, "predicted_mse": 1.25 * mse,
                         "predicted_zero_blocks": 0.0, "prediction_error": 0.25})
        summary.append({"name": name, "scale": scale, "std": std, "inverts": inv, "predicted_inverts": predicted,
                        "tie": False})
    return {"model": model, "block_sizes": list(blocks), "inversion_blocks": list(blocks[:2]), "rows": rows,
            "tensors": summary, "wall_time_s": 1.5}


def gap_summary(model, gaps, perplexity=10.0, tokens=8192):
    """A ``model_study.gap_summary`` result: ``gaps`` maps a variant to ``{block_size: gap}``."""
    rows = [{"cell": f"e2m1-{variant}-b{block}", "variant": variant, "block_size": block,
             "perplexity": perplexity + gap, "gap": gap}
            for variant, by_block in gaps.items() for block, gap in by_block.items()]
    return {"model": model, "perplexity": perplexity, "tokens": tokens, "rows": rows, "wall_time_s": 1.0}


def specs():
    """The claim specs of ``config.yaml``."""
    return claim_specs(raw_config()["claims"])


def sweep_models(factors):
    """Sweep points ``{"model": "m-c<f>", "factor": f}``."""
    return [{"model": f"m-c{f:g}", "factor": f} for f in factors]


def sweep_tensor_cell(model, sigma, tensors=None, pair=(16, 32)):
    """A sweep tensor cell: ``tensors`` are ``(name, scale, std, inverts, predicted_inverts[, tie])``; default one
    tensor ``t`` of sigma ``sigma`` per scale, UE4M3 inverting (measured and predicted) below 0.016."""
    if tensors is None:
        tensors = [("t", "ue4m3", sigma, sigma < 0.016, sigma < 0.016), ("t", "ue5m3", sigma, False, False)]
    cell = tensor_summary(model, [t[:5] for t in tensors], blocks=pair)
    for entry, t in zip(cell["tensors"], tensors, strict=True):
        entry["tie"] = t[5] if len(t) > 5 else False
    return cell


def offsets(log_ratio, noise=0.0, seed=0):
    """Per-window NLL offsets whose token-weighted mean is exactly ``log_ratio`` per token: a centred seeded
    normal draw times ``noise`` (per token) around it."""
    z = np.random.default_rng(seed).standard_normal(WINDOWS)
    z -= z.mean()
    return (log_ratio + noise * z) * WINDOW_TOKENS


def ppl_record(model, cell, log_ratio=0.0, noise=0.0, seed=0):
    """A perplexity cell of ``model``: ``log(ppl / ppl_reference) = log_ratio`` exactly (the reference: offsets 0,
    identical windows), per-window noise ``noise``."""
    nll = BASE_NLL * WINDOW_TOKENS + offsets(log_ratio, noise, seed)
    parts = {} if cell == "unquantized" else parse_cell(cell)
    return {"name": model, "cell": cell, **parts, "wall_time_s": 0.5,
            "metrics": {"perplexity": {"window_nll": nll.tolist(), "window_tokens": [WINDOW_TOKENS] * WINDOWS,
                                       "perplexity": math.exp(float(nll.sum()) / (WINDOW_TOKENS * WINDOWS)),
                                       "window": WINDOW_TOKENS, "stride": WINDOW_TOKENS}}}


def zero_shot_record(model, cell, cloze, choice):
    """A zero-shot cell with the given per-example correctness (lists of 0/1)."""
    return {"name": model, "cell": cell, **parse_cell(cell), "wall_time_s": 0.25,
            "metrics": {"cloze": {"examples": len(cloze), "acc": float(np.mean(cloze)), "example_correct": cloze},
                        "choice": {"examples": len(choice), "acc_norm": float(np.mean(choice)),
                                   "example_correct_norm": choice}}}
