"""A synthetic *Max-Window* study: every artifact ``study.study_summary`` reads, for the 18-run grid of the smoke
profile (helpers of the tests here).

Numbers are binary fractions wherever a rule divides them, so every APE and relative drop is exact:

* losses: the BF16 baseline at the low rate is ``4 - t/16``, at the high rate ``4 - t/8`` (``t = 0 .. 11``); a QAT
  run's loss is the baseline's times ``1 + ape`` from its warmup step on and times ``1 + PRE_WARMUP_ERROR`` before
  (so an APE that does not skip the warmup steps is visibly wrong);
* metrics: :data:`BF16_LOW`, the high-rate baseline (:func:`bf16_high`: pretraining-corpus perplexity
  ``16 (1 + forgetting)``), :data:`BASE`; a HiF8 model is its baseline (same rate) with every metric worse by the
  relative drop ``d`` (perplexities times ``1 + d``, accuracies times ``1 - d``): ``recipe_drop`` for the recipe,
  ``drop`` for every other QAT run, ``ptq_drop`` for the checkpoint-quantized baselines; ``drops`` overrides per run;
* saturation: per observer an overflow rate (``overflow``), times :data:`ROLE_FACTORS` per tensor role;
* per-unit scores (what the claims resample): :data:`WINDOWS` windows of :data:`WINDOW_TOKENS` tokens, each with the
  model's perplexity (:func:`perplexity_group`), and the first ``round(acc * n)`` zero-shot examples correct
  (:func:`correct_list`); telemetry (:func:`telemetry_rows`) of the runs the claims read, ``saturation.json`` made
  from it by ``run.saturation_summary``.

:data:`PAPER_LIKE` reproduces every claim; :data:`CONTRARY` contradicts them (large APE, no forgetting, a lossy
recipe, max_window saturating more than most_recent).
"""

import copy
import csv
import json
import math
from pathlib import Path

import numpy as np
import yaml

from common.qat import TELEMETRY_FIELDS
from papers.maxwindow_hif8.claims import Artifact, StudyArtifacts, telemetry_runs
from papers.maxwindow_hif8.run import saturation_summary
from papers.maxwindow_hif8.settings import KEY, profile_config, run_names, run_settings
from papers.maxwindow_hif8.study import read_losses, study_summary

PAPER = Path(__file__).resolve().parents[3] / "papers" / "maxwindow_hif8"
ROLES = ("input", "weight", "grad_output")
ROLE_FACTORS = {"input": 1.0, "weight": 0.5, "grad_output": 2.0}
EXAMPLES = 1024  # zero-shot examples per task: at accuracy 0.5 the standard error is exactly 1/64
PRE_WARMUP_ERROR = 0.25
LAYERS = 6
LOG_FIELDS = ("step", "loss", "lr", "grad_norm", "tokens", "seconds")
WINDOWS, WINDOW_TOKENS = 64, 64  # 4096 evaluation tokens per corpus

BF16_LOW = {"pretrain_perplexity": 16.0, "cloze_acc": 0.5, "choice_acc_norm": 0.5, "shift_perplexity": 24.0}
BASE = {"pretrain_perplexity": 13.0, "cloze_acc": 0.625, "choice_acc_norm": 0.625, "shift_perplexity": 48.0}
PERPLEXITIES = ("pretrain_perplexity", "shift_perplexity")

PAPER_LIKE = {"ape": 2**-8, "forgetting": 0.25, "recipe_drop": 2**-9, "drop": 2**-5, "ptq_drop": 2**-6,
              "overflow": {"most_recent": 0.2, "exp_smooth": 0.3, "max_window": 0.05, "current": 0.0}}
CONTRARY = {"ape": 2**-5, "forgetting": 0.0, "recipe_drop": 2**-3, "drop": 2**-5, "ptq_drop": 2**-6,
            "overflow": {"most_recent": 0.05, "exp_smooth": 0.1, "max_window": 0.2, "current": 0.0}}


def raw_config():
    """The ``maxwindow_hif8`` section of ``config.yaml``, as read."""
    return yaml.safe_load((PAPER / "config.yaml").read_text())[KEY]


def smoke_config(**changes):
    """The smoke profile (12 steps, warmup 4, 200-step observer study) with the default's four observers (the
    18-run grid), top-level keys replaced by ``changes``."""
    return {**profile_config(raw_config(), "smoke"), "observers": raw_config()["observers"], **copy.deepcopy(changes)}


