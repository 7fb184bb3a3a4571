"""The paper's claims as evidence (:mod:`common.report.claims`): each row's prediction is written in
``config.yaml`` (``claims:``) before the data, its estimate carries a 95% interval, and the verdict follows by the
fixed rule. The perplexity and tensor rows are measured on the function-preserving sweep (:mod:`.sweep`), with
``sigma*`` the pre-registered crossover of the block pair ``n`` vs ``2n`` (UE4M3 unless named) under the paper's
analytic model (:mod:`common.theory.paper_model`); one row tests ours (the exact model) the same way.

* ``sweep_inversion_onset`` (the paper's ``sigma*``) and ``sweep_inversion_onset_exact`` (ours): the onset is the
  widest sweep point whose UE4M3 weights-only ``ppl(n) / ppl(2n) - 1 > 0`` (scanning wide to narrow; ``K``, one
  step beyond the narrowest point, when none inverts); statistic ``grid_position(sigma*) - onset`` =
  ``log(onset sigma / sigma*)`` in sweep steps, paired bootstrap over windows (one draw of windows for every
  point), so a replicate without an onset counts as beyond the grid, never as missing.
* ``sweep_wide_no_inversion``: ``ppl(n) / ppl(2n) - 1`` (UE4M3, weights) at the widest point, when it is wider
  than ``sigma*``.
* ``sweep_ue5m3_no_inversion``: ``max_k ppl_ue5(n) / ppl_ue5(2n) - 1`` over the points at or below ``sigma*``.
* ``ue5m3_matches_ue4m3s_*``: equivalence, ``max_k |ppl_ue5(n) / ppl_ue4s(n) - 1|`` over every point (weights
  only; weights and activations), and ``max_k |acc_ue5 - acc_ue4s|`` over the zero-shot points (cloze accuracy;
  choice length-normalised accuracy: :data:`common.eval.scores.TASK_ACCURACY`, each example's correctness from its
  record, :func:`common.eval.scores.example_correct`), paired bootstrap over examples.
* Tensor rows (every moved weight tensor of every point): among the tensors the theory predicts to invert (from
  their sigma alone, UE4M3, MSE(n) > MSE(2n)) the fraction that do; among the others the fraction that do not;
  among the predicted-inverting ones the fraction whose UE5M3 MSE does not invert. Clopper-Pearson intervals
  over tensors (:func:`common.uncertainty.binomial_interval`).
* ``paper_model_chi2`` (the paper's "remarkable agreement" of its model with experiment, chi^2 ~ 4e-8): the
  largest, over the block sizes of the authors' grid (UE4M3), Pearson ``chi^2 = sum_k (O_k - E_k)^2 / E_k`` over
  the grid's 51 sigmas, ``O`` the simulated MSE (experiment), ``E`` the paper's model (absolute MSE, not divided by
  sigma^2: the definition that gives the paper's order, 3.7e-8 / 4.3e-8 / 3.8e-8 at n 8 / 16 / 32 for the paper's
  model against our exact one); normal interval with the delta-method Monte Carlo standard error
  ``sqrt(sum_k (2 (O_k - E_k) / E_k)^2 se_k^2)`` (the maximum itself is not resampled). Its negative control
  ``paper_model_chi2_control_ue5m3``: the same chi^2 with the paper's model of UE5M3 scales (no limited dynamic
  range: the mechanism taken away) against the same UE4M3 simulation.
* ``paper_model_crossover``: ``sigma*_paper(n) - sigma*_MC(n)`` of the claims' pair ``n`` vs ``2n`` (UE4M3), the
  paper model's crossover (:func:`common.theory.crossover`) minus the Monte Carlo one on the authors' grid
  (:func:`.analytic_models.simulated_crossover`: the sign change of ``MSE(n) - MSE(2n)``, interpolated linearly);
  normal interval with the delta-method standard error of that interpolation (the two cells' errors treated as
  independent). Its negative control ``paper_model_crossover_control_neighbour``: the paper model's crossover of
  the neighbouring pair ``n/2`` vs ``n`` against the same Monte Carlo crossover (a prediction one block size off).
* ``paper_model_matches_simulation`` (our finding: the paper claims a chi^2, not a pointwise bound): the largest
  ``|paper / simulation - 1|`` of the total MSE over the points of the authors' grid that the simulation resolves
  (:mod:`.analytic_models`); normal interval with the Monte Carlo standard error at that point.
* ``exact_model_beats_paper_model`` (our finding, not the paper's): our exact model's largest ``|error|`` minus
  the paper model's, over the same points; normal interval with both points' standard errors.
* ``zero_blocks_drive_reversal`` (our finding about the paper's model: the paper names the limited dynamic range
  of the scales, not zero blocks, as the driver): the zero-block share of ``MSE(n) - MSE(2n)`` at ``sigma* / 1.2``
  (the paper's model, by numerical integration: exact).

Every bootstrap is :meth:`common.uncertainty.Evidence.paired` with the workflow's ``evidence`` settings; the
Clopper-Pearson and normal intervals take their ``level``.

Implementation checks (:class:`common.report.Check`, never evidence): the theory's parts sum to its total;
P(block scale = 0) at sigma = 0.005 agrees with simulation and with our reconstruction of the fact sheet
(0.33, 0.11, 0.012, 1.5e-4 for n = 4, 8, 16, 32: our numbers from its formula, not the paper's); our exact model
matches the simulation at every simulated point (within 2% or 4 standard errors); the sweep keeps the unquantized
perplexity; it moves every moved tensor's sigma by its factor.

The claims step judges every row against the regime card (:mod:`.regime`): a row whose config ``requires`` a
quantity outside its bounds is not testable at this scale, its estimate kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.eval.scores import TASK_ACCURACY, example_correct
from common.report import Check, Claim, ClaimSpec, ClaimsResult, judge, signed_percent
from common.theory import block_mse
from common.uncertainty import Estimate, Evidence, binomial_interval, exact, normal_interval

from .sweep import (
    Windows,
    cell_name,
    column,
    grid_position,
    log_ratio,
    ratio_estimate,
)

CLAIM_IDS = ("sweep_inversion_onset", "sweep_inversion_onset_exact", "sweep_wide_no_inversion",
             "sweep_ue5m3_no_inversion", "sweep_narrow_tensors_invert", "sweep_wide_tensors_do_not_invert",
             "sweep_ue5m3_tensors_do_not_invert", "ue5m3_matches_ue4m3s_perplexity",
             "ue5m3_matches_ue4m3s_perplexity_activations", "ue5m3_matches_ue4m3s_cloze", "ue5m3_matches_ue4m3s_choice",
             "paper_model_chi2", "paper_model_chi2_control_ue5m3", "paper_model_crossover",
             "paper_model_crossover_control_neighbour", "paper_model_matches_simulation", "zero_blocks_drive_reversal",
             "exact_model_beats_paper_model")
CHI2_SCALE = "ue4m3"  # the authors' script's scale format: the chi^2 and crossover rows read these cells
ZERO_SHOT_LABELS = {"cloze": "accuracy", "choice": "length-normalised accuracy"}  # TASK_ACCURACY, named
PARTS_TOLERANCE = 1e-12  # |parts - total| / total of the theory
FUNCTION_TOLERANCE = 1e-3  # |ppl(c) / ppl(widest) - 1| of the unquantized sweep points
SIGMA_TOLERANCE = 1e-4  # |(sigma(c) / sigma(widest)) / (c / c_widest) - 1| of every moved tensor
ZERO_BLOCK_SE = 4  # the simulated zero-block fraction lies within this many standard errors of the theory
EXACT_TOLERANCE, EXACT_SE = 0.02, 4.0  # the exact model vs simulation: within 2% or 4 standard errors per point


def _point(p: Mapping[str, Any]) -> str:
    return f"c={p['factor']:g} (sigma {p['sigma']:.3g})"


def pair_cells(element: str, variant: str, pair: Sequence[int]) -> tuple[str, str]:
    """The weights-only cells of ``variant`` at blocks ``n`` and ``2n``."""
    return cell_name(element, variant, pair[0], True), cell_name(element, variant, pair[1], True)


def onset_claim(spec: ClaimSpec, points: Sequence[Mapping[str, Any]], data: Windows, element: str,
                pair: Sequence[int], sigma_star: float | None, evidence: Evidence,
                sources: Sequence[str], *, label: str = "pre-registered") -> Claim:
    """``sweep_inversion_onset`` and ``sweep_inversion_onset_exact`` (module docstring); ``points`` widest first
    (:func:`.sweep.sweep_points`); ``label`` names ``sigma*`` in the detail."""
    if sigma_star is None:
        return judge(spec, None, reason=f"the theory has no UE4M3 crossover of blocks {pair[0]} vs {pair[1]}",
                     evidence=sources)
    if len(points) < 2:
        return judge(spec, None, reason=f"sweep steps need at least 2 sweep points, got {len(points)}",
                     evidence=sources)
    small, large = pair_cells(element, "ue4m3", pair)
    keys = [((p["model"], small), (p["model"], large)) for p in points]
    predicted = grid_position([p["sigma"] for p in points], sigma_star)

    def statistic(sums: Mapping[str, np.ndarray]) -> np.ndarray:
        inverted = np.stack([log_ratio(sums, a, b) > 0 for a, b in keys])
        onset = np.where(inverted.any(axis=0), inverted.argmax(axis=0), len(keys))
        return predicted - onset

    estimate = evidence.paired(data.columns([k for pair_keys in keys for k in pair_keys]), statistic, "windows")
    ratios = [ratio_estimate(data, a, b, evidence) for a, b in keys]
    onset = next((k for k, r in enumerate(ratios) if r.value > 0), None)
    cited = [*sources, *data.sources(k for ab in keys for k in ab)]
    found = "no point inverts" if onset is None else f"onset at {_point(points[onset])}"
    detail = (f"sigma* = {sigma_star:.3g} ({label}) at sweep position {predicted:.2f}; {found}; UE4M3 "
              f"ppl({pair[0]})/ppl({pair[1]}) - 1: " + ", ".join(
                  f"{_point(p)} {signed_percent(r.value, 3)} [{signed_percent(r.low, 3)}, {signed_percent(r.high, 3)}]"
                  for p, r in zip(points, ratios, strict=True)))
    return judge(spec, estimate, detail=detail, evidence=cited)


def wide_claim(spec: ClaimSpec, points: Sequence[Mapping[str, Any]], data: Windows, element: str,
               pair: Sequence[int], sigma_star: float | None, evidence: Evidence,
               sources: Sequence[str]) -> Claim:
    """``sweep_wide_no_inversion``: UE4M3 ``ppl(n) / ppl(2n) - 1`` at the widest point (it must be wider than
    ``sigma*``)."""
    if sigma_star is None:
        return judge(spec, None, reason=f"the theory has no UE4M3 crossover of blocks {pair[0]} vs {pair[1]}",
                     evidence=sources)
    widest = points[0] if points else None
    if widest is None or not widest["sigma"] > sigma_star:
        return judge(spec, None, reason=f"no sweep point is wider than the UE4M3 crossover sigma* = {sigma_star:.3g}",
                     evidence=sources)
    small, large = pair_cells(element, "ue4m3", pair)
    keys = [(widest["model"], small), (widest["model"], large)]
    estimate = ratio_estimate(data, *keys, evidence)
    return judge(spec, estimate, detail=f"{_point(widest)}, sigma* = {sigma_star:.3g}: UE4M3 ppl({pair[0]})/"
                 f"ppl({pair[1]}) - 1 = {signed_percent(estimate.value, 3)}", evidence=[*sources, *data.sources(keys)])


def _max_over(data: Windows, keys: Sequence[tuple[tuple[str, str], tuple[str, str]]], absolute: bool,
              evidence: Evidence) -> Estimate:
    """Paired bootstrap of ``max_k f(ppl(a_k) / ppl(b_k) - 1)`` (``f`` = abs when ``absolute``)."""

    def statistic(sums: Mapping[str, np.ndarray]) -> np.ndarray:
        values = np.stack([np.expm1(log_ratio(sums, a, b)) for a, b in keys])
        return (np.abs(values) if absolute else values).max(axis=0)

    return evidence.paired(data.columns([k for ab in keys for k in ab]), statistic, "windows")


def ue5m3_inversion_claim(spec: ClaimSpec, points: Sequence[Mapping[str, Any]], data: Windows, element: str,
                          pair: Sequence[int], sigma_star: float | None, evidence: Evidence,
                          sources: Sequence[str]) -> Claim:
    """``sweep_ue5m3_no_inversion``: the largest UE5M3 ``ppl(n) / ppl(2n) - 1`` over the points at or below the
    UE4M3 ``sigma*``."""
    narrow = [p for p in points if sigma_star is not None and p["sigma"] <= sigma_star]
    if not narrow:
        return judge(spec, None, reason="no sweep point at or below the UE4M3 crossover sigma*", evidence=sources)
    small, large = pair_cells(element, "ue5m3", pair)
    keys = [((p["model"], small), (p["model"], large)) for p in narrow]
    estimate = _max_over(data, keys, False, evidence)
    detail = f"UE5M3 ppl({pair[0]})/ppl({pair[1]}) - 1 at the {len(narrow)} points at or below sigma* = " \
             f"{sigma_star:.3g}: " + ", ".join(
                 f"{_point(p)} {signed_percent(ratio_estimate(data, a, b, evidence).value, 3)}"
                 for p, (a, b) in zip(narrow, keys, strict=True))
    return judge(spec, estimate, detail=detail, evidence=[*sources, *data.sources(k for ab in keys for k in ab)])


def equivalence_claim(spec: ClaimSpec, points: Sequence[Mapping[str, Any]], data: Windows, element: str,
                      block_size: int, weights_only: bool, evidence: Evidence,
                      sources: Sequence[str]) -> Claim:
    """``ue5m3_matches_ue4m3s_perplexity[_activations]``: ``max_k |ppl_ue5(n) / ppl_ue4s(n) - 1|``."""
    if not points:
        return judge(spec, None, reason="no sweep points", evidence=sources)
    keys = [((p["model"], cell_name(element, "ue5m3", block_size, weights_only)),
             (p["model"], cell_name(element, "ue4m3s", block_size, weights_only))) for p in points]
    estimate = _max_over(data, keys, True, evidence)
    detail = f"ppl(UE5M3) / ppl(UE4M3-S) - 1 at block {block_size}: " + ", ".join(
        f"{_point(p)} {signed_percent(ratio_estimate(data, a, b, evidence).value, 3)}"
        for p, (a, b) in zip(points, keys, strict=True))
    return judge(spec, estimate, detail=detail, evidence=[*sources, *data.sources(k for ab in keys for k in ab)])


def zero_shot_claim(spec: ClaimSpec, task: str, points: Sequence[Mapping[str, Any]],
                    records: Iterable[Mapping[str, Any]], element: str, block_size: int,
                    evidence: Evidence, sources: Sequence[str]) -> Claim:
    """``ue5m3_matches_ue4m3s_<task>``: ``max_k |acc_ue5 - acc_ue4s|`` over the zero-shot points (``points``:
    the sweep points, to order and name them); ``records``: the zero-shot cells. The statistic is
    ``max_k |S_correct(ue5, k) - S_correct(ue4s, k)| / n`` over the ``n`` examples every cell scores."""
    by_cell = {(r["name"], r["cell"]): r for r in records}
    cells = [cell_name(element, v, block_size, True) for v in ("ue5m3", "ue4m3s")]
    measured = [p for p in points if all((p["model"], c) in by_cell for c in cells)]
    if not measured:
        return judge(spec, None, reason=f"no sweep point has both zero-shot cells {cells}", evidence=sources)
    columns = {column(p["model"], c): example_correct(column(p["model"], c), by_cell[(p["model"], c)], task,
                                                      TASK_ACCURACY[task])
               for p in measured for c in cells}
    n = len(next(iter(columns.values())))

    def statistic(sums: Mapping[str, np.ndarray]) -> np.ndarray:
        diffs = np.stack([(sums[column(p["model"], cells[0])] - sums[column(p["model"], cells[1])]) / n
                          for p in measured])
        return np.abs(diffs).max(axis=0)

    estimate = evidence.paired(columns, statistic, "examples")
    detail = f"{task} {ZERO_SHOT_LABELS[task]}, {n} examples, UE5M3 vs UE4M3-S at block {block_size}: " + ", ".join(
        f"{_point(p)} {np.mean(columns[column(p['model'], cells[0])]):.3f} vs "
        f"{np.mean(columns[column(p['model'], cells[1])]):.3f}" for p in measured)
    return judge(spec, estimate, detail=detail, evidence=sources)


def _tensors(cells: Iterable[Mapping[str, Any]], scale: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(c["model"], t["name"]): t for c in cells for t in c["tensors"] if t["scale"] == scale}


def tensor_claims(specs: Mapping[str, ClaimSpec], cells: Sequence[Mapping[str, Any]], pair: Sequence[int],
                  level: float, sources: Sequence[str]) -> list[Claim]:
    """The three tensor rows (module docstring) from the sweep's tensor cells (:func:`.tensors.tensor_cell`); a
    tensor whose measured MSEs tie (every block zero at both sizes) is no comparison and is left out."""
    ue4, ue5 = _tensors(cells, "ue4m3"), _tensors(cells, "ue5m3")
    ties = sum(t["tie"] for t in ue4.values())
    compared = {k: t for k, t in ue4.items() if not t["tie"]}
    narrow = [k for k, t in compared.items() if t["predicted_inverts"]]
    wide = [k for k, t in compared.items() if not t["predicted_inverts"]]
    blocks = f"MSE at block {pair[0]} > block {pair[1]}"
    left_out = f"; {ties} UE4M3 ties (every block zero at both sizes) left out" if ties else ""
    rows = []
    for cid, chosen, good, predicted, measured, side in (
            ("sweep_narrow_tensors_invert", narrow, lambda t: t["inverts"], "to invert", "do", "narrower"),
            ("sweep_wide_tensors_do_not_invert", wide, lambda t: not t["inverts"], "not to invert", "do not",
             "wider")):
        if not chosen:
            rows.append(judge(specs[cid], None, reason=f"no compared sweep tensor is {side} than the theory's "
                              f"crossover (the sweep does not reach that side){left_out}", evidence=sources))
            continue
        hits = sum(bool(good(compared[k])) for k in chosen)
        sigmas = [compared[k]["std"] for k in chosen]
        rows.append(judge(specs[cid], binomial_interval(hits, len(chosen), level, "tensors"),
                          detail=f"{hits} of {len(chosen)} tensors the theory predicts {predicted} with UE4M3 "
                                 f"({blocks}) {measured} (sigma {min(sigmas):.3g}-{max(sigmas):.3g}){left_out}",
                          evidence=sources))
    measured = [k for k in narrow if k in ue5 and not ue5[k]["tie"]]
    spec = specs["sweep_ue5m3_tensors_do_not_invert"]
    if not measured:
        rows.append(judge(spec, None, reason="no UE5M3 study of a tensor the theory predicts to invert with UE4M3",
                          evidence=sources))
    else:
        hits = sum(not ue5[k]["inverts"] for k in measured)
        rows.append(judge(spec, binomial_interval(hits, len(measured), level, "tensors"),
                          detail=f"{hits} of {len(measured)} tensors the theory predicts to invert with UE4M3 keep "
                                 f"finer better with UE5M3 (not {blocks})", evidence=sources))
    return rows


def _cells(comparison: Mapping[str, Any], scale: str = CHI2_SCALE) -> dict[int, list[Mapping[str, Any]]]:
    """The comparison's points of ``scale`` per block size, each cell's points by increasing sigma."""
    cells: dict[int, list[Mapping[str, Any]]] = {}
    for p in comparison["points"]:
        if p["scale"] == scale:
            cells.setdefault(p["block_size"], []).append(p)
    return {n: sorted(ps, key=lambda p: p["sigma"]) for n, ps in sorted(cells.items())}


def pearson_chi2(observed: Sequence[float], expected: Sequence[float], standard_errors: Sequence[float]
                 ) -> tuple[float, float, float]:
    """Pearson ``chi^2 = sum (O - E)^2 / E`` of the simulated MSEs ``observed`` (standard errors
    ``standard_errors``) against a model's ``expected``; its delta-method standard error
    ``sqrt(sum (2 (O - E) / E)^2 se^2)`` and ``sum se^2 / E``, what Monte Carlo noise alone adds in expectation."""
    o, e, se = (np.asarray(v, np.float64) for v in (observed, expected, standard_errors))
    if not (e > 0).all():
        raise ValueError("Pearson chi^2 needs a positive model MSE at every point")
    return (float(np.sum((o - e) ** 2 / e)), float(np.sqrt(np.sum((2 * (o - e) / e * se) ** 2))),
            float(np.sum(se**2 / e)))


def _model_totals(element: str, points: Sequence[Mapping[str, Any]], n: int, scale: str) -> list[float]:
    """The paper's model at each point's sigma: stored (``paper``) for the simulated scale, computed for another."""
    if scale == CHI2_SCALE:
        return [p["paper"] for p in points]
    return [block_mse(p["sigma"], n, element, scale, "absmax", model="paper")["total"] for p in points]


def chi2_claim(spec: ClaimSpec, comparison: Mapping[str, Any], level: float, sources: Sequence[str], *,
               model_scale: str = CHI2_SCALE) -> Claim:
    """``paper_model_chi2`` (``model_scale`` UE4M3) and its control ``paper_model_chi2_control_ue5m3``
    (``model_scale`` UE5M3): the largest Pearson chi^2 over the block sizes of the UE4M3 cells of ``comparison``
    of the paper's model of ``model_scale`` scales against the simulation (module docstring)."""
    cells = _cells(comparison)
    if not cells:
        return judge(spec, None, reason=f"no {CHI2_SCALE.upper()} simulation on the authors' grid", evidence=sources)
    fits = {}
    for n, points in cells.items():
        observed = [p["simulation"] for p in points]
        errors = [p["relative_se"] * p["simulation"] for p in points]
        fits[n] = pearson_chi2(observed, _model_totals(comparison["element"], points, n, model_scale), errors)
    worst = max(fits, key=lambda n: fits[n][0])
    value, se, _ = fits[worst]
    estimate = normal_interval(value, se, level=level, method=f"delta-method Monte Carlo standard error of the "
                               f"chi^2 at n {worst} (the largest; the maximum itself is not resampled)")
    ours = "" if model_scale != CHI2_SCALE else "; ours (exact): " + ", ".join(
        f"n {n} {pearson_chi2([p['simulation'] for p in ps], [p['exact'] for p in ps], [0.0] * len(ps))[0]:.2g}"
        for n, ps in cells.items())
    detail = (f"Pearson chi^2 = sum (simulation - model)^2 / model over {len(cells[worst])} sigmas, the paper's "
              f"model of {model_scale.upper()} scales against the {CHI2_SCALE.upper()} simulation: " + ", ".join(
                  f"n {n} {c:.2g}" for n, (c, _, _) in fits.items())
              + f" (Monte Carlo noise alone adds about {fits[worst][2]:.1g} at n {worst}){ours}")
    return judge(spec, estimate, detail=detail, evidence=sources)


