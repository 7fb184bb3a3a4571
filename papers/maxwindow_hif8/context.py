"""The report context of the Max-Window paper (the dict :mod:`common.report.render` renders), read from the
artifacts: the setup table (the paper's beside ours), question and method, figures, tables (runs in BF16 and HiF8,
drops vs BF16, saturation, the synthetic observer study), claims with the regime card, provenance and how to rerun a
cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common.report import assemble, provenance, rerun_entries, setup_rows, signed_percent

from .settings import KEY, train_config
from .study import METRIC_LABELS, METRICS

LABELS = [METRIC_LABELS[m] for m, *_ in METRICS]

PAPER = {
    "key": KEY,
    "title": "Max-Window scale estimation for near-lossless HiF8 W8A8 QAT",
    "citation": "Cheng et al. 2026, arXiv 2605.26189. Reproduced by lowbit-lab at small scale.",
    "question": "Which failure modes of HiF8 W8A8 quantization-aware training does the training loss hide, and does "
                "the recipe (max-window amax history, BF16 warmup, low learning rate) fix them?",
    # one step a line, each starting "- " (the report template renders the lines as a list)
    "method": "\n".join([
        "- Continual pretraining of a pretrained base model on a shift corpus, so that forgetting of the "
        "pretraining corpus is measurable; the table above sets the paper's setup beside ours, the regime card "
        "below the quantities that govern its effects.",
        "- QAT fake-quantizes the layers the table names: forward y = Q(x) Q(W)^T, backward dx = Q(g) Q(W) and dW "
        "= Q(g)^T Q(x), each tensor role of each layer with its own per-tensor scale s = 15 / (amax_pred + "
        "1e-12), HiF8 elements and a straight-through estimator.",
        "- The delayed amax prediction comes from the history up to the previous call (the call's amax is "
        "appended after), one history entry per forward or backward call, as the authors' code. Observers: "
        "most_recent (last value), exp_smooth (an exponential moving average; the authors' predictor is a "
        "damped-trend ensemble), max_window (max over the window) or current (the call's own amax).",
        "- The runs are those the claims compare: BF16 at both learning rates, the recipe (max_window, BF16 "
        "warmup, low rate), its one-change ablations (most_recent, no warmup, high rate), current scaling at both "
        "rates and exp_smooth, each with every seed (two runs of one seed see the same batches).",
        "- The negative control of the near-lossless bounds: the recipe with max_val 2^-14, every tensor in "
        "HiF8's coarse outer tiers (a bound it does not break is too loose to count).",
        "- Every trained model is evaluated in BF16 (its latent weights, the paper's lm-eval comparison) and "
        "after the HiF8 checkpoint quantization (HiF8 weight codes, HiF8 inputs with the current amax).",
        "- Saturation is scale-induced: a call saturates when its amax exceeds the predicted amax (with max_val "
        "15 HiF8 itself clips nothing below about 2000x the prediction; an over-range value lands in HiF8's "
        "coarser tiers, and the telemetry records the relative quantization error of every call and the mantissa "
        "bits the over-range values lose). A synthetic study replays amax traces through the observers.",
        "- Claims: each row's prediction (statistic, direction, threshold and its source) is fixed in config.yaml "
        "before the data, and its verdict follows from the 95% interval by one rule.",
        "- Intervals: each statistic is computed per seed, pairing the runs of one seed, and its estimate is the "
        "seed mean with a t-interval over the seeds; for perplexities and accuracies it is widened by the paired "
        "bootstrap over the evaluation windows and zero-shot examples every model and seed was scored on. With "
        "one seed (the smoke profile) the interval is the bootstrap alone (windows and examples, or a circular "
        "block bootstrap over training steps) and says so.",
        "- Properties that hold by construction (the synthetic study's guarantees, the telemetry's accounting, "
        "the pairing of the evaluations) are implementation checks: they stop the build when broken and count as "
        "no reproduction.",
    ]),
}


def run_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], label, "" if r["loss_ape"] is None else f"{r['loss_ape']:.3%}",
             *(f"{r[key][m]:.4g}" for m, *_ in METRICS)] for r in summary["runs"]
            for key, label in (("metrics", "BF16"), ("metrics_hif8", "HiF8"))]
    base = summary["base"]
    rows.append(["base model (before continual pretraining)", "BF16", "", *(f"{base[m]:.4g}" for m, *_ in METRICS)])
    return {"caption": f"Every run, means over seeds {', '.join(map(str, summary['seeds']))}: training-loss APE vs "
                       "BF16 at the same learning rate and seed (HiF8 steps) and the downstream metrics, evaluated in "
                       "BF16 (as trained) and after the HiF8 W8A8 checkpoint quantization",
            "columns": ["run", "evaluated", "loss APE", *LABELS], "rows": rows}


def drop_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    rows = [[r["run"], label, *(signed_percent(r[key][m]) for m, *_ in METRICS)] for r in summary["runs"]
            for key, label in (("drop", "BF16"), ("drop_hif8", "HiF8"))]
    return {"caption": "Relative drop of the seed means vs the BF16 baseline at the same learning rate, evaluated in "
                       "BF16 (positive = worse)",
            "columns": ["run", "evaluated", *LABELS], "rows": rows}


def saturation_table(summary: Mapping[str, Any]) -> dict[str, Any]:
    def number(value: float | None, form: str) -> str:
        return "" if value is None else format(value, form)

    rows = [[r["run"], role, f"{s['calls']:.0f}", f"{s['overflow_rate']:.2%}", f"{s['mean_over_range']:.2e}",
             f"{s['max_over_range']:.2e}", number(s.get("rel_error_overflow"), ".3g"),
             number(s.get("rel_error_no_overflow"), ".3g"), number(s.get("mean_mantissa_bits_lost"), ".2f")]
            for r in summary["runs"] for role, s in r["saturation"].items()]
    return {"caption": "Saturation per run and tensor role over the HiF8 steps (seed means): layer-calls with a "
                       "delayed scale, the fraction whose amax exceeded the prediction, the fraction of values above "
                       "the predicted amax (mean and worst call), the mean relative quantization error |Q(x) - x| / "
                       "|x| of saturating and other calls, and the mantissa bits the over-range values of a "
                       "saturating call lose",
            "columns": ["run", "role", "layer-calls", "saturating", "mean over range", "max over range",
                        "rel. error, saturating", "rel. error, other", "mantissa bits lost"], "rows": rows}


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


def corpus_name(record: Mapping[str, Any]) -> str:
    """The corpus an evaluation record scored: the folder of its split file (``data/corpora/<name>/test.jsonl``)."""
    return Path(record["data"]["split"]["path"]).parent.name


def our_setup(config: Mapping[str, Any], *, base: Mapping[str, Mapping[str, Any]], log_end: Mapping[str, Any],
              regime: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Our side of the setup table, one text per aspect of ``config["paper_setup"]``, from what the runs used: the
    study ``config`` (rates, seeds, warmup, the :class:`common.train.TrainConfig` with its defaults), the base
    model's evaluation records ``base`` (role ``pretrain`` / ``shift`` -> record: the model, its parameter count,
    the corpora and evaluation sizes), the last row of the recipe's training log ``log_end`` (``step`` 0-based,
    ``tokens`` over every rank) and the claims document's regime card ``regime`` (the quantized layers)."""
    pretrain, shift = base["pretrain"], base["shift"]
    model, data = pretrain["model"], pretrain["data"]
    train = train_config(config, "low")
    steps, tokens = int(log_end["step"]) + 1, int(log_end["tokens"])
    rates, seeds = config["learning_rates"], config["seeds"]
    quantized = next((row for row in regime if row["id"] == "quantized_share"), None)
    if quantized is None:
        raise ValueError("the claims document's regime card has no quantized_share row: rebuild claims.json")
    return {
        "Model and size": f"{Path(model['path']).name} ({model['class']}): {model['parameters']:,} parameters",
        "Data": f"continual pretraining on {corpus_name(shift)}; the base model was pretrained on "
                f"{corpus_name(pretrain)}",
        "Tokens": f"{tokens:,}: {steps:,} steps of {tokens // steps:,} tokens",
        "Steps": f"{steps:,} optimizer steps: {config['bf16_warmup_steps']} in BF16, then HiF8 (amax histories "
                 f"reset); learning-rate warmup {train.warmup_steps} steps, cosine decay to {train.min_lr_ratio:g} "
                 "of the peak",
        "Learning rates": f"{rates['low']:g} (the recipe) and {rates['high']:g} (the high-rate runs, "
                          f"{rates['high'] / rates['low']:g}x); AdamW ({train.beta1:g}, {train.beta2:g}), weight "
                          f"decay {train.weight_decay:g}, clip {train.grad_clip:g}",
        "Seeds": f"{len(seeds)} per run ({', '.join(map(str, seeds))}): the seed fixes the data order; runs compared "
                 "paired by seed",
        "Layers quantized": f"{quantized['ours']:.1%} of the parameters: {quantized['note']}; inputs, weights and "
                            "output gradients HiF8, per-tensor delayed scaling",
        "Evaluation": f"every model in BF16 (as trained) and after HiF8 W8A8 checkpoint quantization: perplexity on "
                      f"{data['split']['tokens']:,} test tokens of {corpus_name(pretrain)} and "
                      f"{shift['data']['split']['tokens']:,} of {corpus_name(shift)}, zero-shot cloze "
                      f"({data['cloze']['examples']:,} examples) and multiple choice ({data['choice']['examples']:,}) "
                      f"from {corpus_name(pretrain)}",
    }


def build_context(*, config: Mapping[str, Any], profile: str, summary: Mapping[str, Any], cell: Mapping[str, Any],
                  claims: Mapping[str, Any], setup: Mapping[str, str], figures: Sequence[Mapping[str, str]],
                  artifacts: Sequence[str], rerun_examples: Sequence[str], seeds: Mapping[str, Any],
                  stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The report context; ``claims`` is the claims document (``claims.json``: rule, claims, checks, counts, the
    regime card), which :func:`common.report.assemble` re-validates; ``setup`` is our side of the setup table
    (:func:`our_setup`), set beside ``config["paper_setup"]``."""
    tables = [run_table(summary), drop_table(summary), saturation_table(summary), observer_table(cell)]
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts,
                    setup=setup_rows(config["paper_setup"], setup))
