"""The claims table of the Max-Window paper: per row of ``config.yaml`` ``claims:`` (the prediction, fixed before
the data) an estimate with its interval, made from the artifacts of the runs compared, and the verdict by the one
rule of :mod:`common.report.claims`; what holds by construction is an implementation check.

Statistics (W = ``bf16_warmup_steps``; the recipe is ``max_window-lrlow-wW``; HiF8 models are evaluated after
checkpoint quantization, BF16 ones as trained):

* relative perplexity change of model ``a`` vs ``b`` on one corpus's test split, ``P_a / P_b - 1`` with
  ``P = exp(sum_j nll_j / sum_j tokens_j)`` over the evaluation windows ``j`` (:func:`perplexity_change`);
* relative accuracy drop ``(acc_b - acc_a) / acc_b = 1 - C_a / C_b`` with ``C`` the correct answers over the same
  examples (cloze ``acc``, choice ``acc_norm``: :func:`accuracy_drop`);
* training-loss APE ``mean_{t >= W} |L_t - L_t^BF16| / L_t^BF16`` over the steps with HiF8 on (:func:`loss_ape`);
* the fraction of saturating layer-steps ``f = sum_t o_t / sum_t c_t`` with ``c_t`` the layer-steps of step ``t``
  with a delayed scale (cold starts excluded) and ``o_t`` those whose amax exceeded the predicted amax
  (:func:`saturation_fraction`), and the difference ``f_a - f_b`` of two runs on the same steps
  (:func:`saturation_difference`).

Intervals: the first two by the paired bootstrap over the windows / examples (every model compared was scored on
the same windows of the same split, and on the same examples); the last two by the circular block bootstrap over
training steps (:func:`common.uncertainty.block_bootstrap`: steps are serially dependent), both with the workflow's
:class:`common.uncertainty.Evidence` settings. Each run is one training seed, so no interval holds seed-to-seed
variation; every method string says so. The statistics take the artifacts of the runs they compare
(:class:`StudyArtifacts`), so that seeds (issue 14) can pair them seed by seed.

The forgetting rows compare the high learning rate with the low one; how much the low rate keeps of the pretraining
corpus is the regime that comparison rests on, so each of them shows it in its detail (:func:`forgetting_claim`):
``P_low / P_base - 1`` of bf16-lrlow vs the base model on the pretraining corpus, by the same paired bootstrap. It
is no claim of its own: no threshold for it was fixed before the data (issue 14 re-picks the learning rates so that
the low one keeps the pretraining corpus by design).

Saturation is *scale-induced*: a layer-step saturates when its amax exceeds the amax its delayed scale was predicted
from (``overflow`` in the telemetry). With ``max_val = 15`` and HiF8's largest finite value 2^15 the format itself
clips nothing until a value reaches about 2000x the prediction.

Implementation checks (:func:`study_checks`): the synthetic observer study's exact properties, the telemetry's
accounting for every layer, role and step, the pairing of the evaluations and the per-unit scores adding up to the
recorded metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from common.analysis.observer_study import TRACE_OPTIONS
from common.eval.scores import ACCURACY, example_correct, score_mismatches, window_columns
from common.io import read_json
from common.observers import make_observer
from common.qat import ROLES
from common.report import Check, Claim, ClaimSpec, judge
from common.uncertainty import Estimate, Evidence, log_perplexity, resample_counts

from .settings import run_names, run_settings
from .study import loss_errors, read_losses, read_telemetry

ONE_SEED = "; one training seed per model: evaluation sampling only, not seed-to-seed variation"
ONE_RUN = "; one training seed per run: variation along its trajectory, not seed-to-seed variation"
PRECISIONS = {"hif8": "HiF8", "bf16": "BF16"}
CORPORA = ("pretrain", "shift")
TASKS = {"cloze": ACCURACY["acc"], "choice": ACCURACY["acc_norm"]}  # the zero-shot task -> the accuracy claimed
LOW_RATE, BASE = ("bf16", "bf16-lrlow"), ("bf16", "base")  # the regime of the forgetting rows


class NotTestableError(Exception):
    """No estimate at this scale; the message is the reason the row states."""


@dataclass(frozen=True)
class Artifact:
    """One artifact a claim reads: its ``path`` (the row's evidence) and its parsed ``data``."""

    path: str
    data: Any


@dataclass(frozen=True)
class StudyArtifacts:
    """The artifacts of the runs of the grid ``config`` (``settings.run_names``): evaluation records by
    ``"<precision>/<run>/<role>"`` (run ``base``: the model before continual pretraining), training losses
    ``{step: loss}`` by run, telemetry rows and ``saturation.json`` by run (:func:`telemetry_runs` only). One
    artifact per run: one seed."""

    config: Mapping[str, Any]
    evaluations: Mapping[str, Artifact]
    losses: Mapping[str, Artifact]
    telemetry: Mapping[str, Artifact]
    saturation: Mapping[str, Artifact]

    @classmethod
    def read(cls, config: Mapping[str, Any], evaluations: Iterable[str], logs: Iterable[str],
             telemetry: Iterable[str]) -> StudyArtifacts:
        """Read the artifacts from their paths (layout in ``papers/maxwindow_hif8/__main__.py``): evaluations at
        ``.../<precision>/<run>/<role>.json``, logs and telemetry in ``.../<run>/``, each run's ``saturation.json``
        beside its telemetry; of the telemetry only :func:`telemetry_runs`'s is read."""
        wanted = telemetry_runs(config)
        tables: dict[str, dict[str, Artifact]] = {"evaluations": {}, "losses": {}, "telemetry": {}, "saturation": {}}
        for path in evaluations:
            tables["evaluations"]["/".join(Path(path).with_suffix("").parts[-3:])] = Artifact(path, read_json(path))
        for path in logs:
            tables["losses"][Path(path).parent.name] = Artifact(path, read_losses(path))
        for path in telemetry:
            run = Path(path).parent.name
            if run in wanted:
                summary = str(Path(path).with_name("saturation.json"))
                tables["telemetry"][run] = Artifact(path, read_telemetry(path))
                tables["saturation"][run] = Artifact(summary, read_json(summary))
        return cls(config, **tables)

    def _get(self, table: Mapping[str, Artifact], key: str, run: str, what: str) -> Artifact:
        if run != "base" and run not in run_names(self.config):
            observers = ", ".join(self.config["observers"])
            raise NotTestableError(f"this profile trains no run {run!r} (observers: {observers})")
        if key not in table:
            raise ValueError(f"run {run!r} has no {what} ({key!r} not among the artifacts read)")
        return table[key]

    def evaluation(self, precision: str, run: str, role: str) -> Artifact:
        """The evaluation record of ``run`` at ``precision`` on corpus ``role`` (NotTestableError: not in the grid)."""
        return self._get(self.evaluations, f"{precision}/{run}/{role}", run, "evaluation")

    def log(self, run: str) -> Artifact:
        """The training losses of ``run``."""
        return self._get(self.losses, run, run, "training log")

    def run_telemetry(self, run: str) -> Artifact:
        """The telemetry rows of ``run``."""
        return self._get(self.telemetry, run, run, "telemetry")


def telemetry_runs(config: Mapping[str, Any]) -> list[str]:
    """The runs whose telemetry the claims read: most_recent and max_window at the low rate with warmup."""
    warmup = config["bf16_warmup_steps"]
    grid = run_names(config)
    return [run for run in (f"most_recent-lrlow-w{warmup}", f"max_window-lrlow-w{warmup}") if run in grid]


# --- statistics -----------------------------------------------------------------------------------------------


def perplexity_change(treated: Mapping[str, Any], reference: Mapping[str, Any], settings: Evidence, *,
                      names: tuple[str, str]) -> Estimate:
    """``P_a / P_b - 1 = exp(S_nll^a / S_tok^a - S_nll^b / S_tok^b) - 1`` from two evaluation records (``names``:
    theirs, for the errors) scored on the same windows (ValueError otherwise), by the paired bootstrap over the
    windows."""
    a, b = names
    columns = window_columns(a, treated) | window_columns(b, reference)
    if not np.array_equal(columns[f"{a}.tokens"], columns[f"{b}.tokens"]):
        raise ValueError(f"{a} and {b}: perplexities scored on different windows ({columns[f'{a}.tokens'].size} vs "
                         f"{columns[f'{b}.tokens'].size} windows, or other token counts): no pairing")
    return settings.paired(columns, lambda s: np.expm1(log_perplexity(s, a) - log_perplexity(s, b)),
                           "evaluation windows")


def accuracy_drop(treated: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray,
                  settings: Evidence) -> Estimate:
    """``1 - C_a / C_b`` (the relative accuracy drop) from per-example correctness (0/1) on the same examples, by
    the paired bootstrap over the examples. NotTestableError when some resample holds none of the reference's correct
    answers (the drop is undefined there), e.g. a tiny model answering almost nothing."""
    a, b = np.asarray(treated, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"accuracies on different examples: {a.shape} vs {b.shape}")
    if (resample_counts(b.size, settings.resamples, settings.seed) @ b).min() == 0:
        raise NotTestableError(f"the reference answers {int(b.sum())} of {b.size} examples correctly and some "
                               "bootstrap resamples hold none of them: a relative drop is undefined there")
    return settings.paired({"a": a, "b": b}, lambda s: 1 - s["a"] / s["b"], "examples")


def loss_ape(errors: Mapping[int, float], settings: Evidence) -> Estimate:
    """``mean_t |L_t - R_t| / R_t`` of the per-step relative errors ``errors`` (``study.loss_errors``, ascending
    steps; their mean is ``study.loss_ape``), by the circular block bootstrap over those steps."""
    return settings.blocks({"error": list(errors.values()), "steps": np.ones(len(errors))},
                           lambda s: s["error"] / s["steps"], "training steps")


@dataclass(frozen=True)
class StepCounts:
    """Per step with a delayed scale, ascending: ``calls`` (layer-steps, cold starts excluded) and ``saturating``
    (those whose amax exceeded the predicted amax)."""

    steps: np.ndarray
    saturating: np.ndarray
    calls: np.ndarray


def step_counts(rows: Iterable[Mapping[str, Any]], roles: Iterable[str] = ROLES) -> StepCounts:
    """The :class:`StepCounts` of telemetry rows of ``roles`` (ValueError if none has a delayed scale)."""
    wanted = set(roles)
    saturating: dict[int, int] = {}
    calls: dict[int, int] = {}
    for row in rows:
        if row["role"] in wanted and not row["cold_start"]:
            calls[row["step"]] = calls.get(row["step"], 0) + 1
            saturating[row["step"]] = saturating.get(row["step"], 0) + bool(row["overflow"])
    if not calls:
        raise ValueError(f"no telemetry row of roles {sorted(wanted)} with a delayed scale")
    steps = sorted(calls)
    return StepCounts(np.array(steps), np.array([saturating[t] for t in steps], dtype=np.float64),
                      np.array([calls[t] for t in steps], dtype=np.float64))


def saturation_fraction(counts: StepCounts, settings: Evidence) -> Estimate:
    """``sum_t o_t / sum_t c_t`` by the circular block bootstrap over the steps."""
    return settings.blocks({"o": counts.saturating, "c": counts.calls}, lambda s: s["o"] / s["c"], "HiF8 steps")


def saturation_difference(treated: StepCounts, reference: StepCounts, settings: Evidence) -> Estimate:
    """``f_a - f_b`` of two runs on the same steps (ValueError otherwise), by the circular block bootstrap over the
    steps, the same blocks for both runs."""
    if not np.array_equal(treated.steps, reference.steps):
        raise ValueError(f"saturation counted on different steps ({treated.steps.tolist()} vs "
                         f"{reference.steps.tolist()}): no pairing")
    columns = {"oa": treated.saturating, "ca": treated.calls, "ob": reference.saturating, "cb": reference.calls}
    return settings.blocks(columns, lambda s: s["oa"] / s["ca"] - s["ob"] / s["cb"], "HiF8 steps")


# --- rows -----------------------------------------------------------------------------------------------------

Model = tuple[str, str]  # (precision, run)


def _label(model: Model) -> str:
    precision, run = model
    return "the base model" if run == "base" else f"{run} ({PRECISIONS[precision]})"


def _row(spec: ClaimSpec, read: Callable[[], Sequence[Artifact]], measure: Callable[..., tuple[Estimate, str]],
         note: str) -> Claim:
    """The row of ``spec``: ``read()`` the artifacts, ``measure(*their data)`` the estimate and its detail; either
    may raise :class:`NotTestableError` (the row keeps the reason); ``note`` extends the method string."""
    try:
        artifacts = read()
    except NotTestableError as reason:
        return judge(spec, None, reason=str(reason))
    evidence = [a.path for a in artifacts]
    try:
        estimate, detail = measure(*(a.data for a in artifacts))
    except NotTestableError as reason:
        return judge(spec, None, reason=str(reason), evidence=evidence)
    return judge(spec, replace(estimate, method=estimate.method + note), detail=detail, evidence=evidence)


def perplexity_claim(spec: ClaimSpec, study: StudyArtifacts, settings: Evidence, *, treated: Model,
                     reference: Model, corpus: str) -> Claim:
    """Row: :func:`perplexity_change` of ``treated`` vs ``reference`` on ``corpus`` (``pretrain`` or ``shift``)."""
    def measure(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Estimate, str]:
        estimate = perplexity_change(a, b, settings, names=(_label(treated), _label(reference)))
        ga, gb = a["metrics"]["perplexity"], b["metrics"]["perplexity"]
        return estimate, (f"perplexity {ga['perplexity']:.4g} for {_label(treated)} vs {gb['perplexity']:.4g} for "
                          f"{_label(reference)} on the {corpus} corpus's test split ({len(ga['window_tokens'])} "
                          f"windows, {sum(ga['window_tokens'])} tokens)")

    return _row(spec, lambda: [study.evaluation(*treated, corpus), study.evaluation(*reference, corpus)], measure,
                ONE_SEED)


def accuracy_claim(spec: ClaimSpec, study: StudyArtifacts, settings: Evidence, *, treated: Model,
                   reference: Model, task: str) -> Claim:
    """Row: :func:`accuracy_drop` of ``treated`` vs ``reference`` on zero-shot ``task`` (``cloze``: acc,
    ``choice``: acc_norm) of the pretraining corpus."""
    fields = TASKS[task]

    def measure(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Estimate, str]:
        ca, cb = example_correct(_label(treated), a, task, fields), example_correct(_label(reference), b, task, fields)
        detail = (f"{task} {fields.metric}: {int(ca.sum())} of {ca.size} examples for {_label(treated)} vs "
                  f"{int(cb.sum())} of {cb.size} for {_label(reference)}")
        return accuracy_drop(ca, cb, settings), detail

    return _row(spec, lambda: [study.evaluation(*treated, "pretrain"), study.evaluation(*reference, "pretrain")],
                measure, ONE_SEED)


def loss_ape_claim(spec: ClaimSpec, study: StudyArtifacts, settings: Evidence, *, run: str, reference: str
                   ) -> Claim:
    """Row: :func:`loss_ape` of ``run`` vs ``reference`` over the steps from ``run``'s warmup on."""
    def measure(losses: Mapping[int, float], base: Mapping[int, float]) -> tuple[Estimate, str]:
        errors = loss_errors(losses, base, run_settings(study.config, run)["warmup_steps"])
        first, last = min(errors), max(errors)
        return loss_ape(errors, settings), (f"training loss of {run} vs {reference} at steps {first}..{last}: "
                                            f"final {losses[last]:.4f} vs {base[last]:.4f}")

    return _row(spec, lambda: [study.log(run), study.log(reference)], measure, ONE_RUN)


def saturation_claim(spec: ClaimSpec, study: StudyArtifacts, settings: Evidence, *, run: str) -> Claim:
    """Row: :func:`saturation_fraction` of ``run`` over every tensor role."""
    def measure(rows: Sequence[Mapping[str, Any]]) -> tuple[Estimate, str]:
        counts = step_counts(rows)
        return saturation_fraction(counts, settings), (
            f"{run}: {int(counts.saturating.sum())} of {int(counts.calls.sum())} layer-steps saturate "
            f"(steps {counts.steps[0]}..{counts.steps[-1]}, roles {', '.join(ROLES)})")

    return _row(spec, lambda: [study.run_telemetry(run)], measure, ONE_RUN)


def saturation_difference_claim(spec: ClaimSpec, study: StudyArtifacts, settings: Evidence, *, run: str,
                                reference: str, role: str) -> Claim:
    """Row: :func:`saturation_difference` of ``run`` minus ``reference`` for tensor ``role``."""
    def measure(rows: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]]) -> tuple[Estimate, str]:
        a, b = step_counts(rows, [role]), step_counts(other, [role])
        return saturation_difference(a, b, settings), (
            f"saturating {role} layer-steps: {int(a.saturating.sum())} of {int(a.calls.sum())} for {run} vs "
            f"{int(b.saturating.sum())} of {int(b.calls.sum())} for {reference}")

    return _row(spec, lambda: [study.run_telemetry(run), study.run_telemetry(reference)], measure, ONE_RUN)