def _simulated_crossover(points: Sequence[Mapping[str, Any]], pair: Sequence[int]
                         ) -> tuple[float, float, int] | None:
    """The Monte Carlo crossover of blocks ``n, 2n`` (:func:`.analytic_models.simulated_crossover`: the same scan and
    interpolation) with its delta-method standard error and the bracket's upper index, from the two cells' points
    (by increasing sigma); None without a bracket or a cell."""
    small, large = ({round(p["sigma"], 12): p for p in points if p["block_size"] == b} for b in pair)
    sigmas = sorted(set(small) & set(large))
    if len(sigmas) < 2 or len(sigmas) != len(small) or len(sigmas) != len(large):
        return None
    d = [small[s]["simulation"] - large[s]["simulation"] for s in sigmas]
    var = [(small[s]["relative_se"] * small[s]["simulation"]) ** 2
           + (large[s]["relative_se"] * large[s]["simulation"]) ** 2 for s in sigmas]
    for k in range(len(sigmas) - 1, 0, -1):
        if d[k] < 0 < d[k - 1]:
            step, gap = sigmas[k] - sigmas[k - 1], d[k - 1] - d[k]
            value = sigmas[k - 1] + step * d[k - 1] / gap
            se = step / gap**2 * math.sqrt(d[k] ** 2 * var[k - 1] + d[k - 1] ** 2 * var[k])
            return value, se, k
    return None