def bf16_high(forgetting):
    """The high-rate BF16 baseline's metrics: forgets (pretraining-corpus perplexity up), learns the shift more."""
    return {"pretrain_perplexity": 16.0 * (1 + forgetting), "cloze_acc": 0.375, "choice_acc_norm": 0.375,
            "shift_perplexity": 20.0}


def degraded(metrics, drop):
    """``metrics`` with every relative drop equal to ``drop`` (positive = worse)."""
    return {m: v * (1 + drop) if m in PERPLEXITIES else v * (1 - drop) for m, v in metrics.items()}


def baseline_loss(rate, step):
    return 4.0 - step / (8 if rate == "high" else 16)


def run_loss(config, name, step, ape):
    """The loss of ``name`` at ``step`` (module docstring)."""
    settings = run_settings(config, name)
    reference = baseline_loss(settings["rate"], step)
    if settings["observer"] is None:
        return reference
    return reference * (1 + (ape if step >= settings["warmup_steps"] else PRE_WARMUP_ERROR))


def write_log(path, config, name, ape):
    """A ``train_log.csv`` of ``config["train"]["max_steps"]`` steps."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lr = run_settings(config, name)["lr"]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=LOG_FIELDS)
        writer.writeheader()
        for step in range(config["train"]["max_steps"]):
            writer.writerow({"step": step, "loss": repr(run_loss(config, name, step, ape)), "lr": lr,
                             "grad_norm": 1.0, "tokens": (step + 1) * 256, "seconds": 0.5 * step})
    return str(path)


def saturation(config, name, rate):
    """``run.saturation_summary``'s output for ``name`` with overflow rate ``rate`` (times the role factors)."""
    if run_settings(config, name)["observer"] is None:
        return {}
    calls = LAYERS * (config["train"]["max_steps"] - run_settings(config, name)["warmup_steps"] - 1)
    return {role: {"calls": calls, "overflow_rate": rate * ROLE_FACTORS[role],
                   "mean_over_range": rate * ROLE_FACTORS[role] / 64, "max_over_range": 0.125 if rate else 0.0,
                   "mean_clipped": 0.0} for role in ROLES}


def perplexity_group(window_log_perplexity, tokens=WINDOW_TOKENS, perplexity=None):
    """A perplexity metric group from each window's mean NLL (every window ``tokens`` tokens); ``perplexity``: the
    recorded value (default: the one the windows make)."""
    nll = [tokens * float(x) for x in window_log_perplexity]
    total = tokens * len(nll)
    made = math.exp(math.fsum(nll) / total)
    return {"perplexity": made if perplexity is None else perplexity, "tokens": total, "windows": len(nll),
            "window_nll": nll, "window_tokens": [tokens] * len(nll)}


def correct_list(accuracy, examples):
    """Per-example correctness: the first ``round(accuracy * examples)`` correct."""
    k = round(accuracy * examples)
    return [1] * k + [0] * (examples - k)


def evaluation(path, metrics, role, examples=EXAMPLES):
    """A ``common.eval`` record (the parts the study and the claims read) of one corpus role."""
    def ppl(value):
        return perplexity_group([math.log(value)] * WINDOWS, perplexity=value)

    if role == "shift":
        return {"model": {"path": path}, "metrics": {"perplexity": ppl(metrics["shift_perplexity"])}}
    cloze, plain, norm = (correct_list(a, examples) for a in (metrics["cloze_acc"], metrics["choice_acc_norm"] / 2,
                                                             metrics["choice_acc_norm"]))
    return {"model": {"path": path}, "metrics": {
        "perplexity": ppl(metrics["pretrain_perplexity"]),
        "cloze": {"acc": metrics["cloze_acc"], "examples": examples, "correct": sum(cloze),
                  "example_correct": cloze},
        "choice": {"acc": metrics["choice_acc_norm"] / 2, "acc_norm": metrics["choice_acc_norm"],
                   "examples": examples, "correct": sum(plain), "correct_norm": sum(norm), "example_correct": plain,
                   "example_correct_norm": norm}}}


def telemetry_rows(config, name, saturating, layers=LAYERS):
    """Telemetry rows of run ``name``: every layer ``l<i>`` and role at every step from the run's warmup on (cold
    starts at the warmup step); ``saturating(step, layer index, role)`` -> bool (never on a cold start)."""
    warmup = run_settings(config, name)["warmup_steps"]
    rows = []
    for step in range(warmup, config["train"]["max_steps"]):
        for i in range(layers):
            for role in ROLES:
                cold = step == warmup
                overflow = not cold and bool(saturating(step, i, role))
                rows.append({"step": step, "layer": f"l{i}", "role": role, "amax": 2.0 if overflow else 1.0,
                             "predicted_amax": 1.0, "scale": 15.0, "clipped_fraction": 0.0,
                             "over_range_fraction": 0.25 if overflow else 0.0, "overflow": overflow,
                             "cold_start": cold})
    return rows