Row = Callable[[ClaimSpec, StudyArtifacts, Evidence], Claim]


def forgetting_claim(spec: ClaimSpec, study: StudyArtifacts, settings: Evidence, *, row: Row) -> Claim:
    """Row: ``row`` (a forgetting comparison, high vs low learning rate) with the regime it rests on added to its
    detail and evidence when it has an estimate: how much the low rate keeps of the pretraining corpus,
    :func:`perplexity_change` of bf16-lrlow vs the base model there (module docstring)."""
    claim = row(spec, study, settings)
    if claim.estimate is None:
        return claim
    low, base = study.evaluation(*LOW_RATE, "pretrain"), study.evaluation(*BASE, "pretrain")
    kept = perplexity_change(low.data, base.data, settings, names=(_label(LOW_RATE), _label(BASE)))
    regime = (f"regime the forgetting comparison rests on: the low learning rate keeps the pretraining corpus, "
              f"{_label(LOW_RATE)} vs {_label(BASE)} on its test split, P_low / P_base - 1 = {kept.value:+.1%} "
              f"({kept.level:.0%} interval [{kept.low:+.1%}, {kept.high:+.1%}], {kept.method}{ONE_SEED})")
    evidence = tuple(dict.fromkeys([*claim.evidence, low.path, base.path]))
    return replace(claim, detail=f"{claim.detail}; {regime}", evidence=evidence)


