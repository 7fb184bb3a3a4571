"""The report context of the WinQ paper (the dict :mod:`common.report.render` renders), read from the artifacts:
question and method, figures, tables (runs with speedups and final quality, the Hessian spectra), claims,
provenance and how to rerun a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.report import assemble, provenance, rerun_entries

from .settings import KEY
from .study import METRICS

PAPER = {
    "key": KEY,
    "title": "WinQ: accelerating QAT of language models around saddle points",
    "citation": "Li, Liu et al., ICML 2026, arXiv 2605.17471. Reproduced by lowbit-lab at small scale.",
    "question": "Does low-bit QAT stall in flat regions of the loss (Hessian mass near zero, small curvature, more "
                "so at fewer bits), and do periodic interpolation toward the quantization grid plus noise injection "
                "(WinQ) make it converge faster and to a better model at the same budget?",
    "method": "Low-bit QAT of the embedded base model on its pretraining corpus with ParetoQ's per-row quantizers on "
              "every attention and MLP linear layer: binary sign(W) alpha (1 bit), stretched elastic quantization "
              "(1.58 and 2 bits), LSQ (3 and 4 bits), learnable per-row scales alpha, optionally 8-bit per-token "
              "activations. Four methods share the step budget, the learning-rate schedule and the data order: the "
              "baseline (ParetoQ QAT); WinQ, which after the optimizer step of every K-th step sets each latent "
              "weight W <- (1 - a) W + a Q(W) (a = 0.8, Q without noise) and adds Gaussian noise sigma N(0, I) to the "
              "latent weights and scales in every training forward; and the two ablations (interpolation only, noise "
              "only). The speedup is read from the validation-perplexity curves (steps to the baseline's final "
              "value); every final model is checkpoint-quantized (packed integer codes and the learned float32 "
              "scales, rebuilt bit-exactly) and evaluated on the held-out test split (perplexity) and zero-shot "
              "tasks. The Hessian of the training loss over the quantized layers' latent weights (through the "
              "straight-through estimator, on a fixed batch) is estimated by stochastic Lanczos quadrature for the "
              "baseline and WinQ model of every setting. Each claim is a prediction written in the config before "
              "the data (a statistic, a direction and a threshold with its source) and an estimate with its 95% "
              "interval: paired bootstraps over the test windows (perplexity), the zero-shot examples (accuracy) or "
              "the SLQ probes (Hessian statistics; the same start vectors in every spectrum), the same resampled "
              "units for every model compared. A claim is reproduced when the interval lies wholly on the predicted "
              "side of the threshold, contradicted when wholly on the other side, inconclusive when it straddles; "
              "not testable only with the reason stated (the speedup: one seed and no per-sequence validation "
              "scores). Each run has one training seed, so the intervals do not cover training noise. Identities "
              "(bits per weight, scores that rebuild the metrics, spectral masses) are implementation checks that "
              "stop the build when broken.",
}


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2%}"


def _speedup(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.2f}x"


def run_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], f"{r['lr']:g}", f"{r['final_val_perplexity']:.2f}",
             "" if r["steps_to_baseline"] is None else r["steps_to_baseline"], _speedup(r["speedup"]),
             *(f"{r['metrics'][m]:.4g}" for m, *_ in METRICS), _pct(r["improvement"]),
             "" if r["bits_per_weight"] is None else f"{r['bits_per_weight']:.2f}"] for r in summary["runs"]]
    base = summary["base"]
    rows.append(["base model (full precision)", "", "", "", "", *(f"{base[m]:.4g}" for m, *_ in METRICS), "", "32"])
    return {"caption": "Every run: learning rate, final validation perplexity, steps to the baseline's final "
                       "validation perplexity and the speedup, the checkpoint-quantized model's test perplexity and "
                       "zero-shot accuracies, the test-perplexity improvement over the baseline, and the stored bits "
                       "per quantized weight (codes and scales)",
            "columns": ["run", "lr", "final val ppl", "steps to baseline", "speedup", *(m[-1] for m in METRICS),
                        "improvement", "bits/weight"], "rows": rows}


def hessian_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[h["run"], f"{h['near_zero_mass']:.1%}", f"{h['negative_mass']:.1%}", f"{h['positive_mass']:.1%}",
             f"{h['largest_abs_eigenvalue']:.4g}", f"{h['near_zero_threshold']:.3g}", h["parameters"],
             f"{h['probes']} x {h['steps']}", f"{h['wall_time_s']:.0f}"] for h in summary["hessian"]]
    return {"caption": "Hessian spectra by stochastic Lanczos quadrature: spectral mass near zero (|eigenvalue| <= "
                       "the threshold), negative and positive, the largest |eigenvalue|, the Hessian's dimension, "
                       "probes x Lanczos steps and the wall time in seconds",
            "columns": ["run", "near zero", "negative", "positive", "largest |eigenvalue|", "threshold",
                        "parameters", "probes x steps", "seconds"], "rows": rows}


def build_context(*, config: Mapping[str, Any], profile: str, summary: Mapping[str, Any],
                  claims: Mapping[str, Any], figures: Sequence[Mapping[str, str]], artifacts: Sequence[str],
                  rerun_examples: Sequence[str], seeds: Mapping[str, int],
                  stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The report context; ``claims``: the claims document (``claims.json``: ``{"rule", "claims", "checks",
    "counts"}``, :func:`common.report.claims_document`), re-validated row by row by ``assemble``."""
    tables = [run_table(summary), hessian_table(summary)]
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
