"""The claims table of the WinQ paper, every verdict computed from the study's summary by the rule stated in the row
(:func:`common.report.verdict`: every check holds = reproduced, some = partly, none = not reproduced).

Quality is the test perplexity of the checkpoint-quantized model (packed codes and learned scales) at equal budget;
speed is read from the validation-perplexity curves (:mod:`papers.winq.study`). One check per study setting, so a
verdict says in how many settings the paper's effect shows at this scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from common.report import Claim, checked_claim

from .study import hessian_of, row_of


def _setting_label(row: Mapping[str, Any]) -> str:
    activations = "A16" if row["activation_bits"] is None else f"A{row['activation_bits']}"
    return f"W{row['bits']:g}{activations}"


def lower_bits_flatter(summary: Mapping[str, Any], evidence: Sequence[str]) -> Claim:
    baselines = sorted((h for h in summary["hessian"] if h["method"] == "baseline" and h["activation_bits"] is None),
                       key=lambda h: h["bits"])
    checks, pairs = [], []
    for low, high in pairwise(baselines):
        checks += [low["near_zero_mass"] >= high["near_zero_mass"],
                   low["largest_abs_eigenvalue"] <= high["largest_abs_eigenvalue"]]
        pairs.append(f"W{low['bits']:g} vs W{high['bits']:g}")
    measured = "; ".join(f"W{h['bits']:g}: near-zero {h['near_zero_mass']:.1%}, largest |eigenvalue| "
                         f"{h['largest_abs_eigenvalue']:.3g}" for h in baselines)
    return checked_claim(
        "lower_bits_flatter", "Lower bit widths leave QAT in flatter regions: more Hessian mass near zero and a "
        "smaller largest |eigenvalue|",
        ">40% near-zero mass at 1 bit; the largest |eigenvalue| shrinks as the bit width falls",
        measured or "no baseline Hessian spectra at two A16 bit widths", checks,
        "For the baseline (ParetoQ) models with 16-bit activations, ordered by weight bits, each pair of neighbouring "
        f"bit widths ({', '.join(pairs) or 'none'}): the lower one has near-zero mass (|eigenvalue| <= the threshold "
        "of the spectrum, a fraction of its largest |eigenvalue|) >= the higher one's, and a largest |eigenvalue| <= "
        "the higher one's. Two checks per pair.", evidence)


def winq_faster(summary: Mapping[str, Any], thresholds: Mapping[str, float], evidence: Sequence[str]) -> Claim:
    minimum = thresholds["speedup_min"]
    checks, parts = [], []
    for setting in summary["settings"]:
        row = row_of(summary, f"{setting}-winq")
        checks.append(row["speedup"] is not None and row["speedup"] > minimum)
        reached = ("never reached" if row["speedup"] is None
                   else f"{row['steps_to_baseline']} steps, {row['speedup']:.2f}x")
        parts.append(f"{_setting_label(row)}: {reached}")
    return checked_claim(
        "winq_faster", "WinQ reaches the baseline's final validation perplexity in fewer steps",
        "1.5x (W2A16) to 4x (W1A8) fewer steps", "; ".join(parts), checks,
        f"Per setting: WinQ's validation curve reaches the baseline's final validation perplexity, and the speedup "
        f"(the baseline's steps to its final perplexity / WinQ's, resolution {summary['eval_every']} steps) exceeds "
        f"{minimum:g}x.", evidence)


def winq_lower_perplexity(summary: Mapping[str, Any], thresholds: Mapping[str, float],
                          evidence: Sequence[str]) -> Claim:
    minimum = thresholds["improvement_min"]
    checks, parts = [], []
    for setting in summary["settings"]:
        row, baseline = row_of(summary, f"{setting}-winq"), row_of(summary, f"{setting}-baseline")
        checks.append(row["improvement"] > minimum)
        parts.append(f"{_setting_label(row)}: {baseline['metrics']['perplexity']:.2f} -> "
                     f"{row['metrics']['perplexity']:.2f} ({row['improvement']:+.1%})")
    return checked_claim(
        "winq_lower_perplexity", "At equal budget WinQ's quantized model has a lower perplexity than the baseline's",
        "up to 8.8% lower perplexity (e.g. W1A16 16.9 -> 15.3 on WikiText-2)", "; ".join(parts), checks,
        f"Per setting: the relative improvement (P_baseline - P_WinQ) / P_baseline of the checkpoint-quantized "
        f"model's test perplexity exceeds {minimum:.1%}.", evidence)


def both_components_matter(summary: Mapping[str, Any], thresholds: Mapping[str, float],
                           evidence: Sequence[str]) -> Claim:
    margin = thresholds["ablation_margin"]
    checks, parts = [], []
    methods = set(summary["methods"])
    if {"winq", "interpolation", "noise"} <= methods:
        for setting in summary["settings"]:
            winq = row_of(summary, f"{setting}-winq")
            alone = {m: row_of(summary, f"{setting}-{m}") for m in ("interpolation", "noise")}
            checks += [a["improvement"] < winq["improvement"] - margin for a in alone.values()]
            parts.append(f"{_setting_label(winq)}: WinQ {winq['improvement']:+.1%}, interpolation alone "
                         f"{alone['interpolation']['improvement']:+.1%}, noise alone "
                         f"{alone['noise']['improvement']:+.1%}")
    return checked_claim(
        "both_components_matter", "Both components matter: removing either the interpolation or the noise makes WinQ "
        "worse", "interpolation alone ~6.7%, noise alone ~4%, WinQ up to 8.8% better perplexity than the baseline",
        "; ".join(parts) or "the study's methods lack winq, interpolation or noise", checks,
        f"Per setting, two checks: the test-perplexity improvement over the baseline of interpolation alone, and of "
        f"noise alone, is below WinQ's by more than {margin:.1%} (no check when the ablation runs are not in the "
        "study).", evidence)


def winq_steepens(summary: Mapping[str, Any], evidence: Sequence[str]) -> Claim:
    checks, parts = [], []
    for setting in summary["settings"]:
        baseline, winq = hessian_of(summary, f"{setting}-baseline"), hessian_of(summary, f"{setting}-winq")
        if baseline is None or winq is None:
            continue
        checks.append(winq["largest_abs_eigenvalue"] > baseline["largest_abs_eigenvalue"])
        parts.append(f"W{baseline['bits']:g}{'' if baseline['activation_bits'] is None else 'A8'}: largest "
                     f"|eigenvalue| {baseline['largest_abs_eigenvalue']:.3g} -> {winq['largest_abs_eigenvalue']:.3g}, "
                     f"near-zero {baseline['near_zero_mass']:.1%} -> {winq['near_zero_mass']:.1%}")
    return checked_claim(
        "winq_steepens", "Interpolating toward the grid moves QAT out of the flat region: WinQ's Hessian has larger "
        "eigenvalue magnitudes than the baseline's", "the interpolation (a proximal step) raises Hessian eigenvalue "
        "magnitudes", "; ".join(parts) or "no baseline/WinQ Hessian pair", checks,
        "Per setting with both spectra: WinQ's largest |eigenvalue| exceeds the baseline's.", evidence)


def study_claims(summary: Mapping[str, Any], thresholds: Mapping[str, float], summary_path: str) -> list[Claim]:
    """Every claim of the paper, in the report's order."""
    evidence = [summary_path]
    return [lower_bits_flatter(summary, evidence), winq_steepens(summary, evidence),
            winq_faster(summary, thresholds, evidence), winq_lower_perplexity(summary, thresholds, evidence),
            both_components_matter(summary, thresholds, evidence)]