def crossover_claim(spec: ClaimSpec, comparison: Mapping[str, Any], pair: Sequence[int], level: float,
                    sources: Sequence[str], *, neighbour: bool = False) -> Claim:
    """``paper_model_crossover``: the paper model's crossover of ``pair`` (``n`` vs ``2n``) minus the Monte Carlo
    one; ``neighbour`` (its control ``paper_model_crossover_control_neighbour``): the paper model's crossover of
    ``n/2`` vs ``n`` minus the same Monte Carlo crossover (module docstring)."""
    n, m = pair
    predicted_n = n // 2 if neighbour else n
    models = {c["block_size"]: c for c in comparison["crossovers"] if c["scale"] == CHI2_SCALE}
    if predicted_n not in models or models[predicted_n]["paper"] is None:
        return judge(spec, None, reason=f"the paper's model has no {CHI2_SCALE.upper()} crossover of blocks "
                     f"{predicted_n} vs {2 * predicted_n} on the authors' grid", evidence=sources)
    measured = _simulated_crossover([p for p in comparison["points"] if p["scale"] == CHI2_SCALE], (n, m))
    if measured is None:
        return judge(spec, None, reason=f"the simulation on the authors' grid shows no {CHI2_SCALE.upper()} "
                     f"crossover of blocks {n} vs {m}", evidence=sources)
    sim, se, _ = measured
    predicted = models[predicted_n]["paper"]
    estimate = normal_interval(predicted - sim, se, level=level, method="delta-method Monte Carlo standard error "
                               "of the simulated crossover (linear interpolation; the two cells' errors independent)")
    others = ", ".join(f"{c['block_size']} vs {c['next_block_size']} {c['paper']:.4g} vs {c['simulation']:.4g}"
                       for c in models.values() if c["paper"] is not None and c["simulation"] is not None)
    detail = (f"sigma* of blocks {n} vs {m}, {CHI2_SCALE.upper()}: "
              + (f"the paper's model of blocks {predicted_n} vs {n} (one block size off) " if neighbour else
                 "the paper's model ")
              + f"{predicted:.4g}, Monte Carlo {sim:.4g} +- {se:.2g} ({signed_percent(predicted / sim - 1, 3)})"
              + (f"; every pair (paper's model vs Monte Carlo): {others}" if others else ""))
    return judge(spec, estimate, detail=detail, evidence=sources)


