"""The report context of the WinQ paper (the dict :mod:`common.report.render` renders), read from the artifacts:
question and method, figures, tables (runs with speedups and final quality, the Hessian spectra), claims,
provenance and how to rerun a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from common.report import assemble, provenance, rerun_entries

from .settings import KEY
from .study import ACCURACIES

PAPER = {
    "key": KEY,
    "title": "WinQ: accelerating QAT of language models around saddle points",
    "citation": "Li, Liu et al., ICML 2026, arXiv 2605.17471. Reproduced by lowbit-lab at small scale.",
    "question": "Does low-bit QAT stall in flat regions of the loss (Hessian mass near zero, small curvature, more "
                "so at fewer bits), and do periodic interpolation toward the quantization grid plus noise injection "
                "(WinQ) make it converge faster and to a better model at the same budget?",
    "method": "Low-bit QAT of an embedded base model on its pretraining corpus with ParetoQ's per-row quantizers on "
              "every attention and MLP linear layer: binary sign(W) alpha (1 bit), stretched elastic quantization "
              "(1.58 and 2 bits), LSQ (3 and 4 bits), learnable per-row scales alpha, optionally 8-bit per-token "
              "activations or a Hadamard rotation (QuEST-style). Four methods share the step budget, the cosine "
              "learning-rate schedule (AdamW, no weight decay, as the paper) and, per seed, the data order: the "
              "baseline (ParetoQ QAT); WinQ, which after optimizer steps K, 2K, ..., N (counted from 1, the last "
              "included: N // K times, as the authors' callback) sets each latent weight W <- (1 - a) W + a Q(W) "
              "(a = 0.8, Q without noise) and adds Gaussian noise sigma N(0, I) (sigma = 1e-3) to the latent weights "
              "and scales in every training forward; and the two ablations (interpolation only, noise only). K is the "
              "paper's fraction of the run: a quarter for 1-2 bits, a half for >= 3 bits. The paper trains "
              "LLaMA-3.2-1B for 80k-240k steps at lr 1e-5 to 4e-5, where the ParetoQ baseline plateaus; we train a "
              "model of a few million parameters (default: `tiny`, pretrained for 2400 steps, since on a base "
              "pretrained for 800 steps QAT was mostly more pretraining and never flattened) for the profile's steps "
              "at learning rates chosen (same ratios as the paper's) so that our baseline also flattens before the "
              "end, which the stagnation rows test rather than assume. Seeds: every run the claims compare is trained "
              "on several seeds (a seed fixes the data "
              "order, the initialisation and the noise), runs only the figures use on one; each claim pairs runs by "
              "seed. The speedup is read from the validation-perplexity curves (the same seed's baseline's steps to "
              "its final value over the method's); every final model is checkpoint-quantized (packed integer codes "
              "and the learned float32 scales, rebuilt bit-exactly) and evaluated on the held-out test split "
              "(perplexity) and zero-shot tasks. The Hessian of the training loss over the quantized layers' latent "
              "weights (through the straight-through estimator, on a fixed batch, the same SLQ probes for every "
              "model) is estimated by stochastic Lanczos quadrature for every seed of the compared runs; its "
              "near-zero mass is read at the paper's absolute threshold (|eigenvalue| < 1e-3; the authors' notebook "
              "uses 1.5e-3, given in the detail) and at a threshold relative to the largest |eigenvalue|. Each "
              "claim is a prediction written in the config before the data (a statistic, a direction and a "
              "threshold with its source) and an estimate with its 95% interval: the seed mean of the per-seed "
              "statistic with a t-interval over seeds, widened by the paired bootstrap over the evaluation units "
              "the seeds share (test windows, zero-shot examples or SLQ probes, the same resample for every model "
              "and seed); trajectory statistics (gradient norms, validation curves, speedups) have the t-interval "
              "over seeds alone. A claim is reproduced when the interval lies wholly on the predicted side of the "
              "threshold, contradicted when wholly on the other side, inconclusive when it straddles; not testable "
              "only with the reason stated. Identities (bits per weight, scores that rebuild the metrics, spectral "
              "masses, the interpolation count N // K, the seeds each cell recorded) are implementation checks that "
              "stop the build when broken.",
}


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2%}"


def _speedup(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.2f}x"


def _sd(value: float | None) -> str:
    return "" if value is None else f" +- {value:.2f}"


def run_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], ", ".join(str(s) for s in r["seeds"]), f"{r['lr']:g}", "" if r["every"] is None else r["every"],
             f"{r['final_val_perplexity']:.2f}{_sd(r['final_val_perplexity_sd'])}", _speedup(r["speedup"]),
             f"{r['test_perplexity']:.4g}{_sd(r['test_perplexity_sd'])}",
             *(f"{np.mean([c['metrics'][m] for c in summary['cells'] if c['run'] == r['run']]):.4g}"
               for m in ACCURACIES),
             _pct(r["improvement"]), "" if r["bits_per_weight"] is None else f"{r['bits_per_weight']:.2f}"]
            for r in summary["runs"]]
    base = summary["base"]
    rows.append(["base model (full precision)", "", "", "", "", "", f"{base['perplexity']:.4g}",
                 *(f"{base[m]:.4g}" for m in ACCURACIES), "", "32"])
    return {"caption": "Every run, seed means (+- the sample sd over seeds): the training seeds, learning rate, "
                       "interpolation period K, final validation perplexity, the speedup to the same seed's "
                       "baseline's final validation perplexity (not reached: some seed never got there), the "
                       "checkpoint-quantized model's test perplexity and zero-shot accuracies, the test-perplexity "
                       "improvement over the same seed's baseline, and the stored bits per quantized weight (codes "
                       "and scales)",
            "columns": ["run", "seeds", "lr", "K", "final val ppl", "speedup", "test ppl", "cloze acc",
                        "choice acc_norm", "improvement", "bits/weight"], "rows": rows}


def hessian_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[h["cell"], f"{h['abs_masses']['near_zero']:.1%}", f"{h['notebook_masses']['near_zero']:.1%}",
             f"{h['near_zero_mass']:.1%}", f"{h['abs_masses']['negative']:.1%}", f"{h['abs_masses']['positive']:.1%}",
             f"{h['largest_abs_eigenvalue']:.4g}", h["parameters"], f"{h['probes']} x {h['steps']}",
             f"{h['wall_time_s']:.0f}"] for h in summary["hessian"]]
    thresholds = summary["hessian_thresholds"]
    return {"caption": "Hessian spectra by stochastic Lanczos quadrature, per training cell: spectral mass near zero "
                       f"at the paper's absolute threshold (|eigenvalue| < {thresholds['abs']:g}), the authors' "
                       f"notebook's ({thresholds['notebook']:g}) and the relative one (<= {thresholds['relative']:g} x "
                       "the largest |eigenvalue|), the negative and positive mass beyond the absolute threshold, the "
                       "largest |eigenvalue|, the Hessian's dimension, probes x Lanczos steps and the wall time in "
                       "seconds",
            "columns": ["cell", "near zero (abs)", "near zero (notebook)", "near zero (rel)", "negative", "positive",
                        "largest |eigenvalue|", "parameters", "probes x steps", "seconds"], "rows": rows}


def build_context(*, config: Mapping[str, Any], profile: str, summary: Mapping[str, Any],
                  claims: Mapping[str, Any], figures: Sequence[Mapping[str, str]], artifacts: Sequence[str],
                  rerun_examples: Sequence[str], seeds: Mapping[str, Any],
                  stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The report context; ``claims``: the claims document (``claims.json``: ``{"rule", "claims", "checks",
    "counts"}``, :func:`common.report.claims_document`), re-validated row by row by ``assemble``."""
    tables = [run_table(summary), hessian_table(summary)]
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
