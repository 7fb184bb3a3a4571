"""A synthetic *Max-Window* study: every artifact ``study.study_summary`` and the claims read, for the 9 runs of
the smoke profile with every observer configured, each with seeds 0 and 1 (helpers of the tests here).

Numbers are binary fractions wherever a rule divides or averages them, so every APE, drop and seed mean is exact.
Each planted effect ``e`` (an APE, a drop, an overflow rate) is ``e * SEED_FACTOR[k]`` at seed ``k``, factors
1.125 and 0.875 for seeds 0 and 1: the per-seed values differ and their mean is ``e`` exactly.

* losses: the BF16 baseline at the low rate is ``4 - t/16``, at the high rate ``4 - t/8`` (``t = 0 .. 11``), the
  same for every seed; a QAT run's loss is the baseline's times ``1 + ape * SEED_FACTOR[k]`` from its warmup step on
  and times ``1 + PRE_WARMUP_ERROR`` before (so an APE that does not skip the warmup steps is visibly wrong);
* metrics: :data:`BF16_LOW`, the high-rate baseline (:func:`bf16_high`: pretraining-corpus perplexity
  ``16 (1 + forgetting)``) and :data:`BASE`, the same for every seed; a trained QAT model evaluated in BF16 is its
  baseline (same rate) with every metric worse by the relative drop ``d * SEED_FACTOR[k]`` (perplexities times
  ``1 + d``, accuracies times ``1 - d``; ``d`` = ``recipe_drop`` for the recipe, ``drop`` for every other QAT run,
  ``drops`` overrides per run), evaluated in HiF8 (after checkpoint quantization) worse by ``quant_drop`` more; a
  BF16 baseline in HiF8 is worse by ``quant_drop``;
* saturation: per observer an overflow rate (``overflow``) times :data:`ROLE_FACTORS` per tensor role (times the
  seed factor), in the keys of ``common.quantizers.saturation_summary``;
* records: every evaluation names its model (:data:`PARAMETERS` parameters) and its corpus's test split
  (:data:`CORPORA`); a HiF8 one holds the checkpoint's quantization record (:data:`QUANTIZATION`: the telemetry's
  :data:`LAYERS` layers ``l<i>``, each of :data:`QUANTIZED_SHAPE`), so the quantized share is 0.5;
* per-unit scores (what the claims resample): :data:`WINDOWS` windows of :data:`WINDOW_TOKENS` tokens, each with the
  model's perplexity (:func:`perplexity_group`), and the first ``round(acc * n)`` zero-shot examples correct
  (:func:`correct_list`); telemetry (:func:`telemetry_rows`: ``grad_accum`` calls per layer, role and step) of the
  runs the claims read, ``saturation.json`` made from it by ``common.quantizers.saturation_summary``.

:data:`PAPER_LIKE` reproduces most claims; :data:`CONTRARY` contradicts them (large APE, no forgetting, a lossy
recipe, max_window saturating more than most_recent).
"""

import copy
import csv
import gzip
import json
import math
from pathlib import Path

import numpy as np
import yaml

from common.observers import OBSERVERS
from common.qat.seeds import seed_cell
from common.quantizers import TELEMETRY_FIELDS, saturation_summary
from papers.maxwindow_hif8.__main__ import last_row
from papers.maxwindow_hif8.claims import Artifact, Study, telemetry_runs
from papers.maxwindow_hif8.context import our_setup
from papers.maxwindow_hif8.run import TELEMETRY_FILE
from papers.maxwindow_hif8.settings import KEY, profile_config, recipe, run_names, run_settings
from papers.maxwindow_hif8.study import observer_cell, read_losses, study_summary

PAPER = Path(__file__).resolve().parents[3] / "papers" / "maxwindow_hif8"
ROLES = ("input", "weight", "grad_output")
ROLE_FACTORS = {"input": 1.0, "weight": 0.5, "grad_output": 2.0}
SEED_FACTOR = {0: 1.125, 1: 0.875, 2: 1.0}
EXAMPLES = 1024  # zero-shot examples per task: at accuracy 0.5 the standard error is exactly 1/64
PRE_WARMUP_ERROR = 0.25
LAYERS = 6
LOG_FIELDS = ("step", "loss", "lr", "grad_norm", "tokens", "seconds")
WINDOWS, WINDOW_TOKENS = 64, 64  # 4096 evaluation tokens per corpus
ERROR_OVERFLOW, ERROR_IN_RANGE = 2**-4, 2**-5  # planted relative quantization errors of a call
PARAMETERS, QUANTIZED_SHAPE = 1536, [16, 8]  # the model's parameters, each quantized layer's weight: share 0.5
QUANTIZATION = {"modules": [f"l{i}" for i in range(LAYERS)], "tied": {},
                "weights": {f"l{i}": {"shape": QUANTIZED_SHAPE, "dtype": "float32"} for i in range(LAYERS)}}
