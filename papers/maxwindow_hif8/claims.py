"""The claims table of the Max-Window paper: per row of ``config.yaml`` ``claims:`` (the prediction, fixed before
the data) an estimate with its interval, made from the artifacts of the runs compared, and the verdict by the one
rule of :mod:`common.report.claims`; what holds by construction is an implementation check.

Statistics (W = ``bf16_warmup_steps``; the recipe is ``max_window-lrlow-wW``; HiF8 models are evaluated after
checkpoint quantization, BF16 ones as trained):

* relative perplexity change of model ``a`` vs ``b`` on one corpus's test split, ``P_a / P_b - 1`` with
  ``P = exp(sum_j nll_j / sum_j tokens_j)`` over the evaluation windows ``j`` (:func:`perplexity_change`);
* relative accuracy drop ``(acc_b - acc_a) / acc_b = 1 - C_a / C_b`` with ``C`` the correct answers over the same
  examples (cloze ``acc``, choice ``acc_norm``: :func:`accuracy_drop`);
* training-loss APE ``mean_{t >= W} |L_t - L_t^BF16| / L_t^BF16`` over the steps with HiF8 on
  (:func:`loss_ape_claim`, :func:`loss_sums`), and the signed change ``mean_t L_t / R_t - 1`` of one run's training
  loss against another's over every step (:func:`loss_change_claim`: does the loss show forgetting);
* the fraction of saturating layer-calls ``f = sum_t o_t / sum_t c_t`` with ``c_t`` the layer-calls of step ``t``
  with a delayed scale (cold starts excluded) and ``o_t`` those whose amax exceeded the predicted amax
  (:func:`step_sums` of :func:`saturation_sums`), and the difference ``f_a - f_b`` of two runs of one seed on the
  same steps (:func:`paired_steps`);
* the relative quantization error ratio ``(sum_o e / n_o) / (sum_n e / n_n) - 1`` of one role's calls, ``e`` the
  call's ``|Q(x) - x| / |x|``, ``o`` the saturating calls and ``n`` the others (:func:`error_ratio`);
* scale jitter ``mean |log2 s_c - log2 s_(c-1)|`` over consecutive calls ``c`` of each layer and role
  (:func:`jitter_sums`).

Seeds: every statistic is computed per seed ``s`` of ``config["seeds"]``, the runs compared being those of seed
``s`` (the same data order: paired by seed), and the estimate is the seed mean with
:func:`common.uncertainty.seed_interval`: a t-interval over seeds, for evaluation statistics widened by the paired
bootstrap over the evaluation windows / examples every seed was scored on (the bootstrap of the seed mean, the same
resampled units for every model and seed); for trajectory statistics (loss APE, saturation, errors, jitter: each
seed's steps are its own) the t-interval alone. A profile with one seed gives the bootstrap alone (paired over
windows / examples, or the circular block bootstrap over training steps, :func:`common.uncertainty.block_bootstrap`)
and says "1 seed".

The forgetting rows compare the high learning rate with the low one; how much the low rate keeps of the pretraining
corpus is the regime that comparison rests on, so each of them shows it in its detail (:func:`forgetting_claim`):
``P_low / P_base - 1`` of bf16-lrlow vs the base model on the pretraining corpus. It is no claim of its own.

Kinds (``kind:`` of each row, issue 36): ``paper`` rows test a sentence of the paper (``quote``); ``finding`` rows
are ours (the HiF8-deployed recipe, how often the recipe saturates in training); ``check`` rows hold by the observers'
definitions on any noisy amax trace (most_recent saturates, max_window saturates less on inputs and output
gradients, CTS jitters, the EMA saturates more) and are implementation checks; ``control`` rows are the negative
controls of the near-lossless bounds: the recipe with a broken scale (``variants.coarse_scale``, run
``max_window-lrlow-wW-coarse_scale``), which should break each bound its bound row (``control:``) stays within.
The learning rates were picked on seed 0 (config ``learning_rates``); the forgetting rows include seed 0 and say so.

Saturation is *scale-induced*: a layer-step saturates when its amax exceeds the amax its delayed scale was predicted
from (``overflow`` in the telemetry). With ``max_val = 15`` and HiF8's largest finite value 2^15 the format itself
clips nothing until a value reaches about 2000x the prediction.

Implementation checks (:func:`study_checks`): the synthetic observer study's exact properties, the telemetry's
accounting for every layer, role, step and call, the pairing of the evaluations and the per-unit scores adding up
to the recorded metrics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from common.analysis.observer_study import TRACE_OPTIONS
from common.eval.scores import TASK_ACCURACY, example_correct, score_mismatches, window_columns
from common.io import read_json
from common.observers import OBSERVERS, make_observer
from common.qat.seeds import parse_seed_cell, seed_cell
from common.recipes import ROLES
from common.report import Check, Claim, ClaimSpec, ClaimsResult, judge
from common.uncertainty import Estimate, Evidence, log_perplexity, resample_counts, seed_estimate, trajectory_estimate

from .settings import control_run, recipe, run_names, run_settings
from .study import loss_errors, read_losses, read_telemetry

PRECISIONS = {"hif8": "HiF8", "bf16": "BF16"}
CORPORA = ("pretrain", "shift")
LOW_RATE, BASE = ("bf16", "bf16-lrlow"), ("bf16", "base")  # the regime of the forgetting rows


class NotTestableError(Exception):
    """No estimate at this scale; the message is the reason the row states."""


@dataclass(frozen=True)
class Artifact:
    """One artifact a claim reads: its ``path`` (the row's evidence) and its parsed ``data``."""

    path: str
    data: Any


Cell = tuple[str, int]  # (run, seed)


@dataclass(frozen=True)
class Study:
    """The artifacts of the study ``config``: evaluation records by ``"<precision>/<run>/seed<k>/<role>"`` (and
    ``"bf16/base/<role>"``: the model before continual pretraining), training losses ``{step: loss}``, telemetry
    rows and ``saturation.json`` by cell ``(run, seed)`` (telemetry of :func:`telemetry_runs` only), and the
    synthetic ``observers`` study (:func:`papers.maxwindow_hif8.study.observer_cell`, for :func:`observer_checks`)."""

    config: Mapping[str, Any]
    evaluations: Mapping[str, Artifact]
    losses: Mapping[Cell, Artifact]
    telemetry: Mapping[Cell, Artifact]
    saturation: Mapping[Cell, Artifact]
    observers: Artifact

    @classmethod
    def read(cls, config: Mapping[str, Any], evaluations: Iterable[str], logs: Iterable[str],
             telemetry: Iterable[str], observers: str) -> Study:
        """Read the artifacts from their paths (layout in ``papers/maxwindow_hif8/__main__.py``): evaluations at
        ``.../<precision>/<run>/seed<k>/<role>.json`` or ``.../bf16/base/<role>.json``, logs and telemetry in
        ``.../<run>/seed<k>/``, each cell's ``saturation.json`` beside its telemetry (of the telemetry only
        :func:`telemetry_runs`'s is read), the synthetic observer study at ``observers``."""
        wanted = telemetry_runs(config)
        tables: dict[str, dict[Any, Artifact]] = {"evaluations": {}, "losses": {}, "telemetry": {}, "saturation": {}}
        for path in evaluations:
            tables["evaluations"][evaluation_key(path)] = Artifact(path, read_json(path))
        for path in logs:
            tables["losses"][parse_seed_cell(path, depth=1)] = Artifact(path, read_losses(path))
        for path in telemetry:
            cell = parse_seed_cell(path, depth=1)
            if cell[0] in wanted:
                summary = str(Path(path).with_name("saturation.json"))
                tables["telemetry"][cell] = Artifact(path, read_telemetry(path))
                tables["saturation"][cell] = Artifact(summary, read_json(summary))
        return cls(config, **tables, observers=Artifact(observers, read_json(observers)))

    @property
    def seeds(self) -> list[int]:
        return list(self.config["seeds"])

    def _get(self, table: Mapping[Any, Artifact], key: Any, run: str, what: str) -> Artifact:
        if run != "base" and run not in run_names(self.config):
            observers = ", ".join(self.config["observers"])
            variants = ", ".join(self.config.get("variants", {})) or "none"
            raise NotTestableError(f"this profile trains no run {run!r} (observers: {observers}; control variants: "
                                   f"{variants})")
        if key not in table:
            raise ValueError(f"run {run!r} has no {what} ({key!r} not among the artifacts read)")
        return table[key]

    def evaluation(self, precision: str, run: str, seed: int, role: str) -> Artifact:
        """The evaluation record of ``run`` (seed ``seed``; ``base`` has none) at ``precision`` on corpus ``role``
        (NotTestableError: a run the profile does not train)."""
        cell = "base" if run == "base" else seed_cell(run, seed)
        return self._get(self.evaluations, f"{precision}/{cell}/{role}", run, "evaluation")

    def log(self, run: str, seed: int) -> Artifact:
        """The training losses of ``run``, seed ``seed``."""
        return self._get(self.losses, (run, seed), run, "training log")

    def run_telemetry(self, run: str, seed: int) -> Artifact:
        """The telemetry rows of ``run``, seed ``seed``."""
        return self._get(self.telemetry, (run, seed), run, "telemetry")


def evaluation_key(path: str) -> str:
    """``"<precision>/<run>/seed<k>/<role>"`` of ``.../<precision>/<run>/seed<k>/<role>.json``, or
    ``"bf16/base/<role>"`` of ``.../bf16/base/<role>.json``."""
    parts = Path(path).with_suffix("").parts
    return "/".join(parts[-3:] if parts[-2] == "base" else parts[-4:])


def telemetry_runs(config: Mapping[str, Any]) -> list[str]:
    """The runs whose telemetry the claims read: every observer at the recipe's settings (low rate, warmup)."""
    warmup = config["bf16_warmup_steps"]
    grid = run_names(config)
    return [run for run in (f"{o}-lrlow-w{warmup}" for o in ("most_recent", "max_window", "current", "exp_smooth"))
            if run in grid]


# --- statistics -----------------------------------------------------------------------------------------------


def perplexity_change(pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], settings: Evidence, *,
                      names: tuple[str, str]) -> Estimate:
    """Seed mean of ``P_a / P_b - 1 = exp(S_nll^a / S_tok^a - S_nll^b / S_tok^b) - 1`` over ``pairs`` (one pair
    of evaluation records per seed, ``names``: the models', for the errors), all scored on the same windows
    (ValueError otherwise): :func:`common.uncertainty.seed_interval` over the seeds, widened by the paired bootstrap
    of the seed mean over the windows."""
    a, b = names
    columns: dict[str, np.ndarray] = {}
    for k, (treated, reference) in enumerate(pairs):
        columns |= window_columns(f"{a}@{k}", treated) | window_columns(f"{b}@{k}", reference)
    tokens = columns[f"{b}@0.tokens"]
    for key, value in columns.items():
        if key.endswith(".tokens") and not np.array_equal(value, tokens):
            raise ValueError(f"{key[:-7]} and {b}: perplexities scored on different windows ({value.size} vs "
                             f"{tokens.size} windows, or other token counts): no pairing")

    def change(sums: Mapping[str, np.ndarray], k: int) -> np.ndarray:
        return np.expm1(log_perplexity(sums, f"{a}@{k}") - log_perplexity(sums, f"{b}@{k}"))

    return seed_estimate(columns, change, range(len(pairs)), settings, "evaluation windows")[0]