def _worst(fit: Mapping[str, Any]) -> str:
    return f"{fit['worst_signed']:+.2%} at sigma {fit['sigma']:.3g}, n {fit['block_size']}"


def paper_model_claim(spec: ClaimSpec, comparison: Mapping[str, Any], level: float, sources: Sequence[str]
                      ) -> Claim:
    """``paper_model_matches_simulation`` (our finding): the largest ``|paper / simulation - 1|`` over the resolved
    points of the authors' grid (every scale of ``comparison``, :func:`.analytic_models.compare`); normal interval
    with the Monte Carlo standard error of that point's ratio (the maximum itself is not resampled)."""
    fits = {scale: f["paper"] for scale, f in comparison["fits"].items() if f["paper"]["worst"] is not None}
    if not fits:
        return judge(spec, None, reason=f"no simulated point of the authors' grid resolves the model (relative "
                     f"standard error <= {comparison['resolved_se']:.1%})", evidence=sources)
    worst = max(fits.values(), key=lambda f: f["worst"])
    estimate = normal_interval(worst["worst"], (1 + worst["worst_signed"]) * worst["relative_se"], level=level,
                               method="Monte Carlo standard error of the simulated MSE at the worst point")
    exact_fits = {scale: comparison["fits"][scale]["exact"] for scale in fits}
    detail = "; ".join(
        f"{scale.upper()}: the paper's model worst {_worst(f)}, mean |error| {f['mean']:.2%}, chi2 (MSE/sigma^2) "
        f"{f['chi2']:.1e} over {f['resolved_points']} resolved of {f['points']} points (ours, exact: worst "
        f"{_worst(exact_fits[scale])}, mean {exact_fits[scale]['mean']:.2%}, chi2 (MSE/sigma^2) "
        f"{exact_fits[scale]['chi2']:.1e})" for scale, f in fits.items())
    return judge(spec, estimate, detail=detail, evidence=sources)


