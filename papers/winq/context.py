"""The report context of the WinQ paper (the dict :mod:`common.report.render` renders), read from the artifacts:
the setup table (the paper's beside ours, from the config and the base model used), question and method, figures,
tables (runs with speedups and final quality, the Hessian spectra), claims with the regime card, provenance and how
to rerun a cell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from common.report import assemble, provenance, rerun_entries, setup_rows, signed_percent
from common.train import TrainConfig

from .premise import pilot_study
from .regime import stall_id
from .settings import GROUPS, KEY, interpolation_every, learning_rate_group, run_steps, train_config
from .study import ACCURACIES

PAPER = {
    "key": KEY,
    "title": "WinQ: accelerating QAT of language models around saddle points",
    "citation": "Li, Liu et al., ICML 2026, arXiv 2605.17471. Reproduced by lowbit-lab at small scale.",
    "question": "Does low-bit QAT stall in flat regions of the loss (Hessian mass near zero, small curvature, more "
                "so at fewer bits), and do periodic interpolation toward the quantization grid plus noise injection "
                "(WinQ) make it converge faster and to a better model at the same budget?",
    # one step a line, each starting "- " (the report template renders the lines as a list)
    "method": "\n".join([
        "- QAT of the base model on its pretraining corpus (the setup table above), ParetoQ's per-row quantizers on "
        "every attention and MLP linear (sign at 1 bit, stretched elastic at 1.58 and 2, LSQ at 3 and 4; learnable "
        "scales); optionally 8-bit per-token activations or a QuEST-style Hadamard rotation.",
        "- Four methods share the step budget, the schedule and, per seed, the data order: the baseline (ParetoQ "
        "QAT), WinQ, and its two ablations (interpolation only, noise only).",
        "- Interpolation: after optimizer steps K, 2K, ..., N, W <- 0.2 W + 0.8 Q(W) (Q without noise). It keeps "
        "every code, so it acts only if a weight can then reach a code boundary within a period: the regime card "
        "measures that reach, and a claim that needs it outside its bounds is not testable here.",
        "- Noise: Gaussian noise on the latent weights and scales in every training forward.",
        "- Speed: the same seed's baseline's steps to its final validation perplexity over the method's. Quality: "
        "every final model checkpoint-quantized (packed codes, learned float32 scales) and scored on the held-out "
        "test split and zero-shot tasks.",
        "- Curvature: the Hessian of the loss over the quantized layers' latent weights by stochastic Lanczos "
        "quadrature (one batch and the same probes for every model); its mass near zero at the paper's |eigenvalue| "
        "< 1e-3 and relative to the largest.",
        "- Diagnostics, leaving training unchanged: at K, 2K, ... the codes changed per period and the weights within "
        "reach of a code boundary (every method, so that runs pair step for step); at each evaluation the authors' "
        "||grad_W L|| / ||W||.",
        "- Intervals: the seed mean of a per-seed statistic, a t-interval over seeds widened by a paired bootstrap "
        "over the units the seeds share (test windows, zero-shot examples, SLQ probes); trajectory statistics have "
        "the t-interval alone. Identities are implementation checks that stop the build.",
    ]),
}


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
             signed_percent(r["improvement"]), "" if r["bits_per_weight"] is None else f"{r['bits_per_weight']:.2f}"]
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


def _number(value: float | None, fmt: str = "{:.3g}") -> str:
    return "undefined" if value is None else fmt.format(value)


def pilot_table(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """The baseline-only pilot's recorded table (the config's ``pilot.record``, :mod:`papers.winq.premise`): per
    candidate and pilot setting its schedule (from the config), the premise (the stall ratio) and its context, the
    card's travel and step, and per candidate the seconds a step, the estimated default wall time and what the rule
    read; None before a pilot is recorded."""
    pilot = config["pilot"]
    record = pilot.get("record")
    if not record:
        return None
    bound = {s: config["regime"][stall_id(s)]["bounds"][1] for s in pilot["settings"]}
    rows = []
    for row in record["rows"]:
        decision = "; ".join([
            "premise holds" if row["premise_holds"] else "premise fails",
            "card inside" if row["card_inside"] else f"card outside ({', '.join(row['card_outside'])})",
            f"{'fits' if row['fits'] else 'over'} the {pilot['budget']['hours']:g} h budget",
            "chosen" if row["candidate"] == record["chosen"] else "not chosen"])
        for setting in pilot["settings"]:
            entry, suffix = row["settings"][setting], setting.replace(".", "_")
            train = train_config(pilot_study(config, row["candidate"]), f"{setting}-baseline")
            rows.append([row["candidate"], setting, f"{train.lr:g} x {train.max_steps:,}",
                         f"{_number(entry['stall'])} (<= {bound[setting]:g})", _number(entry["gain_per_lr"]),
                         _number(entry["relative_grad_norm"]), _number(entry["late_share"], "{:.1f}%"),
                         _number(row["card"].get(f"travel_{suffix}")), _number(row["card"].get(f"step_{suffix}")),
                         f"{row['seconds_per_step']:.3f}", f"{row['budget_hours']:.2f}", decision])
    chosen = record["chosen"] or ("none: the default keeps its regime, and the method rows are not testable where "
                                  "its premise fails")
    return {"caption": f"The baseline-only pilot (issue 37), run at commit {record['commit']} on seed {pilot['seed']}, "
                       "held out from the claims' seeds, before any run of a chosen regime: per candidate and setting "
                       "its learning rate x steps, the premise (the stall ratio: codes changed per unit of summed "
                       "learning rate, last half / first; a stall is at most the bound) and its context (the "
                       "validation gain per unit of learning rate, last half / first; the authors' relative gradient "
                       "norm, last / second quarter; the share of the log-perplexity gain made in the last half), the "
                       "card's travel per period and step (bins), the seconds a step and the default profile's "
                       "estimated wall time under the candidate (undefined: no gain in the first half of the run, or "
                       f"none over it). The rule, fixed before the runs, chose: {chosen}",
            "columns": ["candidate", "setting", "lr x steps", "stall", "gain per lr", "rel. grad norm", "late share",
                        "travel", "step", "s / step", "default h", "the rule"], "rows": rows}


GROUP_LABELS = {"low_bit": "W <= 2 A16", "a8": "A8", "high_bit": "W >= 3 A16"}  # learning-rate groups, as the paper


def study_groups(config: Mapping[str, Any]) -> list[str]:
    """The learning-rate groups of the study settings (:func:`papers.winq.settings.learning_rate_group`), in
    :data:`papers.winq.settings.GROUPS` order."""
    used = {learning_rate_group(config["settings"][s]["bits"], config["settings"][s]["activation_bits"])
            for s in config["study_settings"]}
    return [g for g in GROUPS if g in used]


def per_group(values: Mapping[str, str]) -> str:
    """``value`` when every group's is the same, else ``value (its groups' labels); ...`` in first-seen order."""
    groups: dict[str, list[str]] = {}
    for group, value in values.items():
        groups.setdefault(value, []).append(GROUP_LABELS[group])
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{value} ({', '.join(labels)})" for value, labels in groups.items())


def parameter_count(n: int) -> str:
    """A parameter count in millions or billions, two decimals: ``2.82M``, ``1.24B``."""
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.2f}M"


def setup_ours(config: Mapping[str, Any], model: Mapping[str, Any], corpus: str) -> dict[str, str]:
    """Our side of the setup table, aspect by aspect as the config's ``paper_setup``: the base model's facts
    (:func:`papers.winq.regime.model_facts`), the QAT ``corpus`` actually used, and per learning-rate group of the
    study the run length, tokens (optimizer steps x sequences per step and process x ``seq_len``), learning rate and
    interpolation period of the profile's ``config``."""
    train = TrainConfig.from_dict(dict(config["train"]))
    groups = study_groups(config)
    steps = {g: run_steps(config, g) for g in groups}
    sequences = train.micro_batch_size * train.grad_accum
    embeddings = "tied" if model["tied"] else "untied"
    own_corpus = "" if config["corpus"] else " (the base model's pretraining corpus)"
    eval_tokens = config["eval"]["max_tokens"]
    return {
        "Model": f"{model['name']}, {parameter_count(model['parameters'])} parameters ({model['blocks']} blocks, "
                 f"hidden {model['hidden']}, vocabulary {model['vocabulary']:,}, {embeddings} embeddings), "
                 f"{'bf16 autocast' if train.bf16 else 'float32'}",
        "Data": f"{corpus}{own_corpus}",
        "Tokens": per_group({g: f"{n * sequences * train.seq_len:,} a run ({n:,} steps of {sequences} sequences of "
                                f"{train.seq_len} tokens, per process)" for g, n in steps.items()}),
        "Steps": per_group({g: f"{n:,}" for g, n in steps.items()}),
        "Learning rate": f"AdamW (beta2 {train.beta2:g}), weight decay {train.weight_decay:g}, {train.warmup_steps} "
                         f"warmup steps then cosine to {train.min_lr_ratio:g} lr: "
                         + per_group({g: f"{config['learning_rates'][g]:g}" for g in groups}),
        "Interpolation period K": per_group({g: f"{interpolation_every(config, g):,} of {n:,} steps"
                                             for g, n in steps.items()})
                                  + f"; strength {config['interpolation']['strength']:g}, noise sigma "
                                    f"{config['noise']['sigma']:g}",
        "Seeds": f"{', '.join(map(str, config['seeds']))} for every compared run, "
                 f"{', '.join(map(str, config['figure_seeds']))} for the figure-only runs",
        "Layers quantized": f"every attention and MLP linear (q, k, v, o, gate, up, down) of the {model['blocks']} "
                            f"blocks, {model['layers']} layers and {model['share']:.0%} of the parameters; the "
                            f"{embeddings} embeddings and the norms in float32",
        "Evaluation": f"{corpus}'s test split: perplexity over "
                      f"{'all its' if eval_tokens is None else f'the first {eval_tokens:,}'} tokens in "
                      f"{config['eval']['window']}-token windows (stride {config['eval']['stride']}), and zero-shot "
                      "cloze and 4-way choice tasks built from the corpus, every model checkpoint-quantized first",
    }


def build_context(*, config: Mapping[str, Any], profile: str, summary: Mapping[str, Any],
                  claims: Mapping[str, Any], model: Mapping[str, Any], corpus: str,
                  figures: Sequence[Mapping[str, str]], artifacts: Sequence[str], rerun_examples: Sequence[str],
                  seeds: Mapping[str, Any], stage_seconds: Mapping[str, float]) -> dict[str, Any]:
    """The report context; ``claims``: the claims document (``claims.json``, :func:`common.report.claims_document`:
    rows, checks and the regime card), re-validated row by row by ``assemble``; ``model`` and ``corpus``: the base
    model's facts (:func:`papers.winq.regime.model_facts`) and the QAT corpus, for the setup table
    (:func:`setup_ours`)."""
    tables = [run_table(summary), hessian_table(summary), *filter(None, [pilot_table(config)])]
    setup = setup_rows(config["paper_setup"], setup_ours(config, model, corpus))
    return assemble(paper=PAPER, figures=figures, tables=tables, claims=claims, setup=setup,
                    provenance=provenance({"paper": config, "profile": profile}, seeds=seeds,
                                          stage_seconds=stage_seconds),
                    rerun=rerun_entries(KEY, profile, rerun_examples), artifacts=artifacts)