def accuracy_drop(pairs: Sequence[tuple[np.ndarray, np.ndarray]], settings: Evidence) -> Estimate:
    """Seed mean of ``1 - C_a / C_b`` (the relative accuracy drop) from per-example correctness (0/1) on the same
    examples, one pair per seed: :func:`common.uncertainty.seed_interval`, widened by the paired bootstrap of the
    seed mean over the examples. NotTestableError when some resample holds none of a reference's correct answers
    (the drop is undefined there), e.g. a tiny model answering almost nothing."""
    columns = {}
    for k, (treated, reference) in enumerate(pairs):
        a, b = np.asarray(treated, dtype=np.float64), np.asarray(reference, dtype=np.float64)
        if a.shape != b.shape or a.ndim != 1:
            raise ValueError(f"accuracies on different examples: {a.shape} vs {b.shape}")
        if (resample_counts(b.size, settings.resamples, settings.seed) @ b).min() == 0:
            raise NotTestableError(f"the reference answers {int(b.sum())} of {b.size} examples correctly and some "
                                   "bootstrap resamples hold none of them: a relative drop is undefined there")
        columns |= {f"a@{k}": a, f"b@{k}": b}
    return seed_estimate(columns, lambda s, k: 1 - s[f"a@{k}"] / s[f"b@{k}"], range(len(pairs)), settings,
                         "examples")[0]