CORPORA = {"pretrain": "pretrain_corpus", "shift": "shift_corpus"}

BF16_LOW = {"pretrain_perplexity": 16.0, "cloze_acc": 0.5, "choice_acc_norm": 0.5, "shift_perplexity": 24.0}
BASE = {"pretrain_perplexity": 13.0, "cloze_acc": 0.625, "choice_acc_norm": 0.625, "shift_perplexity": 48.0}
PERPLEXITIES = ("pretrain_perplexity", "shift_perplexity")

PAPER_LIKE = {"ape": 2**-8, "forgetting": 0.25, "recipe_drop": 2**-9, "drop": 2**-5, "quant_drop": 2**-6,
              "overflow": {"most_recent": 0.25, "exp_smooth": 0.375, "max_window": 2**-4, "current": 0.0}}
CONTRARY = {"ape": 2**-5, "forgetting": 0.0, "recipe_drop": 2**-3, "drop": 2**-5, "quant_drop": 2**-6,
            "overflow": {"most_recent": 2**-4, "exp_smooth": 0.125, "max_window": 0.25, "current": 0.0}}


def raw_config():
    """The ``maxwindow_hif8`` section of ``config.yaml``, as read."""
    return yaml.safe_load((PAPER / "config.yaml").read_text())[KEY]


def smoke_config(**changes):
    """The smoke profile (12 steps of 2 micro-batches, warmup 4, seeds 0 and 1, 200-step observer study) with the
    default's four observers (9 runs), top-level keys replaced by ``changes``."""
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
    """The loss of ``name`` at ``step`` for the (seed's) APE ``ape`` (module docstring)."""
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


def delayed_calls(config, name):
    """Calls per role with a delayed scale: every layer ``grad_accum`` times per HiF8 step, less the cold start
    (the first call after the reset; every call of the warmup step with ``history_unit="step"``; none for current
    scaling)."""
    settings = run_settings(config, name)
    warmup, delayed = settings["warmup_steps"], OBSERVERS[settings["observer"]].delayed
    calls = config["train"].get("grad_accum", 1)
    cold = (calls if config.get("history_unit", "call") == "step" else 1) if delayed else 0
    return LAYERS * (calls * (config["train"]["max_steps"] - warmup) - cold)


def saturation(config, name, rate):
    """A ``saturation.json`` of ``name`` with overflow rate ``rate`` (times the role factors), in the keys of
    ``common.quantizers.saturation_summary``; ``{}`` for a baseline."""
    if run_settings(config, name)["observer"] is None:
        return {}
    calls = delayed_calls(config, name)
    out = {}
    for role in ROLES:
        r = rate * ROLE_FACTORS[role]
        out[role] = {"calls": calls, "overflow_rate": r, "mean_over_range": r / 64,
                     "max_over_range": 0.125 if r else 0.0, "mean_clipped": 0.0, "overflow_rows": r * calls,
                     "rel_error_overflow": ERROR_OVERFLOW if r else None, "rel_error_no_overflow": ERROR_IN_RANGE,
                     "mean_mantissa_bits_lost": 1.0 if r else None}
    return out


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