def claim_rows(warmup: int) -> dict[str, Row]:
    """The computation of every claim id of ``config.yaml`` (``warmup`` = ``bf16_warmup_steps``), in the report's
    order (the config's order too; the config reaches the claims step as canonical, key-sorted JSON)."""
    recipe, most_recent = ("hif8", f"max_window-lrlow-w{warmup}"), ("hif8", f"most_recent-lrlow-w{warmup}")
    bf16_low, bf16_high = LOW_RATE, ("bf16", "bf16-lrhigh")
    pretrain = partial(perplexity_claim, corpus="pretrain")

    def forgets(row: Row) -> Row:
        return partial(forgetting_claim, row=row)

    return {
        "most_recent_saturates": partial(saturation_claim, run=most_recent[1]),
        "saturating_loss_ape": partial(loss_ape_claim, run=most_recent[1], reference=bf16_low[1]),
        **{f"max_window_saturates_less_{role}": partial(saturation_difference_claim, run=recipe[1],
                                                         reference=most_recent[1], role=role) for role in ROLES},
        "recipe_loss_ape": partial(loss_ape_claim, run=recipe[1], reference=bf16_low[1]),
        "recipe_pretrain_perplexity": partial(pretrain, treated=recipe, reference=bf16_low),
        "recipe_shift_perplexity": partial(perplexity_claim, treated=recipe, reference=bf16_low, corpus="shift"),
        "recipe_cloze_acc": partial(accuracy_claim, treated=recipe, reference=bf16_low, task="cloze"),
        "recipe_choice_acc_norm": partial(accuracy_claim, treated=recipe, reference=bf16_low, task="choice"),
        "forgets_bf16": forgets(partial(pretrain, treated=bf16_high, reference=bf16_low)),
        "forgets_current": forgets(partial(pretrain, treated=("hif8", f"current-lrhigh-w{warmup}"),
                                           reference=("hif8", f"current-lrlow-w{warmup}"))),
        "forgets_bf16_cloze": forgets(partial(accuracy_claim, treated=bf16_high, reference=bf16_low, task="cloze")),
        "forgets_bf16_choice": forgets(partial(accuracy_claim, treated=bf16_high, reference=bf16_low, task="choice")),
        "ablation_high_lr": partial(pretrain, treated=("hif8", f"max_window-lrhigh-w{warmup}"), reference=recipe),
        "ablation_most_recent": partial(pretrain, treated=most_recent, reference=recipe),
        "ablation_no_warmup": partial(pretrain, treated=("hif8", "max_window-lrlow-w0"), reference=recipe),
    }