@dataclass(frozen=True)
class StepSums:
    """Per-step sums of one run's trajectory, ascending steps: ``columns`` name -> one value per step."""

    steps: np.ndarray
    columns: Mapping[str, np.ndarray]


def step_sums(rows: Iterable[Mapping[str, Any]], values: Callable[[Mapping[str, Any]], Mapping[str, float]],
              roles: Iterable[str] = ROLES) -> StepSums:
    """Per step with a delayed scale (cold starts excluded), the sums over that step's telemetry rows of ``roles``
    of ``values(row)`` (ValueError if no row has a delayed scale)."""
    wanted = set(roles)
    sums: dict[int, dict[str, float]] = {}
    for row in rows:
        if row["role"] in wanted and not row["cold_start"]:
            step = sums.setdefault(row["step"], {})
            for name, value in values(row).items():
                step[name] = step.get(name, 0.0) + value
    if not sums:
        raise ValueError(f"no telemetry row of roles {sorted(wanted)} with a delayed scale")
    steps = sorted(sums)
    names = sorted({name for step in sums.values() for name in step})
    return StepSums(np.array(steps), {n: np.array([sums[t].get(n, 0.0) for t in steps]) for n in names})


def saturation_sums(row: Mapping[str, Any]) -> dict[str, float]:
    """A call's contribution to ``f = sum o / sum c``: ``o`` 1 when it saturated, ``c`` 1."""
    return {"o": float(bool(row["overflow"])), "c": 1.0}


def error_sums(row: Mapping[str, Any]) -> dict[str, float]:
    """A call's contribution to :func:`error_ratio`: its relative error and count, split by saturation."""
    saturated = bool(row["overflow"])
    return {"eo": row["rel_error"] if saturated else 0.0, "no": float(saturated),
            "en": 0.0 if saturated else row["rel_error"], "nn": float(not saturated)}