def exact_advantage_claim(spec: ClaimSpec, comparison: Mapping[str, Any], level: float, sources: Sequence[str]
                          ) -> Claim:
    """``exact_model_beats_paper_model`` (our finding, not the paper's): the exact model's largest ``|error|``
    minus the paper model's over the same resolved points; normal interval with the two worst points' standard
    errors combined as if independent."""
    pairs = [(f["exact"], f["paper"]) for f in comparison["fits"].values() if f["paper"]["worst"] is not None]
    if not pairs:
        return judge(spec, None, reason=f"no simulated point of the authors' grid resolves the models (relative "
                     f"standard error <= {comparison['resolved_se']:.1%})", evidence=sources)
    exact_worst = max((e for e, _ in pairs), key=lambda f: f["worst"])
    paper_worst = max((p for _, p in pairs), key=lambda f: f["worst"])
    se = math.hypot((1 + exact_worst["worst_signed"]) * exact_worst["relative_se"],
                    (1 + paper_worst["worst_signed"]) * paper_worst["relative_se"])
    estimate = normal_interval(exact_worst["worst"] - paper_worst["worst"], se, level=level,
                               method="Monte Carlo standard errors of the two worst points")
    return judge(spec, estimate, detail=f"largest |model / simulation - 1|: ours (exact) {_worst(exact_worst)}, "
                 f"the paper's {_worst(paper_worst)}", evidence=sources)