def random_saturation(rate, seed):
    """``saturating(step, layer, role)``: independent draws with probability ``rate`` (seeded)."""
    rng = np.random.default_rng(seed)
    drawn = {}

    def saturating(step, layer, role):
        return drawn.setdefault((step, layer, role), bool(rng.random() < rate))

    return saturating


def write_telemetry(directory, rows):
    """``telemetry.csv`` and the ``saturation.json`` made from it in ``directory``; the telemetry path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "telemetry.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=TELEMETRY_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (directory / "saturation.json").write_text(json.dumps(saturation_summary(rows)))
    return str(directory / "telemetry.csv")


def build_study(directory, config=None, *, ape=PAPER_LIKE["ape"], forgetting=PAPER_LIKE["forgetting"],
                recipe_drop=PAPER_LIKE["recipe_drop"], drop=PAPER_LIKE["drop"], ptq_drop=PAPER_LIKE["ptq_drop"],
                overflow=None, drops=None, apes=None, examples=EXAMPLES):
    """Every input of ``study_summary`` (logs written under ``directory``) and the planted ``metrics`` per
    ``"<precision>/<run>"`` (module docstring); ``drops`` / ``apes``: per-run overrides."""
    config = smoke_config() if config is None else config
    overflow = dict(PAPER_LIKE["overflow"] if overflow is None else overflow)
    drops, apes = dict(drops or {}), dict(apes or {})
    recipe = f"max_window-lrlow-w{config['bf16_warmup_steps']}"
    baselines = {"low": dict(BF16_LOW), "high": bf16_high(forgetting)}
    metrics = {"bf16/base": dict(BASE)}
    logs, sat, seconds = {}, {}, {}
    for index, name in enumerate(run_names(config)):
        settings = run_settings(config, name)
        reference = baselines[settings["rate"]]
        logs[name] = write_log(Path(directory) / name / "train_log.csv", config, name, apes.get(name, ape))
        seconds[name] = 2.0 * (index + 1)
        if settings["observer"] is None:
            metrics[f"bf16/{name}"] = dict(reference)
            metrics[f"hif8/{name}"] = degraded(reference, drops.get(name, ptq_drop))
            sat[name] = {}
        else:
            metrics[f"hif8/{name}"] = degraded(reference, drops.get(name, recipe_drop if name == recipe else drop))
            sat[name] = saturation(config, name, overflow[settings["observer"]])
    evaluations = {f"{key}/{role}": evaluation(f"results/models/{key}", values, role, examples)
                   for key, values in metrics.items() for role in ("pretrain", "shift")}
    return {"config": config, "logs": logs, "saturation": sat, "evaluations": evaluations, "train_seconds": seconds,
            "metrics": metrics}


def study_artifacts(study, telemetry=None):
    """The :class:`StudyArtifacts` of a :func:`build_study` result (in memory, evaluation paths named by their
    keys); ``telemetry``: run -> rows (default: every run the claims read saturating at its observer's
    ``PAPER_LIKE`` rate)."""
    config = study["config"]
    if telemetry is None:
        telemetry = {run: telemetry_rows(config, run, random_saturation(
            PAPER_LIKE["overflow"][run_settings(config, run)["observer"]], index)) for index, run in
            enumerate(telemetry_runs(config))}
    evaluations = {key: Artifact(f"results/maxwindow_hif8/eval/{key}.json", record)
                   for key, record in study["evaluations"].items()}
    losses = {run: Artifact(path, read_losses(path)) for run, path in study["logs"].items()}
    return StudyArtifacts(config, evaluations, losses,
                          {run: Artifact(f"results/maxwindow_hif8/runs/{run}/telemetry.csv", rows)
                           for run, rows in telemetry.items()},
                          {run: Artifact(f"results/maxwindow_hif8/runs/{run}/saturation.json",
                                         saturation_summary(rows)) for run, rows in telemetry.items()})


def summarize(study):
    """``study_summary`` of a :func:`build_study` result."""
    return study_summary(study["config"], study["logs"], study["saturation"], study["evaluations"],
                         study["train_seconds"])


def paper_like(directory, **changes):
    """The summary of a study that reproduces every claim (``changes``: :func:`build_study` overrides)."""
    return summarize(build_study(directory, **{**PAPER_LIKE, **changes}))


def contrary(directory, **changes):
    """The summary of a study that contradicts the claims."""
    return summarize(build_study(directory, **{**CONTRARY, **changes}))