def error_ratio(sums: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(sum_o e / n_o) / (sum_n e / n_n) - 1``: the mean relative error of the saturating calls over the others'."""
    return (np.asarray(sums["eo"]) / sums["no"]) / (np.asarray(sums["en"]) / sums["nn"]) - 1


def jitter_sums(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The telemetry rows with ``jitter`` = ``|log2 s_c - log2 s_(c-1)|`` to the previous call of the same layer and
    role (the rows are in call order; the first call after a cold start has none and is left out)."""
    previous: dict[tuple[str, str], float] = {}
    out = []
    for row in rows:
        key = (row["layer"], row["role"])
        if row["cold_start"]:
            previous[key] = row["scale"]
            continue
        if key in previous and row["scale"] > 0 and previous[key] > 0:
            out.append({**row, "jitter": abs(math.log2(row["scale"]) - math.log2(previous[key]))})
        previous[key] = row["scale"]
    return out


def fraction(sums: Mapping[str, np.ndarray], a: str, b: str) -> np.ndarray:
    return np.asarray(sums[a]) / sums[b]


def step_estimate(per_seed: Sequence[StepSums], statistic: Callable[[Mapping[str, np.ndarray]], np.ndarray],
                  settings: Evidence, unit: str = "HiF8 steps") -> Estimate:
    """``statistic`` of each seed's step sums, the seed mean with a t-interval over seeds; one seed: the circular
    block bootstrap over its steps (module docstring, :func:`common.uncertainty.trajectory_estimate`)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # undefined (e.g. 0/0): refused below, naming the values
        values = [float(statistic({k: v.sum() for k, v in sums.columns.items()})) for sums in per_seed]
    if not all(math.isfinite(v) for v in values):
        raise NotTestableError(f"the statistic is undefined on some seed ({values}): e.g. no saturating call")
    return trajectory_estimate(values, settings, lambda: settings.blocks(per_seed[0].columns, statistic, unit))


def paired_steps(a: StepSums, b: StepSums) -> StepSums:
    """The columns of ``a`` and ``b`` (suffixed ``_a``, ``_b``) on the same steps (ValueError otherwise)."""
    if not np.array_equal(a.steps, b.steps):
        raise ValueError(f"trajectories on different steps ({a.steps.tolist()} vs {b.steps.tolist()}): no pairing")
    return StepSums(a.steps, {f"{k}_a": v for k, v in a.columns.items()} | {f"{k}_b": v for k, v in b.columns.items()})


def loss_sums(errors: Mapping[int, float]) -> StepSums:
    """Per-step relative loss errors (``study.loss_errors``) as step sums ``error`` and ``steps``."""
    return StepSums(np.array(sorted(errors)), {"error": np.array([errors[t] for t in sorted(errors)]),
                                               "steps": np.ones(len(errors))})


# --- rows -----------------------------------------------------------------------------------------------------

Model = tuple[str, str]  # (precision, run)


def _label(model: Model) -> str:
    precision, run = model
    return "the base model" if run == "base" else f"{run} ({PRECISIONS[precision]})"


def _row(spec: ClaimSpec, read: Callable[[], Sequence[Artifact]], measure: Callable[[Sequence[Any]],
         tuple[Estimate, str]]) -> Claim:
    """The row of ``spec``: ``read()`` the artifacts, ``measure(their data)`` the estimate and its detail; either
    may raise :class:`NotTestableError` (the row keeps the reason)."""
    try:
        artifacts = read()
    except NotTestableError as reason:
        return judge(spec, None, reason=str(reason))
    evidence = [a.path for a in artifacts]
    try:
        estimate, detail = measure([a.data for a in artifacts])
    except NotTestableError as reason:
        return judge(spec, None, reason=str(reason), evidence=evidence)
    return judge(spec, estimate, detail=detail, evidence=evidence)


def _per_seed(values: Sequence[float], form: str = "{:+.3%}") -> str:
    return ", ".join(form.format(v) for v in values)


def _pairs(data: Sequence[Any]) -> list[tuple[Any, Any]]:
    """Artifacts read as ``[a_0, b_0, a_1, b_1, ...]`` -> ``[(a_0, b_0), ...]``."""
    return list(zip(data[0::2], data[1::2], strict=True))


def perplexity_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, treated: Model,
                     reference: Model, corpus: str) -> Claim:
    """Row: :func:`perplexity_change` of ``treated`` vs ``reference`` on ``corpus`` (``pretrain`` or ``shift``),
    paired by seed."""
    def read() -> list[Artifact]:
        return [study.evaluation(*model, seed, corpus) for seed in study.seeds for model in (treated, reference)]

    def measure(data: Sequence[Mapping[str, Any]]) -> tuple[Estimate, str]:
        pairs = _pairs(data)
        estimate = perplexity_change(pairs, settings, names=(_label(treated), _label(reference)))
        ppl = [(a["metrics"]["perplexity"]["perplexity"], b["metrics"]["perplexity"]["perplexity"]) for a, b in pairs]
        first = pairs[0][0]["metrics"]["perplexity"]
        return estimate, (f"perplexity on the {corpus} corpus's test split per seed {study.seeds}: "
                          + "; ".join(f"{pa:.4g} vs {pb:.4g}" for pa, pb in ppl)
                          + f" ({_label(treated)} vs {_label(reference)}; {len(first['window_tokens'])} windows, "
                          f"{sum(first['window_tokens'])} tokens); change per seed "
                          + _per_seed([pa / pb - 1 for pa, pb in ppl]))

    return _row(spec, read, measure)


def accuracy_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, treated: Model,
                   reference: Model, task: str) -> Claim:
    """Row: :func:`accuracy_drop` of ``treated`` vs ``reference`` on zero-shot ``task`` (``cloze``: acc,
    ``choice``: acc_norm) of the pretraining corpus, paired by seed."""
    fields = TASK_ACCURACY[task]

    def read() -> list[Artifact]:
        return [study.evaluation(*model, seed, "pretrain") for seed in study.seeds for model in (treated, reference)]

    def measure(data: Sequence[Mapping[str, Any]]) -> tuple[Estimate, str]:
        pairs = [(example_correct(_label(treated), a, task, fields),
                  example_correct(_label(reference), b, task, fields)) for a, b in _pairs(data)]
        detail = (f"{task} {fields.metric} correct per seed {study.seeds}: "
                  + "; ".join(f"{int(a.sum())} vs {int(b.sum())} of {a.size}" for a, b in pairs)
                  + f" ({_label(treated)} vs {_label(reference)})")
        return accuracy_drop(pairs, settings), detail

    return _row(spec, read, measure)