def zero_block_claim(spec: ClaimSpec, preregistered: Mapping[str, Any], sources: Sequence[str]) -> Claim:
    """``zero_blocks_drive_reversal``: the pre-registered UE4M3 drivers of ``MSE(n) - MSE(2n)`` under the paper's
    model (``drivers_paper``)."""
    parts = preregistered["drivers_paper"].get("ue4m3")
    n, m = preregistered["pair"]
    if parts is None:
        return judge(spec, None, reason=f"the theory has no UE4M3 crossover of blocks {n} vs {m}", evidence=sources)
    return judge(spec, exact(parts["zero_blocks"], "exact (the paper's model by numerical integration)"),
                 detail=f"at sigma {parts['sigma']:.3g} (sigma*/1.2), shares of MSE({n}) - MSE({m}): zero blocks "
                        f"{parts['zero_blocks']:.2g}, max element {parts['max_element']:.3g}, non-max "
                        f"{parts['non_max']:.3g}", evidence=sources)


def theory_checks(theory_cells: Sequence[Mapping[str, Any]], validation: Mapping[str, Any],
                  theory_sources: Sequence[str], validation_source: str) -> list[Check]:
    """The theory's parts sum to its total; P(scale = 0) against simulation and our reconstruction."""
    worst = max((abs(sum(r[p] for p in ("non_max", "max_element", "zero_blocks")) - r["total"]) / r["total"]
                 for c in theory_cells for r in c["rows"] if r["total"] > 0), default=0.0)
    rows = [r for r in validation["zero_block"] if r["reconstruction"] is not None]
    off = []
    for r in rows:
        se = math.sqrt(r["theory"] * (1 - r["theory"]) / (r["samples"] / r["block_size"]))
        if f"{r['theory']:.2g}" != f"{r['reconstruction']:.2g}" or abs(r["simulation"] - r["theory"]) > \
                ZERO_BLOCK_SE * se + 1e-12:
            off.append(r["block_size"])
    return [
        Check("theory_parts_sum_to_total", "the theory's three parts (non-max, max element, zero blocks) sum to "
              "its total MSE", f"largest relative difference {worst:.1e} over {len(theory_cells)} theory cells "
              f"(tolerance {PARTS_TOLERANCE:g})", worst <= PARTS_TOLERANCE, tuple(theory_sources)),
        Check("zero_block_probability_reconstruction", "P(block scale = 0), UE4M3, sigma 0.005: the theory equals "
              "our reconstruction from the fact sheet's formula (0.33, 0.11, 0.012, 1.5e-4 for n = 4, 8, 16, 32; "
              "not the paper's numbers) to 2 digits and the simulation within 4 standard errors",
              ", ".join(f"n={r['block_size']}: theory {r['theory']:.2g}, simulation {r['simulation']:.2g}"
                        for r in rows) or "no rows", bool(rows) and not off, (validation_source,)),
    ]


