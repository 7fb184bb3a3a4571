"""The report context of the Max-Window paper (the dict :mod:`common.report.render` renders), read from the
artifacts: question and method, figures, tables (runs, drops vs BF16 with the baselines' post-training quantization,
the synthetic observer study), claims, provenance and how to rerun a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.report import assemble, provenance, rerun_entries

from .settings import KEY
from .study import METRIC_LABELS, METRICS

LABELS = [METRIC_LABELS[m] for m, *_ in METRICS]

PAPER = {
    "key": KEY,
    "title": "Max-Window scale estimation for near-lossless HiF8 W8A8 QAT",
    "citation": "Cheng et al. 2026, arXiv 2605.26189. Reproduced by lowbit-lab at small scale.",
    "question": "Which failure modes of HiF8 W8A8 quantization-aware training does the training loss hide, and does "
                "the recipe (max-window amax history, BF16 warmup, low learning rate) fix them?",
    "method": "Continual pretraining of the embedded base model (pretrained on the pretraining corpus) on a shift "
              "corpus, so that forgetting is measurable. QAT fake-quantizes the MLP gate/up/down projections "
              "(the first and last blocks left unquantized in the paper's proportion 3/26 and 2/26): forward "
              "y = Q(x) Q(W)^T, backward dx = Q(g) Q(W) and dW = Q(g)^T Q(x), each tensor role of each layer with its "
              "own per-tensor scale s = 15 / (amax_pred + 1e-12) and HiF8 elements, straight-through estimator. "
              "The delayed amax prediction comes from the history up to the previous step (the step's amax is "
              "appended after): most_recent (last value), exp_smooth (exponential moving average), max_window "
              "(max over the window) or current (the step's own amax, an extra pass). The grid: every observer x "
              "learning rate {high, low} x BF16 warmup {0, W}, and a BF16 baseline per learning rate. Every trained "
              "model is checkpoint-quantized (HiF8 weight codes, HiF8 inputs with the current amax) and evaluated "
              "on held-out text of both corpora and zero-shot tasks of the pretraining corpus; the baselines are "
              "also evaluated unquantized (the paper's comparison). Saturation is scale-induced: a layer-step "
              "saturates when its amax exceeds the predicted amax (with max_val 15 HiF8 itself clips nothing "
              "below about 2000x the prediction). A synthetic study replays amax traces through the observers. "
              "Claims: each row's prediction (statistic, direction, threshold and its source) is fixed in "
              "config.yaml before the data, and its verdict follows from the 95% interval by one rule. Perplexity "
              "and accuracy comparisons are paired bootstraps over the evaluation windows and zero-shot examples "
              "(every model scored on the same ones); the training-loss APE and the saturating fractions are "
              "circular block bootstraps over the training steps (blocks of ceil(n^(1/3)) steps, since steps "
              "depend on their predecessors). Every run is one training seed, so no interval covers "
              "seed-to-seed variation. Properties that hold by construction (the synthetic study's guarantees, "
              "the telemetry's accounting, the pairing of the evaluations) are implementation checks: they stop "
              "the build when broken and count as no reproduction.",
}


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:+.2%}"


def run_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], r["precision"].upper(), "" if r["loss_ape"] is None else f"{r['loss_ape']:.3%}",
             *(f"{r['metrics'][m]:.4g}" for m, *_ in METRICS)] for r in summary["runs"]]
    base = summary["base"]
    rows.append(["base model (before continual pretraining)", "BF16", "", *(f"{base[m]:.4g}" for m, *_ in METRICS)])
    return {"caption": "Every run: training-loss APE vs BF16 at the same learning rate (HiF8 steps) and the "
                       "downstream metrics of the evaluated model",
            "columns": ["run", "evaluated", "loss APE", *LABELS], "rows": rows}


def drop_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], *(_pct(r["drop"][m]) for m, *_ in METRICS)] for r in summary["runs"]]
    rows += [[f"{p['run']} (HiF8 PTQ)", *(_pct(p["drop"][m]) for m, *_ in METRICS)] for p in summary["ptq"]]
    return {"caption": "Relative drop vs the BF16 baseline at the same learning rate (positive = worse); PTQ: the "
                       "baseline after the same HiF8 checkpoint quantization",
            "columns": ["run", *LABELS], "rows": rows}


def saturation_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], role, s["calls"], f"{s['overflow_rate']:.2%}", f"{s['mean_over_range']:.2e}",
             f"{s['max_over_range']:.2e}", f"{s['mean_clipped']:.2e}"]
            for r in summary["runs"] for role, s in r["saturation"].items()]
    return {"caption": "Saturation per run and tensor role over the HiF8 steps: layer-steps with a delayed scale, "
                       "the fraction whose amax exceeded the prediction, the fraction of values above the predicted "
                       "amax (mean and worst layer-step), and the fraction clipped by HiF8's range",
            "columns": ["run", "role", "layer-steps", "saturating", "mean over range", "max over range",
                        "mean clipped by HiF8"], "rows": rows}


def observer_table(cell: Mapping[str, Any]) -> dict[str, Any]:
    def number(value: Any) -> str:
        return "" if value is None else str(value)

    rows = [[r["kind"], r["observer"], r["saturation_events"], f"{r['worst_overshoot']:.2f}",
             f"{r['headroom_lost_bits']:.2f}", number(r["spike_count"]), number(r["spike_saturations"]),
             number(r["recurring_spike_saturations"])] for r in cell["rows"]]
    return {"caption": f"Synthetic observer study ({cell['steps']} steps, seed {cell['seed']}): saturated steps, "
                       "worst amax / prediction, headroom lost to over-conservatism (mean log2(prediction / amax) "
                       "over the unsaturated steps), and saturations at spikes",
            "columns": ["trace", "observer", "saturated steps", "worst overshoot", "headroom lost (bits)", "spikes",
                        "saturated spikes", "after the first"], "rows": rows}


def build_context(*, config: Mapping[str, Any], profile: str, summary: Mapping[str, Any], cell: Mapping[str, Any],
                  claims: Mapping[str, Any], figures: Sequence[Mapping[str, str]], artifacts: Sequence[str],
                  rerun_examples: Sequence[str], seeds: Mapping[str, int],
                  stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The report context; ``claims`` is the claims document (``claims.json``: rule, claims, checks, counts), which
    :func:`common.report.assemble` re-validates."""
    tables = [run_table(summary), drop_table(summary), saturation_table(summary), observer_table(cell)]
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