def study_claims(specs: Mapping[str, ClaimSpec], study: StudyArtifacts, settings: Evidence) -> list[Claim]:
    """Every row of ``specs`` (``claim_specs(config["claims"])``) in the order of :func:`claim_rows`; ValueError
    naming a spec without a computation or a computation without a spec."""
    rows = claim_rows(study.config["bf16_warmup_steps"])
    unknown, missing = [c for c in specs if c not in rows], [c for c in rows if c not in specs]
    if unknown or missing:
        raise ValueError(f"maxwindow_hif8.claims: no computation for {unknown or 'nothing'}, no spec for "
                         f"{missing or 'nothing'}")
    return [row(specs[cid], study, settings) for cid, row in rows.items()]


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


def telemetry_check(run: str, telemetry: Artifact, saturation: Artifact, warmup: int, steps: int) -> Check:
    """``run``'s telemetry accounts for every layer, role and HiF8 step: each (layer, role) exactly once at every
    step ``warmup .. steps - 1``, cold starts exactly at ``warmup``, and ``saturation.json`` counts the same calls
    and saturations per role."""
    rows = telemetry.data
    expected = list(range(warmup, steps))
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
    measured = (f"{len(rows)} rows = {len(layers)} layers x {len(roles)} roles x steps "
                f"{min(r['step'] for r in rows) if rows else '-'}..{max(r['step'] for r in rows) if rows else '-'} "
                f"(expected {warmup}..{steps - 1}); cold starts at steps {cold}; saturation.json "
                f"{'agrees' if agree else 'disagrees'}")
    return Check(f"telemetry_accounts_{run.replace('-', '_')}", f"{run}'s telemetry has every layer, role and HiF8 "
                 "step once, cold starts at the warmup step only, and saturation.json counts the same", measured,
                 complete and cold == [warmup] and agree, (telemetry.path, saturation.path))


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
    for task, fields in TASKS.items():
        sizes = {len(a.data["metrics"][task][fields.per_example]) for a in pretrain.values()}
        checks.append(Check(f"same_examples_{task}", f"every model answers the same number of {task} examples",
                            f"{len(pretrain)} records, example counts {sorted(sizes)}", len(sizes) == 1,
                            tuple(a.path for a in pretrain.values())))
    return checks