def exact_model_check(validation: Mapping[str, Any], comparison: Mapping[str, Any], sources: Sequence[str]
                      ) -> Check:
    """Our exact model against simulation at every simulated point (the log grid of ``validation`` and the
    authors' grid of ``comparison``): within :data:`EXACT_TOLERANCE` relative or :data:`EXACT_SE` standard errors
    (tests/theory's tolerance: near rare zero blocks one flushed block dominates a sample)."""
    errors = [(p["relative_error"], p["z"], p["sigma"], p["block_size"], p["scale"], p["rule"])
              for p in validation["points"]]
    errors += [(abs(p["exact_error"]), p["exact_z"], p["sigma"], p["block_size"], p["scale"], comparison["rule"])
               for p in comparison["points"]]
    off = [e for e in errors if e[0] > EXACT_TOLERANCE and e[1] > EXACT_SE]
    worst = max(errors, default=None)
    measured = "no simulated points" if worst is None else (
        f"largest |exact / simulation - 1| {worst[0]:.2%} ({worst[1]:.1f} standard errors) at sigma {worst[2]:.3g}, "
        f"n {worst[3]}, {worst[4].upper()} {worst[5]}, over {len(errors)} points; {len(off)} outside")
    return Check("exact_theory_matches_simulation", "our exact model (common.theory, model='exact') equals the "
                 f"simulation of Normal data within {EXACT_TOLERANCE:.0%} or {EXACT_SE:g} standard errors at every "
                 "simulated point (both grids): an implementation check, not evidence for the paper", measured,
                 bool(errors) and not off, tuple(sources))


def sweep_checks(points: Sequence[Mapping[str, Any]], data: Windows, cells: Sequence[Mapping[str, Any]],
                 sources: Sequence[str]) -> list[Check]:
    """The sweep keeps the unquantized perplexity and moves every moved tensor's sigma by its factor
    (``sources``: the tensor studies; the unquantized cells' paths come from ``data``)."""
    ppl = {p["model"]: data.perplexity((p["model"], "unquantized")) for p in points}
    ref = points[0]
    drift = max(abs(ppl[p["model"]] / ppl[ref["model"]] - 1) for p in points)
    stds = {c["model"]: {t["name"]: t["std"] for t in c["tensors"]} for c in cells}
    moved = max(abs(stds[p["model"]][name] / s / (p["factor"] / ref["factor"]) - 1)
                for p in points for name, s in stds[ref["model"]].items())
    return [
        Check("sweep_preserves_function", "every sweep point computes the base model's function: its unquantized "
              f"perplexity equals the widest point's within {FUNCTION_TOLERANCE:g} (relative)",
              ", ".join(f"c={p['factor']:g}: {ppl[p['model']]:.4f}" for p in points)
              + f"; largest relative difference {drift:.1e}", drift <= FUNCTION_TOLERANCE,
              tuple(data.sources((p["model"], "unquantized") for p in points))),
        Check("sweep_moves_sigma_by_factor", "every moved weight tensor's sigma at factor c is c / c_widest times "
              f"its sigma at the widest point (within {SIGMA_TOLERANCE:g}, relative)",
              f"largest relative deviation {moved:.1e} over {len(stds[ref['model']])} tensors x {len(points)} points",
              moved <= SIGMA_TOLERANCE, tuple(sources)),
    ]