def loss_ape_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, run: str, reference: str
                   ) -> Claim:
    """Row: the training-loss APE of ``run`` vs ``reference`` (same seed) over the steps from ``run``'s warmup on,
    :func:`step_estimate` over the seeds."""
    def measure(data: Sequence[Mapping[int, float]]) -> tuple[Estimate, str]:
        warmup = run_settings(study.config, run)["warmup_steps"]  # the run is in the study (read() checked)
        errors = [loss_errors(losses, base, warmup) for losses, base in _pairs(data)]
        estimate = step_estimate([loss_sums(e) for e in errors], lambda s: fraction(s, "error", "steps"),
                                 settings, "training steps")
        first, last = min(errors[0]), max(errors[0])
        return estimate, (f"training loss of {run} vs {reference} at steps {first}..{last}; APE per seed "
                          f"{study.seeds}: {_per_seed([sum(e.values()) / len(e) for e in errors], '{:.3%}')}")

    return _row(spec, lambda: [a for seed in study.seeds for a in (study.log(run, seed), study.log(reference, seed))],
                measure)


def saturation_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, run: str,
                     roles: Sequence[str] = ROLES) -> Claim:
    """Row: the saturating fraction of ``run``'s calls of ``roles`` (every tensor role unless given), over the
    seeds."""
    def measure(data: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[Estimate, str]:
        sums = [step_sums(rows, saturation_sums, roles) for rows in data]
        counts = "; ".join(f"{int(s.columns['o'].sum())} of {int(s.columns['c'].sum())}" for s in sums)
        return step_estimate(sums, lambda s: fraction(s, "o", "c"), settings), (
            f"{run}: saturating layer-calls per seed {study.seeds}: {counts} (steps {sums[0].steps[0]}.."
            f"{sums[0].steps[-1]}, roles {', '.join(roles)})")

    return _row(spec, lambda: [study.run_telemetry(run, seed) for seed in study.seeds], measure)


def loss_change_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, run: str, reference: str) -> Claim:
    """Row: the signed relative training-loss change of ``run`` vs ``reference`` (same seed),
    ``mean_t L_t / R_t - 1`` over every step both logs have, :func:`step_estimate` over the seeds."""
    def measure(data: Sequence[Mapping[int, float]]) -> tuple[Estimate, str]:
        changes = []
        for losses, base in _pairs(data):
            steps = sorted(t for t in losses if t in base)
            if not steps:
                raise ValueError(f"{run} and {reference} share no training step")
            changes.append({t: losses[t] / base[t] - 1 for t in steps})
        estimate = step_estimate([StepSums(np.array(sorted(c)), {"change": np.array([c[t] for t in sorted(c)]),
                                                                 "steps": np.ones(len(c))}) for c in changes],
                                 lambda s: fraction(s, "change", "steps"), settings, "training steps")
        means = _per_seed([sum(c.values()) / len(c) for c in changes])
        finals = "; ".join(f"{a[max(a)]:.4g} vs {b[max(b)]:.4g}" for a, b in _pairs(data))
        return estimate, (f"training loss of {run} vs {reference} at steps {min(changes[0])}..{max(changes[0])}: "
                          f"mean change per seed {study.seeds} {means}; final loss per seed {finals}")

    return _row(spec, lambda: [a for seed in study.seeds for a in (study.log(run, seed), study.log(reference, seed))],
                measure)