def unit_score_check(evaluations: Mapping[str, Artifact]) -> Check:
    """The per-unit scores the bootstrap resamples make the recorded metrics
    (:func:`common.eval.scores.score_mismatches`): ``exp(sum nll / sum tokens)`` is the perplexity and the tokens add
    up, per-example correctness adds up to the correct counts of :data:`TASKS`."""
    wrong = [m for key, artifact in sorted(evaluations.items()) for m in score_mismatches(key, artifact.data, TASKS)]
    return Check("unit_scores_make_the_metrics", "the per-window and per-example scores add up to every recorded "
                 "perplexity and correct count", "; ".join(wrong) or f"{len(evaluations)} records agree", not wrong,
                 tuple(a.path for _, a in sorted(evaluations.items())))


def study_checks(study: StudyArtifacts, cell: Mapping[str, Any], cell_path: str) -> list[Check]:
    """Every implementation check of the study (module docstring)."""
    warmup, steps = study.config["bf16_warmup_steps"], study.config["train"]["max_steps"]
    telemetry = [telemetry_check(run, study.run_telemetry(run), study.saturation[run], warmup, steps)
                 for run in telemetry_runs(study.config)]
    return [*observer_checks(cell, cell_path), *telemetry, *pairing_checks(study.evaluations),
            unit_score_check(study.evaluations)]