def evaluation(path, metrics, role, examples=EXAMPLES, quantization=None):
    """A ``common.eval`` record (the parts the study, the claims and the context read) of one corpus role;
    ``quantization``: the record of a quantized checkpoint (None: unquantized)."""
    def ppl(value):
        return perplexity_group([math.log(value)] * WINDOWS, perplexity=value)

    model = {"path": path, "class": "LlamaForCausalLM", "parameters": PARAMETERS}
    data = {"split": {"path": f"data/corpora/{CORPORA[role]}/test.jsonl", "tokens": WINDOWS * WINDOW_TOKENS},
            "window": WINDOW_TOKENS, "stride": WINDOW_TOKENS}
    if role == "shift":
        return {"model": model, "quantization": quantization, "data": data,
                "metrics": {"perplexity": ppl(metrics["shift_perplexity"])}}
    cloze, plain, norm = (correct_list(a, examples) for a in (metrics["cloze_acc"], metrics["choice_acc_norm"] / 2,
                                                             metrics["choice_acc_norm"]))
    data |= {"cloze": {"examples": examples}, "choice": {"examples": examples}}
    return {"model": model, "quantization": quantization, "data": data, "metrics": {
        "perplexity": ppl(metrics["pretrain_perplexity"]),
        "cloze": {"acc": metrics["cloze_acc"], "examples": examples, "correct": sum(cloze),
                  "example_correct": cloze},
        "choice": {"acc": metrics["choice_acc_norm"] / 2, "acc_norm": metrics["choice_acc_norm"],
                   "examples": examples, "correct": sum(plain), "correct_norm": sum(norm), "example_correct": plain,
                   "example_correct_norm": norm}}}


def constant_scale(step, call, layer, role):
    return 15.0


def telemetry_rows(config, name, saturating, layers=LAYERS, scale=constant_scale):
    """Telemetry rows of run ``name`` in call order: from the run's warmup step on, ``grad_accum`` calls per step,
    each of every layer ``l<i>`` and role; the first call of each layer and role is a cold start (every call of the
    warmup step with ``history_unit="step"``) for a delayed observer, none for current scaling. ``saturating(step,
    call, layer index, role)`` -> bool (never on a cold start); a saturating call has relative error
    :data:`ERROR_OVERFLOW` and loses 1 mantissa bit, another :data:`ERROR_IN_RANGE` and none; ``scale(step, call,
    layer index, role)``: the call's scale."""
    settings = run_settings(config, name)
    warmup, delayed = settings["warmup_steps"], OBSERVERS[settings["observer"]].delayed
    calls = config["train"].get("grad_accum", 1)
    per_step = config.get("history_unit", "call") == "step"
    rows = []
    for step in range(warmup, config["train"]["max_steps"]):
        for call in range(calls):
            for i in range(layers):
                for role in ROLES:
                    cold = delayed and step == warmup and (call == 0 or per_step)
                    overflow = not cold and bool(saturating(step, call, i, role))
                    rows.append({"step": step, "layer": f"l{i}", "role": role, "amax": 2.0 if overflow else 1.0,
                                 "predicted_amax": 1.0, "scale": scale(step, call, i, role), "clipped_fraction": 0.0,
                                 "over_range_fraction": 0.25 if overflow else 0.0, "overflow": overflow,
                                 "cold_start": cold, "rel_error": ERROR_OVERFLOW if overflow else ERROR_IN_RANGE,
                                 "mantissa_bits_lost": 1.0 if overflow else 0.0})
    return rows


def random_saturation(rate, seed):
    """``saturating(step, call, layer, role)``: independent draws with probability ``rate`` (seeded)."""
    rng = np.random.default_rng(seed)
    drawn = {}

    def saturating(step, call, layer, role):
        return drawn.setdefault((step, call, layer, role), bool(rng.random() < rate))

    return saturating