def saturation_difference_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, run: str,
                                reference: str, roles: Sequence[str] = ROLES) -> Claim:
    """Row: the saturating fraction of ``run`` minus ``reference``'s (same seed) over ``roles``."""
    def measure(data: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[Estimate, str]:
        sums = [(step_sums(a, saturation_sums, roles), step_sums(b, saturation_sums, roles)) for a, b in _pairs(data)]
        counts = "; ".join(f"{int(a.columns['o'].sum())} vs {int(b.columns['o'].sum())} of {int(a.columns['c'].sum())}"
                           for a, b in sums)
        estimate = step_estimate([paired_steps(a, b) for a, b in sums],
                                 lambda s: fraction(s, "o_a", "c_a") - fraction(s, "o_b", "c_b"), settings)
        return estimate, (f"saturating {'/'.join(roles)} layer-calls per seed {study.seeds}: {counts} ({run} vs "
                          f"{reference})")

    return _row(spec, lambda: [a for seed in study.seeds
                               for a in (study.run_telemetry(run, seed), study.run_telemetry(reference, seed))],
                measure)


def error_ratio_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, run: str, role: str) -> Claim:
    """Row: :func:`error_ratio` of ``run``'s ``role`` calls (saturating vs not), over the seeds; the detail adds the
    mantissa bits the saturating calls' over-range values lose."""
    def measure(data: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[Estimate, str]:
        sums = [step_sums(rows, error_sums, [role]) for rows in data]
        lost = [[r["mantissa_bits_lost"] for r in rows if r["role"] == role and r["overflow"] and not r["cold_start"]]
                for rows in data]
        parts = [f"{s.columns['eo'].sum() / max(s.columns['no'].sum(), 1):.3g} on {int(s.columns['no'].sum())} "
                 f"saturating vs {s.columns['en'].sum() / max(s.columns['nn'].sum(), 1):.3g} on "
                 f"{int(s.columns['nn'].sum())} other calls" for s in sums]
        bits = [sum(v) / len(v) if v else 0.0 for v in lost]
        return step_estimate(sums, error_ratio, settings), (
            f"{run}, {role}: mean relative error per seed {study.seeds}: {'; '.join(parts)}; the over-range values of "
            f"a saturating call lose {_per_seed(bits, '{:.2f}')} mantissa bits on average")

    return _row(spec, lambda: [study.run_telemetry(run, seed) for seed in study.seeds], measure)


def jitter_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, run: str, reference: str) -> Claim:
    """Row: the scale jitter (:func:`jitter_sums`) of ``run`` minus ``reference``'s, same seed, every role."""
    def measure(data: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[Estimate, str]:
        def sums(rows: Sequence[Mapping[str, Any]]) -> StepSums:
            return step_sums(jitter_sums(rows), lambda r: {"j": r["jitter"], "m": 1.0})

        pairs = [(sums(a), sums(b)) for a, b in _pairs(data)]
        means = "; ".join(f"{a.columns['j'].sum() / a.columns['m'].sum():.3g} vs "
                          f"{b.columns['j'].sum() / b.columns['m'].sum():.3g}" for a, b in pairs)
        estimate = step_estimate([paired_steps(a, b) for a, b in pairs],
                                 lambda s: fraction(s, "j_a", "m_a") - fraction(s, "j_b", "m_b"), settings)
        return estimate, f"mean |delta log2 scale| per call, per seed {study.seeds}: {means} ({run} vs {reference})"

    return _row(spec, lambda: [a for seed in study.seeds
                               for a in (study.run_telemetry(run, seed), study.run_telemetry(reference, seed))],
                measure)


Row = Callable[[ClaimSpec, Study, Evidence], Claim]


def forgetting_claim(spec: ClaimSpec, study: Study, settings: Evidence, *, row: Row) -> Claim:
    """Row: ``row`` (a forgetting comparison, high vs low learning rate) with the regime it rests on added to its
    detail and evidence when it has an estimate: how much the low rate keeps of the pretraining corpus,
    :func:`perplexity_change` of bf16-lrlow vs the base model there (module docstring)."""
    claim = row(spec, study, settings)
    if claim.estimate is None:
        return claim
    artifacts = [study.evaluation(*model, seed, "pretrain") for seed in study.seeds for model in (LOW_RATE, BASE)]
    kept = perplexity_change(_pairs([a.data for a in artifacts]), settings, names=(_label(LOW_RATE), _label(BASE)))
    regime = (f"regime the forgetting comparison rests on: the low learning rate keeps the pretraining corpus, "
              f"{_label(LOW_RATE)} vs {_label(BASE)} on its test split, P_low / P_base - 1 = {kept.value:+.1%} "
              f"({kept.level:.0%} interval [{kept.low:+.1%}, {kept.high:+.1%}], {kept.method})")
    evidence = tuple(dict.fromkeys([*claim.evidence, *(a.path for a in artifacts)]))
    return replace(claim, detail=f"{claim.detail}; {regime}", evidence=evidence)


def claim_rows(config: Mapping[str, Any]) -> dict[str, Row]:
    """The computation of every claim id of ``config.yaml``, in the report's order (the config's order too; the
    config reaches the claims step as canonical, key-sorted JSON). Comparisons of trained models evaluate both in
    BF16 (the paper's evaluation) unless the id says ``hif8``."""
    warmup = config["bf16_warmup_steps"]
    recipe_run = recipe(config)
    most_recent, current = f"most_recent-lrlow-w{warmup}", f"current-lrlow-w{warmup}"
    bf16_low, bf16_high = LOW_RATE, ("bf16", "bf16-lrhigh")
    def bf16(run: str) -> Model:
        """A trained run evaluated as trained (its latent weights, unquantized)."""
        return ("bf16", run)

    pretrain = partial(perplexity_claim, corpus="pretrain")
    control = control_run(config, "coarse_scale")  # the negative control of the near-lossless bounds

    def forgets(row: Row) -> Row:
        return partial(forgetting_claim, row=row)

    return {
        "most_recent_saturates": partial(saturation_claim, run=most_recent),
        "saturation_raises_error": partial(error_ratio_claim, run=most_recent, role="input"),
        "saturating_loss_ape": partial(loss_ape_claim, run=most_recent, reference=bf16_low[1]),
        **{f"max_window_saturates_less_{role}": partial(saturation_difference_claim, run=recipe_run,
                                                         reference=most_recent, roles=(role,)) for role in ROLES},
        "recipe_saturates_rarely_input": partial(saturation_claim, run=recipe_run, roles=("input",)),
        "recipe_saturates_on_weight_drift": partial(saturation_claim, run=recipe_run, roles=("weight",)),
        "recipe_loss_ape": partial(loss_ape_claim, run=recipe_run, reference=bf16_low[1]),
        "recipe_pretrain_perplexity": partial(pretrain, treated=bf16(recipe_run), reference=bf16_low),
        "recipe_shift_perplexity": partial(perplexity_claim, treated=bf16(recipe_run), reference=bf16_low,
                                           corpus="shift"),
        "recipe_pretrain_perplexity_hif8": partial(pretrain, treated=("hif8", recipe_run), reference=bf16_low),
        "recipe_cloze_acc": partial(accuracy_claim, treated=bf16(recipe_run), reference=bf16_low, task="cloze"),
        "recipe_choice_acc_norm": partial(accuracy_claim, treated=bf16(recipe_run), reference=bf16_low,
                                          task="choice"),
        "forgets_bf16": forgets(partial(pretrain, treated=bf16_high, reference=bf16_low)),
        "forgets_current": forgets(partial(pretrain, treated=bf16(f"current-lrhigh-w{warmup}"),
                                           reference=bf16(current))),
        "forgets_bf16_cloze": forgets(partial(accuracy_claim, treated=bf16_high, reference=bf16_low, task="cloze")),
        "forgets_bf16_choice": forgets(partial(accuracy_claim, treated=bf16_high, reference=bf16_low, task="choice")),
        "forgetting_hidden_in_loss": forgets(partial(loss_change_claim, run=bf16_high[1], reference=bf16_low[1])),
        "ablation_high_lr": partial(pretrain, treated=bf16(f"max_window-lrhigh-w{warmup}"), reference=bf16(recipe_run)),
        "ablation_most_recent": partial(pretrain, treated=bf16(most_recent), reference=bf16(recipe_run)),
        "ablation_no_warmup": partial(pretrain, treated=bf16("max_window-lrlow-w0"), reference=bf16(recipe_run)),
        "cts_jitter": partial(jitter_claim, run=current, reference=recipe_run),
        "cts_hurts": partial(pretrain, treated=bf16(current), reference=bf16(recipe_run)),
        "exp_smooth_saturates": partial(saturation_difference_claim, run=f"exp_smooth-lrlow-w{warmup}",
                                        reference=recipe_run),
        "control_loss_ape": partial(loss_ape_claim, run=control, reference=bf16_low[1]),
        "control_loss_ape_saturating": partial(loss_ape_claim, run=control, reference=bf16_low[1]),
        "control_pretrain_perplexity": partial(pretrain, treated=bf16(control), reference=bf16_low),
        "control_shift_perplexity": partial(perplexity_claim, treated=bf16(control), reference=bf16_low,
                                            corpus="shift"),
        "control_pretrain_perplexity_hif8": partial(pretrain, treated=("hif8", control), reference=bf16_low),
        "control_cloze_acc": partial(accuracy_claim, treated=bf16(control), reference=bf16_low, task="cloze"),
        "control_choice_acc_norm": partial(accuracy_claim, treated=bf16(control), reference=bf16_low,
                                           task="choice"),
        "control_ablation_pretrain": partial(pretrain, treated=bf16(control), reference=bf16(recipe_run)),
        "control_most_recent_saturates_input": partial(saturation_claim, run=most_recent, roles=("input",)),
    }


# --- implementation checks ------------------------------------------------------------------------------------


def observer_checks(cell: Mapping[str, Any], path: str) -> list[Check]:
    """The synthetic observer study's exact properties (``path``: its artifact): on equal spikes every ``period``
    steps, most_recent saturates at every spike and max_window at none after the first when ``period <= window``
    (the premise of the guarantee); current never saturates on any trace."""
    spikes = {row["observer"]: row for row in cell["rows"] if row["kind"] == "spikes"}
    period = TRACE_OPTIONS["spikes"]["period"]
    window = make_observer("max_window", **cell["observer_options"].get("max_window", {})).window
    mr, mw = spikes["most_recent"], spikes["max_window"]
    checks = [Check("synthetic_most_recent_every_spike",
                    f"most_recent (one-step lag) saturates at every equal spike recurring every {period} steps",
                    f"{mr['spike_saturations']} of {mr['spike_count']} spikes", mr["spike_saturations"] ==
                    mr["spike_count"], (path,))]
    if period <= window:
        recurring = mw["recurring_spike_saturations"]
        checks.append(Check("synthetic_max_window_no_recurring_saturation",
                            f"max_window (window {window}) saturates at no spike after the first when equal spikes "
                            f"recur every {period} steps",
                            f"{recurring} of {max(mw['spike_count'] - 1, 0)} spikes after the first", recurring == 0,
                            (path,)))
    current = {row["kind"]: row["saturation_events"] for row in cell["rows"] if row["observer"] == "current"}
    checks.append(Check("synthetic_current_never_saturates", "current tensor scaling (the step's own amax) "
                        "saturates on no trace", ", ".join(f"{k} {v}" for k, v in current.items()),
                        not any(current.values()), (path,)))
    return checks


def telemetry_check(cell: Cell, telemetry: Artifact, saturation: Artifact, warmup: int, steps: int,
                    calls: int, delayed: bool = True) -> Check:
    """Cell ``(run, seed)``'s telemetry accounts for every layer, role, HiF8 step and call: each (layer, role)
    exactly ``calls`` times (one per micro-batch: ``grad_accum``) at every step ``warmup .. steps - 1``, cold starts
    only at ``warmup`` for a ``delayed`` observer (:attr:`common.observers.Observer.delayed`; none for current
    scaling), and ``saturation.json`` counts the same calls and saturations per role."""
    rows = telemetry.data
    expected = sorted(t for t in range(warmup, steps) for _ in range(calls))
    seen: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        seen.setdefault((row["layer"], row["role"]), []).append(row["step"])
    roles = sorted({role for _, role in seen})
    layers = sorted({layer for layer, _ in seen})
    complete = roles == sorted(ROLES) and all(sorted(seen.get((layer, role), [])) == expected
                                              for layer in layers for role in roles)
    cold = sorted({row["step"] for row in rows if row["cold_start"]})
    agree = set(saturation.data) == set(ROLES)
    for role in ROLES:
        mine = [row for row in rows if row["role"] == role and not row["cold_start"]]
        rate = sum(row["overflow"] for row in mine) / len(mine) if mine else 0.0
        summary = saturation.data.get(role, {})
        agree = agree and summary.get("calls") == len(mine) and summary.get("overflow_rate") == rate
    measured = (f"{len(rows)} rows = {len(layers)} layers x {len(roles)} roles x {calls} calls x steps "
                f"{min(r['step'] for r in rows) if rows else '-'}..{max(r['step'] for r in rows) if rows else '-'} "
                f"(expected {warmup}..{steps - 1}); cold starts at steps {cold}; saturation.json "
                f"{'agrees' if agree else 'disagrees'}")
    run, seed = cell
    cold_starts = "cold starts at the warmup step only" if delayed else "no cold start (current scaling)"
    return Check(f"telemetry_accounts_{run.replace('-', '_')}_seed{seed}", f"{run} (seed {seed})'s telemetry has "
                 f"every layer and role {calls} times per HiF8 step, {cold_starts}, and saturation.json counts the "
                 "same", measured, complete and cold == ([warmup] if delayed else []) and agree,
                 (telemetry.path, saturation.path))


def pairing_checks(evaluations: Mapping[str, Artifact]) -> list[Check]:
    """Every model compared was scored on the same windows of each corpus and on the same number of zero-shot
    examples of each task (the pairing of the bootstrap)."""
    checks = []
    for corpus in CORPORA:
        records = {k: a for k, a in evaluations.items() if k.endswith(f"/{corpus}")}
        windows = {tuple(a.data["metrics"]["perplexity"]["window_tokens"]) for a in records.values()}
        checks.append(Check(f"same_windows_{corpus}", f"every model is scored on the same windows of the {corpus} "
                            "corpus's test split", f"{len(records)} records, {len(windows)} distinct window lists "
                            f"({', '.join(f'{len(w)} windows' for w in sorted(windows))})", len(windows) == 1,
                            tuple(a.path for a in records.values())))
    pretrain = {k: a for k, a in evaluations.items() if k.endswith("/pretrain")}
    for task, fields in TASK_ACCURACY.items():
        sizes = {len(a.data["metrics"][task][fields.per_example]) for a in pretrain.values()}
        checks.append(Check(f"same_examples_{task}", f"every model answers the same number of {task} examples",
                            f"{len(pretrain)} records, example counts {sorted(sizes)}", len(sizes) == 1,
                            tuple(a.path for a in pretrain.values())))
    return checks


def unit_score_check(evaluations: Mapping[str, Artifact]) -> Check:
    """The per-unit scores the bootstrap resamples make the recorded metrics
    (:func:`common.eval.scores.score_mismatches`): ``exp(sum nll / sum tokens)`` is the perplexity and the tokens add
    up, per-example correctness adds up to the correct counts of :data:`TASK_ACCURACY`."""
    wrong = [m for key, artifact in sorted(evaluations.items())
             for m in score_mismatches(key, artifact.data, TASK_ACCURACY)]
    return Check("unit_scores_make_the_metrics", "the per-window and per-example scores add up to every recorded "
                 "perplexity and correct count", "; ".join(wrong) or f"{len(evaluations)} records agree", not wrong,
                 tuple(a.path for _, a in sorted(evaluations.items())))


def study_checks(study: Study) -> list[Check]:
    """Every implementation check of the study (module docstring)."""
    train = study.config["train"]
    warmup, steps, calls = study.config["bf16_warmup_steps"], train["max_steps"], train.get("grad_accum", 1)
    telemetry = [telemetry_check((run, seed), study.run_telemetry(run, seed), study.saturation[run, seed], warmup,
                                 steps, calls, OBSERVERS[run_settings(study.config, run)["observer"]].delayed)
                 for run in telemetry_runs(study.config) for seed in study.seeds]
    return [*observer_checks(study.observers.data, study.observers.path), *telemetry,
            *pairing_checks(study.evaluations), unit_score_check(study.evaluations)]


def claims(specs: Mapping[str, ClaimSpec], study: Study, evidence: Evidence) -> ClaimsResult:
    """The claims table (:data:`common.report.PaperClaims`): every row of ``specs`` in the order of
    :func:`claim_rows` and every check of :func:`study_checks`; ValueError naming a spec without a computation or a
    computation without a spec."""
    rows = claim_rows(study.config)
    unknown, missing = [c for c in specs if c not in rows], [c for c in rows if c not in specs]
    if unknown or missing:
        raise ValueError(f"maxwindow_hif8.claims: no computation for {unknown or 'nothing'}, no spec for "
                         f"{missing or 'nothing'}")
    return ClaimsResult([row(specs[cid], study, evidence) for cid, row in rows.items()], study_checks(study))