@dataclass(frozen=True)
class Study:
    """What the claims read: the sweep's ``element`` format, the pre-registration (:mod:`.sweep`: the block pair and
    both models' crossovers), the theory's ``validation`` by simulation, both analytic models on the authors' grid
    (``comparison``, :func:`.analytic_models.compare`), the ``theory_cells``, the sweep ``points``
    (:func:`.sweep.sweep_points`, widest first), their ``tensor_cells`` (:func:`.tensors.tensor_cell`), the windows
    of their perplexity cells (``data``), the ``zero_shot`` records, and ``sources``: the artifact paths behind each
    kind of evidence (``preregistered``, ``validation``, ``comparison``, ``theory``, ``tensors``, ``zero_shot``; a
    perplexity row cites its own cells from ``data.paths``)."""

    element: str
    preregistered: Mapping[str, Any]
    validation: Mapping[str, Any]
    comparison: Mapping[str, Any]
    theory_cells: Sequence[Mapping[str, Any]]
    points: Sequence[Mapping[str, Any]]
    tensor_cells: Sequence[Mapping[str, Any]]
    data: Windows
    zero_shot: Sequence[Mapping[str, Any]]
    sources: Mapping[str, Sequence[str]]


def claims(specs: Mapping[str, ClaimSpec], study: Study, evidence: Evidence) -> ClaimsResult:
    """The claims table (:data:`common.report.PaperClaims`): every row of :data:`CLAIM_IDS` and every check;
    ``evidence``, the workflow's interval settings, serves every row. The paper's rows take the paper model's
    ``sigma*`` (``crossover_paper``), ``sweep_inversion_onset_exact`` ours (``crossover``). ValueError naming a
    claim id the config lacks or does not know."""
    missing, unknown = sorted(set(CLAIM_IDS) - set(specs)), sorted(set(specs) - set(CLAIM_IDS))
    if missing or unknown:
        raise ValueError(f"claims: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}; the claims "
                         f"computed here are {', '.join(CLAIM_IDS)}")
    preregistered, points, data, sources = study.preregistered, study.points, study.data, study.sources
    element, comparison = study.element, study.comparison
    pair, sigma_star = preregistered["pair"], preregistered["crossover_paper"]["ue4m3"]
    level = evidence.level
    sweep = [*sources["preregistered"], *sources["tensors"]]  # + each row's own cells (data.paths)
    ppl = (points, data, element, pair, sigma_star, evidence, sweep)
    exact_ppl = (points, data, element, pair, preregistered["crossover"]["ue4m3"], evidence, sweep)
    rows = [onset_claim(specs["sweep_inversion_onset"], *ppl, label="pre-registered, the paper's model"),
            onset_claim(specs["sweep_inversion_onset_exact"], *exact_ppl, label="pre-registered, our exact model"),
            wide_claim(specs["sweep_wide_no_inversion"], *ppl),
            ue5m3_inversion_claim(specs["sweep_ue5m3_no_inversion"], *ppl),
            *tensor_claims(specs, study.tensor_cells, pair, level, [*sources["preregistered"], *sources["tensors"]]),
            *(equivalence_claim(specs[cid], points, data, element, pair[0], weights_only, evidence, sweep)
              for cid, weights_only in (("ue5m3_matches_ue4m3s_perplexity", True),
                                        ("ue5m3_matches_ue4m3s_perplexity_activations", False))),
            *(zero_shot_claim(specs[f"ue5m3_matches_ue4m3s_{task}"], task, points, study.zero_shot, element, pair[0],
                              evidence, [*sources["tensors"], *sources["zero_shot"]])
              for task in TASK_ACCURACY),
            chi2_claim(specs["paper_model_chi2"], comparison, level, sources["comparison"]),
            chi2_claim(specs["paper_model_chi2_control_ue5m3"], comparison, level, sources["comparison"],
                       model_scale="ue5m3"),
            crossover_claim(specs["paper_model_crossover"], comparison, pair, level, sources["comparison"]),
            crossover_claim(specs["paper_model_crossover_control_neighbour"], comparison, pair, level,
                            sources["comparison"], neighbour=True),
            paper_model_claim(specs["paper_model_matches_simulation"], comparison, level, sources["comparison"]),
            zero_block_claim(specs["zero_blocks_drive_reversal"], preregistered, sources["preregistered"]),
            exact_advantage_claim(specs["exact_model_beats_paper_model"], comparison, level, sources["comparison"])]
    checks = [*theory_checks(study.theory_cells, study.validation, sources["theory"], sources["validation"][0]),
              exact_model_check(study.validation, comparison, [*sources["validation"], *sources["comparison"]]),
              *sweep_checks(points, data, study.tensor_cells, sources["tensors"])]
    return ClaimsResult(rows, checks)