def write_telemetry(directory, rows):
    """``telemetry.csv.gz`` and the ``saturation.json`` made from it in ``directory``; the telemetry path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with gzip.open(directory / TELEMETRY_FILE, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=TELEMETRY_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    (directory / "saturation.json").write_text(json.dumps(saturation_summary(rows)))
    return str(directory / TELEMETRY_FILE)


def build_study(directory, config=None, *, ape=PAPER_LIKE["ape"], forgetting=PAPER_LIKE["forgetting"],
                recipe_drop=PAPER_LIKE["recipe_drop"], drop=PAPER_LIKE["drop"], quant_drop=PAPER_LIKE["quant_drop"],
                overflow=None, drops=None, apes=None, examples=EXAMPLES):
    """Every input of ``study_summary`` (logs written under ``directory/<run>/seed<k>/``), keyed by ``(run, seed)``
    and evaluations by ``"<precision>/<run>/seed<k>/<role>"``, and the planted ``metrics`` per
    ``"<precision>/<run>/seed<k>"`` and ``"bf16/base"`` (module docstring); ``drops`` / ``apes``: per-run
    overrides."""
    config = smoke_config() if config is None else config
    overflow = dict(PAPER_LIKE["overflow"] if overflow is None else overflow)
    drops, apes = dict(drops or {}), dict(apes or {})
    recipe_run = recipe(config)
    baselines = {"low": dict(BF16_LOW), "high": bf16_high(forgetting)}
    metrics = {"bf16/base": dict(BASE)}
    logs, sat, seconds = {}, {}, {}
    for index, name in enumerate(run_names(config)):
        settings = run_settings(config, name)
        reference = baselines[settings["rate"]]
        for seed in config["seeds"]:
            factor, cell = SEED_FACTOR[seed], seed_cell(name, seed)
            logs[name, seed] = write_log(Path(directory) / cell / "train_log.csv", config, name,
                                         apes.get(name, ape) * factor)
            seconds[name, seed] = 2.0 * (index + 1) + seed
            if settings["observer"] is None:
                metrics[f"bf16/{cell}"] = dict(reference)
                metrics[f"hif8/{cell}"] = degraded(reference, quant_drop)
                sat[name, seed] = {}
            else:
                d = drops.get(name, recipe_drop if name == recipe_run else drop) * factor
                metrics[f"bf16/{cell}"] = degraded(reference, d)
                metrics[f"hif8/{cell}"] = degraded(reference, d + quant_drop)
                sat[name, seed] = saturation(config, name, overflow[settings["observer"]] * factor)
    evaluations = {f"{key}/{role}": evaluation(f"results/models/{key}", values, role, examples,
                                               QUANTIZATION if key.startswith("hif8/") else None)
                   for key, values in metrics.items() for role in ("pretrain", "shift")}
    return {"config": config, "logs": logs, "saturation": sat, "evaluations": evaluations, "train_seconds": seconds,
            "metrics": metrics}


def study_artifacts(study, telemetry=None):
    """The claims' :class:`Study` of a :func:`build_study` result (in memory, evaluation paths named by their
    keys, the synthetic observer study of its config); ``telemetry``: ``(run, seed)`` -> rows (default: every run the
    claims read, every seed, saturating at its observer's ``PAPER_LIKE`` rate)."""
    config = study["config"]
    if telemetry is None:
        telemetry = {(run, seed): telemetry_rows(config, run, random_saturation(
            PAPER_LIKE["overflow"][run_settings(config, run)["observer"]], 10 * index + seed))
            for index, run in enumerate(telemetry_runs(config)) for seed in config["seeds"]}
    evaluations = {key: Artifact(f"results/maxwindow_hif8/eval/{key}.json", record)
                   for key, record in study["evaluations"].items()}
    losses = {cell: Artifact(path, read_losses(path)) for cell, path in study["logs"].items()}
    folder = "results/maxwindow_hif8/runs"
    return Study(config, evaluations, losses,
                 {cell: Artifact(f"{folder}/{seed_cell(*cell)}/{TELEMETRY_FILE}", rows)
                  for cell, rows in telemetry.items()},
                 {cell: Artifact(f"{folder}/{seed_cell(*cell)}/saturation.json", saturation_summary(rows))
                  for cell, rows in telemetry.items()},
                 Artifact("results/maxwindow_hif8/observer_study.json", observer_cell(config)))


def summarize(study):
    """``study_summary`` of a :func:`build_study` result."""
    return study_summary(study["config"], study["logs"], study["saturation"], study["evaluations"],
                         study["train_seconds"])


def paper_like(directory, **changes):
    """The summary of a study that reproduces the claims (``changes``: :func:`build_study` overrides)."""
    return summarize(build_study(directory, **{**PAPER_LIKE, **changes}))


def contrary(directory, **changes):
    """The summary of a study that contradicts the claims."""
    return summarize(build_study(directory, **{**CONTRARY, **changes}))


def setup_of(study, regime):
    """Our side of the setup table of a :func:`build_study` result: its base model's records, the last row of the
    recipe's seed-0 log and the regime card ``regime`` (a claims document's rows)."""
    config = study["config"]
    base = {role: study["evaluations"][f"bf16/base/{role}"] for role in ("pretrain", "shift")}
    log = study["logs"][recipe(config), config["seeds"][0]]
    return our_setup(config, base=base, log_end=last_row(log), regime=regime)
