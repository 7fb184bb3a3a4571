"""The claims table of the WinQ paper as evidence: every row an estimate with its 95% interval, computed from the
artifacts, and a verdict by the fixed rule of :mod:`common.report.claims`; the identities apart, as checks.

The predictions are the config's ``claims:`` (``papers/winq/config.yaml``, validated by
``workflow/schemas/claims.schema.yaml``). A row's id says what the code computes: the ids of :data:`FIXED_ROWS`, and
``<prefix>_<setting>`` for each prefix of :data:`PER_SETTING_ROWS` and each study setting that compares WinQ with
the baseline (the setting's name with ``.`` written ``_``: ``winq_lower_perplexity_w1_58``). A claim the paper states
per setting (its results table) is one row per setting; a claim about the method in general (the ablation, the
mechanisms, the zero-shot average) is one pooled row over the config's ``pooled_settings`` that compare its methods.

Seeds. Every comparison pairs the runs by seed (the two runs of seed ``k`` share their data order, initialisation
and, for two noisy methods, noise): the row's statistic is computed per seed, ``d_k``, over the seeds every run it
reads was trained on, and its estimate is the seed mean ``d = mean_k d_k`` with
:func:`common.uncertainty.seed_interval`: a t-interval over seeds widened by the evaluation sampling the seeds share,
``shared``, a paired percentile bootstrap (:meth:`common.uncertainty.Evidence.paired`) of ``d`` itself over the
units every cell was scored on, the same draw for every seed and model:

* perplexity at equal budget, over the test-evaluation windows (every model scores the same windows: checked). With
  ``P_c = exp(S_nll,c / S_tokens,c)`` from the resampled window sums of cell ``c``, the improvement of model ``m``
  over the reference ``r`` is ``100 (1 - P_m / P_r)`` percent;
* zero-shot accuracy, over the task's examples: ``100 (S_correct,m - S_correct,r) / n`` accuracy points;
* Hessian spectra, over the SLQ probes. Every spectrum draws its start vectors from one generator seeded alike in one
  dimension (checked), so probe ``p`` starts from the same vector in every cell: the probes pair across cells and
  seeds. Per probe, its largest |Ritz value| ``max_k |theta_pk|`` and its masses ``sum tau_pk`` over
  ``|theta_pk| < c`` (near zero), ``theta_pk <= -c`` (negative) and ``theta_pk >= c`` (positive), ``c`` the paper's
  absolute threshold (``hessian.near_zero_abs``, 1e-3) or the cell's relative one; a cell's value is their mean over
  probes, through :data:`SPECTRUM`'s transform (percent, or ``ln`` of the largest |eigenvalue|).

Trajectory statistics (the gradient norm from ``train_log.csv``, the validation curve, the speedup, and the
diagnostics of :mod:`.diagnostics`: the authors' relative gradient norm from ``stagnation.jsonl``, the
codes changed and the latent weights near a code boundary per interpolation period from ``mechanism.jsonl``) have no
shared evaluation units (``eval_log.csv`` keeps one perplexity per evaluation, a cell's steps are its own, the
diagnostics are measured on the cell's own weights): their interval is the t-interval over seeds alone, and one seed
leaves them not testable. With one seed an evaluation row has the
shared interval alone, labelled "1 seed".

The speedup per seed is the same seed's baseline steps to its final validation perplexity over WinQ's; a seed whose
WinQ never gets there counts as reaching it at the first evaluation after the run (``max_steps + eval_every``), the
speedup most favourable to WinQ that the curve allows (stated in the detail, with the resolution of the evaluation
grid near the threshold).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from common.eval.scores import TASK_ACCURACY, example_correct, score_mismatches, window_columns
from common.qat.seeds import seed_cell
from common.report import Check, Claim, ClaimSpec, ClaimsResult, judge
from common.uncertainty import Evidence, Sums, perplexity, seed_estimate, trajectory_estimate

from .study import cell_of, hessian_of, improvement, row_of

PERCENT = 100.0
TOLERANCE = 1e-9  # relative: a recomputed float identity (sums in another order) holds to this
HADAMARD_REASON = ("this profile's study has no Hadamard setting (one with hadamard true, e.g. w2h) comparing "
                   "WinQ with the baseline on the seeds. A rotation needs every quantized layer's input width a power "
                   "of two (the `tiny` base model; not `smoke`, MLP width 172, or `small`, 688), and the shared "
                   "checkpoint quantization (python -m common.ptq checkpoint with the learned recipe) refuses a "
                   "rotated checkpoint, whose effective weights Q(W H) H^T are not per-row codes of W: a rotated "
                   "setting needs an evaluation of its materialized effective weights first")
ONE_SEED = ("one training seed: a trajectory statistic (the training log, the validation curve) has no shared "
            "evaluation units to bootstrap, its interval is over seeds")


CLAIMS_CONFIG = ("claims", "coverage", "regime", "learning_rates", "train", "interpolation")  # read as they are


def claims_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a profile's study ``config`` the claims step reads (``--config-json``), alone: the predictions and
    the coverage table, the setting names, the regime card and the schedule its quantities are measured on
    (:func:`papers.winq.regime.regime_values`: learning rates, train fields, run lengths, interpolation)."""
    return {**{key: config[key] for key in CLAIMS_CONFIG}, "settings": list(config["settings"]),
            "train_steps": dict(config.get("train_steps") or {})}


@dataclass(frozen=True)
class Study:
    """What the claims read: the study's ``summary`` (:func:`papers.winq.study.study_summary`), each training cell's
    evaluation record (per-window and per-example scores; ``base`` too) and its checkpoint's
    ``quantization_config.json``, the paths the rows cite (``summary_path``; ``evaluation_paths``: cell -> its
    evaluation record), and ``configured_settings``: every setting of the config, in config order (a per-setting
    row each; one outside this profile's study is not testable)."""

    summary: Mapping[str, Any]
    evaluations: Mapping[str, Mapping[str, Any]]
    quantized: Mapping[str, Mapping[str, Any]]
    summary_path: str
    evaluation_paths: Mapping[str, str]
    configured_settings: Sequence[str]

    def evaluation(self, cell: str) -> Mapping[str, Any]:
        """The evaluation record of ``cell`` (ValueError naming a cell without one)."""
        if cell not in self.evaluations:
            raise ValueError(f"no evaluation record of {cell!r}; evaluated: {', '.join(self.evaluations)}")
        return self.evaluations[cell]

    def cited(self, cells: Sequence[str]) -> list[str]:
        """The evaluation records of ``cells``."""
        return [self.evaluation_paths[cell] for cell in cells]

    def setting(self, setting: str) -> Mapping[str, Any]:
        """The bit widths of a study setting (from its baseline's run row)."""
        return row_of(self.summary, f"{setting}-baseline")

    def compares(self, setting: str, *methods: str) -> bool:
        """Whether ``setting`` compares every one of ``methods`` (trained on every seed)."""
        return all(m in self.summary["compared"].get(setting, []) for m in methods)

    def seeds(self, runs: Sequence[str]) -> list[int]:
        """The seeds every one of ``runs`` was trained on."""
        sets = [set(self.summary["seeds"].get(run, [])) for run in runs]
        return sorted(set.intersection(*sets)) if sets else []


def setting_label(row: Mapping[str, Any]) -> str:
    """``W<bits>A<16|8>`` of a summary row (``+H`` with a Hadamard rotation)."""
    activations = "A16" if row["activation_bits"] is None else f"A{row['activation_bits']}"
    return f"W{row['bits']:g}{activations}{'+H' if row.get('hadamard') else ''}"


def claim_id(prefix: str, setting: str) -> str:
    """The id of a per-setting row: ``<prefix>_<setting>`` with ``.`` as ``_`` (the schema's ids are
    ``[a-z0-9_]+``)."""
    return f"{prefix}_{setting.replace('.', '_')}"


def not_testable(spec: ClaimSpec, reason: str, evidence: Sequence[str] = (), detail: str = "") -> Claim:
    """The row of ``spec`` without an estimate, for ``reason``."""
    return judge(spec, None, reason=reason, evidence=evidence, detail=detail)


def seeds_text(seeds: Sequence[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(str(s) for s in seeds)}"


def pooled_settings(study: Study, *methods: str) -> list[str]:
    """The pooled settings that compare every one of ``methods``."""
    return [s for s in study.summary["pooled_settings"] if study.compares(s, *methods)]


def no_settings(methods: Sequence[str], study: Study) -> str:
    return (f"no pooled setting ({', '.join(study.summary['pooled_settings']) or 'none in this study'}) compares "
            f"{' and '.join(methods)} on the seeds")


def trajectory_row(spec: ClaimSpec, study: Study, evidence: Evidence, values: Sequence[float], detail: str) -> Claim:
    """The row of a trajectory statistic from the summary, one value per seed: its t-interval over seeds
    (:func:`common.uncertainty.trajectory_estimate`); not testable on one seed (:data:`ONE_SEED`)."""
    if len(values) < 2:
        return not_testable(spec, ONE_SEED, [study.summary_path], detail)
    return judge(spec, trajectory_estimate(values, evidence), detail=detail, evidence=[study.summary_path])


def per_seed_text(seeds: Sequence[int], values: Sequence[float], fmt: str = "{:+.3g}") -> str:
    return "per seed " + ", ".join(f"{s}: {fmt.format(v)}" for s, v in zip(seeds, values, strict=True))


# ------------------------------------------------------------------------------------ perplexity at equal budget
def improvement_claim(spec: ClaimSpec, study: Study, evidence: Evidence, *, model: str, reference: str,
                      settings: Sequence[str]) -> Claim:
    """The test-perplexity improvement of ``model`` over ``reference`` at equal budget, in percent, averaged over
    ``settings`` per seed, ``d_k = (100 / |S|) sum_s (1 - P_{s-model/k} / P_{s-reference/k})``, and its seed mean
    with the seed interval widened by the paired bootstrap over the test windows."""
    if not settings:
        return not_testable(spec, no_settings((model, reference), study), [study.summary_path])
    runs = [f"{s}-{m}" for s in settings for m in (model, reference)]
    seeds = study.seeds(runs)
    pairs = {k: [(seed_cell(f"{s}-{model}", k), seed_cell(f"{s}-{reference}", k)) for s in settings] for k in seeds}
    cells = [c for k in seeds for pair in pairs[k] for c in pair]
    columns: dict[str, np.ndarray] = {}
    for cell in cells:
        columns |= window_columns(cell, study.evaluation(cell))

    def per_seed(sums: Sums, k: int) -> Any:
        return sum(PERCENT * improvement(perplexity(sums, m), perplexity(sums, r)) for m, r in pairs[k]) / len(settings)

    estimate, values = seed_estimate(columns, per_seed, seeds, evidence, "test windows")
    def mean_ppl(run: str) -> float:
        return float(np.mean([study.evaluation(seed_cell(run, k))["metrics"]["perplexity"]["perplexity"]
                              for k in seeds]))

    parts = [f"{setting_label(study.setting(s))}: test perplexity {mean_ppl(f'{s}-{reference}'):.2f} ({reference}) "
             f"-> {mean_ppl(f'{s}-{model}'):.2f} ({model}), mean over {seeds_text(seeds)}" for s in settings]
    detail = "; ".join(parts) + f"; {per_seed_text(seeds, values, '{:+.2f}%')}"
    return judge(spec, estimate, detail=detail, evidence=study.cited(cells))


def lower_perplexity(spec: ClaimSpec, study: Study, evidence: Evidence, setting: str) -> Claim:
    """WinQ's improvement over the baseline in one setting (:func:`improvement_claim`)."""
    return improvement_claim(spec, study, evidence, model="winq", reference="baseline", settings=[setting])


def pooled_improvement(spec: ClaimSpec, study: Study, evidence: Evidence, *, model: str, reference: str) -> Claim:
    """:func:`improvement_claim` averaged over the pooled settings that compare both methods."""
    return improvement_claim(spec, study, evidence, model=model, reference=reference,
                             settings=pooled_settings(study, model, reference))


def hadamard_improvement(spec: ClaimSpec, study: Study, evidence: Evidence) -> Claim:
    """WinQ's improvement over the baseline in the study's Hadamard settings (:func:`improvement_claim`); not
    testable, with the reason, when the study has none that compares the two."""
    settings = [s for s in study.summary["settings"] if study.setting(s).get("hadamard")
                and study.compares(s, "winq", "baseline")]
    if not settings:
        return not_testable(spec, HADAMARD_REASON, [study.summary_path])
    return improvement_claim(spec, study, evidence, model="winq", reference="baseline", settings=settings)


# ----------------------------------------------------------------------------------------------- zero-shot tasks
def zero_shot(spec: ClaimSpec, study: Study, evidence: Evidence, *, task: str) -> Claim:
    """WinQ's zero-shot accuracy minus the baseline's on ``task`` (:data:`TASK_ACCURACY`), in points, averaged over the
    pooled settings per seed, ``d_k = (100 / (|S| n)) sum_s (S_correct,s-winq/k - S_correct,s-baseline/k)``, its
    seed mean with the seed interval widened by the paired bootstrap over the task's ``n`` examples."""
    settings = pooled_settings(study, "winq", "baseline")
    if not settings:
        return not_testable(spec, no_settings(("winq", "baseline"), study), [study.summary_path])
    fields = TASK_ACCURACY[task]
    seeds = study.seeds([f"{s}-{m}" for s in settings for m in ("winq", "baseline")])
    pairs = {k: [(seed_cell(f"{s}-winq", k), seed_cell(f"{s}-baseline", k)) for s in settings] for k in seeds}
    cells = [c for k in seeds for pair in pairs[k] for c in pair]
    columns = {cell: example_correct(cell, study.evaluation(cell), task, fields) for cell in cells}
    n = len(columns[cells[0]])

    def per_seed(sums: Sums, k: int) -> Any:
        return sum(PERCENT * (sums[m] - sums[r]) / n for m, r in pairs[k]) / len(settings)

    estimate, values = seed_estimate(columns, per_seed, seeds, evidence, f"{task} examples")
    parts = [f"{setting_label(study.setting(s))}: {task} {fields.metric} "
             f"{np.mean([columns[seed_cell(f'{s}-baseline', k)].mean() for k in seeds]):.3f} (baseline) -> "
             f"{np.mean([columns[seed_cell(f'{s}-winq', k)].mean() for k in seeds]):.3f} (winq)" for s in settings]
    detail = "; ".join(parts) + f", mean over {seeds_text(seeds)}; {per_seed_text(seeds, values, '{:+.2f}')}"
    return judge(spec, estimate, detail=detail, evidence=study.cited(cells))


# --------------------------------------------------------------------------------------------------- the speedup
def speedup_resolution(baseline_steps: float, every: int, threshold: float) -> str:
    """The speedups the evaluation grid can show next to ``threshold``: of the grid ``S_b / (j e)`` (``S_b`` the
    baseline's steps, ``e`` the evaluation interval, ``j = 1, 2, ...``), the largest at or below ``threshold``
    (``j = ceil(k)``, ``k = S_b / (t e)``) and the smallest above it (``j = ceil(k) - 1``)."""
    j = max(1, math.ceil(baseline_steps / (threshold * every) - 1e-9))
    below = baseline_steps / (j * every)
    if j == 1:
        return (f"resolution: evaluated every {every} steps, the grid's largest speedup is {below:.3f}x (at most "
                f"{threshold:g}x: the threshold is not resolvable)")
    above = baseline_steps / ((j - 1) * every)
    return (f"resolution: evaluated every {every} steps, so the speedups next to {threshold:g}x are {below:.3f}x and "
            f"{above:.3f}x ({100 * (above / below - 1):.1f}% apart)")


def speedup(spec: ClaimSpec, study: Study, evidence: Evidence, setting: str) -> Claim:
    """The mean over seeds of WinQ's speedup to the same seed's baseline's final validation perplexity (module
    docstring: a seed that never gets there counts at ``max_steps + eval_every``), with its t-interval over seeds."""
    seeds = study.seeds([f"{setting}-winq", f"{setting}-baseline"])
    every, steps = study.summary["eval_every"], row_of(study.summary, f"{setting}-winq")["max_steps"]
    values, never, baseline_steps = [], [], []
    for k in seeds:
        winq, baseline = cell_of(study.summary, seed_cell(f"{setting}-winq", k)), cell_of(
            study.summary, seed_cell(f"{setting}-baseline", k))
        baseline_steps.append(baseline["steps_to_baseline"])
        if winq["speedup"] is None:
            never.append(k)
            values.append(baseline["steps_to_baseline"] / (steps + every))
        else:
            values.append(winq["speedup"])
    label = setting_label(study.setting(setting))
    detail = (f"{label}: the baseline reaches its final validation perplexity after "
              f"{', '.join(str(s) for s in baseline_steps)} steps ({seeds_text(seeds)}); WinQ's speedup "
              f"{per_seed_text(seeds, values, '{:.2f}x')}"
              + (f" (never reached by {seeds_text(never)}: counted at step {steps + every})" if never else "")
              + f"; {speedup_resolution(float(np.mean(baseline_steps)), every, spec.prediction.threshold)}")
    return trajectory_row(spec, study, evidence, values, detail)


# ------------------------------------------------------------------------------------------ the training dynamics
def trajectory_claim(spec: ClaimSpec, study: Study, evidence: Evidence, *, methods: Sequence[str],
                     statistic: Callable[[Mapping[str, Mapping[str, Any]]], float], what: str,
                     undefined: str = "no net change in the curve") -> Claim:
    """A statistic of the training cells themselves (no shared evaluation units): per seed ``k`` the mean over the
    pooled settings that compare ``methods`` of ``statistic({method: cell row})``, with the t-interval over seeds;
    not testable, saying why (``undefined``), when the statistic is not finite for some seed."""
    settings = pooled_settings(study, *methods)
    if not settings:
        return not_testable(spec, no_settings(methods, study), [study.summary_path])
    seeds = study.seeds([f"{s}-{m}" for s in settings for m in methods])
    per_setting = {s: [statistic({m: cell_of(study.summary, seed_cell(f"{s}-{m}", k)) for m in methods})
                       for k in seeds] for s in settings}
    if not all(math.isfinite(v) for vs in per_setting.values() for v in vs):
        return not_testable(spec, f"{what} is undefined for some seed ({undefined})", [study.summary_path])
    values = [float(np.mean([per_setting[s][i] for s in settings])) for i in range(len(seeds))]
    detail = "; ".join(f"{setting_label(study.setting(s))}: {what} {per_seed_text(seeds, per_setting[s], '{:.3g}')}"
                       for s in settings)
    return trajectory_row(spec, study, evidence, values, detail)


def grad_norm_decay(rows: Mapping[str, Mapping[str, Any]]) -> float:
    """The baseline's mean gradient norm over the last quarter / over the second quarter."""
    norms = rows["baseline"]["grad_norm"]
    return norms["last_quarter"] / norms["second_quarter"]


def late_share(rows: Mapping[str, Mapping[str, Any]]) -> float:
    """The share (%) of the baseline's validation log-perplexity reduction, first evaluation -> last, made in the
    last half of the run: ``100 ln(P_half / P_last) / ln(P_first / P_last)`` (NaN when there is no reduction)."""
    row = rows["baseline"]
    total = math.log(row["first_val_perplexity"] / row["final_val_perplexity"])
    if total <= 0:
        return math.nan
    return PERCENT * math.log(row["half_val_perplexity"] / row["final_val_perplexity"]) / total


def baseline_stall(rows: Mapping[str, Mapping[str, Any]]) -> float:
    """The baseline's stall ratio (:mod:`papers.winq.premise`, the cell's ``stall``); NaN where it is undefined
    (:data:`NO_STALL`)."""
    stall = rows["baseline"].get("stall")
    return math.nan if stall is None else stall


def noise_grad_norm(rows: Mapping[str, Mapping[str, Any]]) -> float:
    """``ln`` of noise-only's mean gradient norm over the last half of the run / the baseline's."""
    return math.log(rows["noise"]["grad_norm"]["last_half"] / rows["baseline"]["grad_norm"]["last_half"])


NO_STAGNATION = "no stagnation record (stagnation.jsonl), or no evaluation in the second or the last quarter"
NO_STALL = ("no mechanism record (mechanism.jsonl), fewer than two interpolation periods, or no code change in the "
            "first half")
NO_MECHANISM = ("no mechanism record (mechanism.jsonl) at the baseline's boundaries, or no boundary with a next "
                "period after the first")


def relative_grad_norm_decay(rows: Mapping[str, Mapping[str, Any]]) -> float:
    """The authors' stagnation statistic of the baseline: its relative gradient norm ``||grad_W L|| / ||W||`` over
    the evaluations of the last quarter / of the second quarter (``last_over_second`` of
    :func:`papers.winq.study.stagnation_summary`); NaN where that is undefined (:data:`NO_STAGNATION`)."""
    stagnation = rows["baseline"]["stagnation"]
    ratio = None if stagnation is None else stagnation["last_over_second"]
    return math.nan if ratio is None else ratio


def mechanism_vs_baseline(rows: Mapping[str, Mapping[str, Any]], *, method: str, field: str) -> float:
    """``100 (m - b)``: ``method``'s mechanism mean ``field`` (a share, :func:`papers.winq.study.mechanism_summary`)
    minus the same seed's baseline's over the same boundaries (the cell's ``mechanism_vs_baseline``), in points;
    NaN where that is undefined (:data:`NO_MECHANISM`: either has no records, they were recorded at other steps, or
    the field has no value)."""
    ours, baseline = rows[method], rows["baseline"]
    if ours["mechanism"] is None or baseline["mechanism"] is None:
        return math.nan
    if ours["mechanism"]["steps"] != baseline["mechanism"]["steps"]:
        return math.nan
    difference = ours["mechanism_vs_baseline"][field]
    return math.nan if difference is None else PERCENT * difference


# ------------------------------------------------------------------------------------------------ Hessian spectra
# per-probe quantity -> its column from a Hessian row (absolute masses at hessian.near_zero_abs)
def probe_values(cell: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per probe of a Hessian row: ``largest`` = ``max_k |theta_pk|``; ``near_relative`` = ``sum tau_pk`` over
    ``|theta_pk| <= c`` with ``c`` the cell's relative ``near_zero_threshold``; ``near``, ``negative``,
    ``positive`` = ``sum tau_pk`` over ``|theta_pk| < a``, ``theta_pk <= -a``, ``theta_pk >= a`` with ``a`` the
    absolute ``abs_threshold``."""
    c, a = cell["near_zero_threshold"], cell["abs_threshold"]
    nodes = [np.asarray(theta, dtype=np.float64) for theta in cell["nodes"]]
    weights = [np.asarray(tau, dtype=np.float64) for tau in cell["weights"]]
    pairs = list(zip(nodes, weights, strict=True))
    return {"largest": np.array([np.abs(theta).max() for theta in nodes]),
            "near_relative": np.array([tau[np.abs(theta) <= c].sum() for theta, tau in pairs]),
            "near": np.array([tau[np.abs(theta) < a].sum() for theta, tau in pairs]),
            "negative": np.array([tau[theta <= -a].sum() for theta, tau in pairs]),
            "positive": np.array([tau[theta >= a].sum() for theta, tau in pairs])}


def spectrum_columns(cells: Sequence[Mapping[str, Any]], quantities: Sequence[str]) -> dict[str, np.ndarray]:
    """``{"<cell>.<quantity>": per-probe values}`` of ``cells``; ValueError when the cells' probes do not pair
    (another probe count, probe seed or Hessian dimension)."""
    keys = {(c["probes"], c["probe_seed"], c["parameters"]) for c in cells}
    if len(keys) > 1:
        raise ValueError("Hessian cells do not pair by probe: " + ", ".join(
            f"{c['cell']} ({c['probes']} probes, seed {c['probe_seed']}, {c['parameters']} parameters)" for c in cells))
    columns = {}
    for c in cells:
        values = probe_values(c)
        columns |= {f"{c['cell']}.{q}": values[q] for q in quantities}
    return columns


def mass(sums: Sums, cell: str, quantity: str, probes: int) -> Any:
    """A cell's mean over probes of a per-probe mass, in percent."""
    return PERCENT * np.asarray(sums[f"{cell}.{quantity}"]) / probes


def log_largest(sums: Sums, cell: str, probes: int) -> Any:
    """``ln`` of a cell's mean over probes of the largest |Ritz value|."""
    return np.log(np.asarray(sums[f"{cell}.largest"]) / probes)


def balance(sums: Sums, cell: str) -> Any:
    """``100 (S_neg - S_pos) / (S_neg + S_pos)``: the sign balance of the mass away from zero, points."""
    neg, pos = np.asarray(sums[f"{cell}.negative"]), np.asarray(sums[f"{cell}.positive"])
    return PERCENT * (neg - pos) / (neg + pos)


def spectrum_detail(cells: Sequence[Mapping[str, Any]]) -> str:
    """The cells' masses at the absolute thresholds and the relative one, and the largest |eigenvalue|."""
    return "; ".join(
        f"{h['cell']}: near zero {h['abs_masses']['near_zero']:.1%} (|eigenvalue| < {h['abs_threshold']:g}), "
        f"{h['notebook_masses']['near_zero']:.1%} (< {h['notebook_threshold']:g}), {h['near_zero_mass']:.1%} "
        f"(<= {h['near_zero_threshold']:.3g}, relative); negative {h['abs_masses']['negative']:.1%}, positive "
        f"{h['abs_masses']['positive']:.1%}; largest |eigenvalue| {h['largest_abs_eigenvalue']:.4g}" for h in cells)


def seeded_spectra(study: Study, runs: Sequence[str]) -> tuple[list[int], dict[int, list[Mapping[str, Any]]]]:
    """The seeds on which every one of ``runs`` has a Hessian cell, and those cells per seed (in ``runs`` order)."""
    seeds = [k for k in study.seeds(runs) if all(hessian_of(study.summary, seed_cell(r, k)) for r in runs)]
    return seeds, {k: [hessian_of(study.summary, seed_cell(r, k)) for r in runs] for k in seeds}


def spectrum_claim(spec: ClaimSpec, study: Study, evidence: Evidence, *, runs: Sequence[str],
                   quantities: Sequence[str], per_cells: Callable[[Sums, Sequence[Mapping[str, Any]]], Any],
                   reason: str) -> Claim:
    """A statistic of the Hessian cells of ``runs``: per seed ``per_cells(sums, cells of the seed)``, the seed mean
    with the seed interval widened by the paired bootstrap over the SLQ probes (``reason``: why not testable when
    no seed has every cell)."""
    seeds, by_seed = seeded_spectra(study, runs)
    if not runs or not seeds:
        return not_testable(spec, reason, [study.summary_path])
    cells = [c for k in seeds for c in by_seed[k]]
    columns = spectrum_columns(cells, quantities)
    estimate, values = seed_estimate(columns, lambda sums, k: per_cells(sums, by_seed[k]), seeds, evidence,
                                            "SLQ probes")
    return judge(spec, estimate, detail=f"{spectrum_detail(cells)}; {per_seed_text(seeds, values)}",
                 evidence=[study.summary_path])


def one_bit_setting(study: Study) -> str | None:
    """The study's 1-bit A16 setting without rotation whose baseline is compared (None when there is none)."""
    return next((s for s in study.summary["settings"] if study.setting(s)["bits"] == 1
                 and study.setting(s)["activation_bits"] is None and not study.setting(s).get("hadamard")
                 and study.compares(s, "baseline")), None)


ONE_BIT_REASON = "the study has no Hessian spectrum of a compared 1-bit baseline with 16-bit activations"


def one_bit_mass(spec: ClaimSpec, study: Study, evidence: Evidence, *, quantity: str) -> Claim:
    """The near-zero mass (percent; ``near`` absolute or ``near_relative``) of the 1-bit A16 baseline's spectrum."""
    setting = one_bit_setting(study)
    runs = [f"{setting}-baseline"] if setting else []
    return spectrum_claim(spec, study, evidence, runs=runs, quantities=[quantity],
                          per_cells=lambda sums, cells: mass(sums, cells[0]["cell"], quantity, cells[0]["probes"]),
                          reason=ONE_BIT_REASON)


def one_bit_balance(spec: ClaimSpec, study: Study, evidence: Evidence) -> Claim:
    """The sign balance (:func:`balance`) of the 1-bit A16 baseline's spectrum away from zero."""
    setting = one_bit_setting(study)
    runs = [f"{setting}-baseline"] if setting else []
    seeds, by_seed = seeded_spectra(study, runs)
    if any(c["abs_masses"]["negative"] + c["abs_masses"]["positive"] == 0 for k in seeds for c in by_seed[k]):
        return not_testable(spec, "every Ritz value of a spectrum lies near zero: no sign to balance",
                            [study.summary_path])
    return spectrum_claim(spec, study, evidence, runs=runs, quantities=["negative", "positive"],
                          per_cells=lambda sums, cells: balance(sums, cells[0]["cell"]), reason=ONE_BIT_REASON)


def a16_baselines(study: Study) -> list[str]:
    """The compared baseline runs with 16-bit activations and no rotation, by weight bits."""
    settings = [s for s in study.summary["settings"] if study.setting(s)["activation_bits"] is None
                and not study.setting(s).get("hadamard") and study.compares(s, "baseline")]
    return [f"{s}-baseline" for s in sorted(settings, key=lambda s: study.setting(s)["bits"])]


def bit_trend(spec: ClaimSpec, study: Study, evidence: Evidence, *, statistic: str) -> Claim:
    """The least-squares slope of the baseline's ``statistic`` (``near``: absolute near-zero mass in percent;
    ``largest``: ``ln`` of the largest |eigenvalue|) on weight bits over the A16 settings, per seed
    ``sum_c w_c f_c`` with ``w_c = (b_c - mean b) / sum_c (b_c - mean b)^2``."""
    runs = [r for r in a16_baselines(study)
            if any(h["run"] == r for h in study.summary["hessian"])]
    bits = np.array([study.setting(r.rpartition("-")[0])["bits"] for r in runs], dtype=np.float64)
    if len(set(bits.tolist())) < 2:
        return not_testable(spec, "the study has baseline spectra at fewer than two weight bit widths with 16-bit "
                                  f"activations ({', '.join(runs) or 'none'})", [study.summary_path])
    centred = bits - bits.mean()
    slope_weights = centred / (centred**2).sum()

    def slope(sums: Sums, cells: Sequence[Mapping[str, Any]]) -> Any:
        values = [mass(sums, c["cell"], "near", c["probes"]) if statistic == "near"
                  else log_largest(sums, c["cell"], c["probes"]) for c in cells]
        return sum(w * v for w, v in zip(slope_weights, values, strict=True))

    return spectrum_claim(spec, study, evidence, runs=runs, quantities=[statistic], per_cells=slope,
                          reason="no seed has a baseline spectrum at every bit width")


def method_vs_baseline_spectrum(spec: ClaimSpec, study: Study, evidence: Evidence, *, method: str,
                                statistic: str) -> Claim:
    """``method``'s spectrum ``statistic`` minus the baseline's, per seed the mean over the pooled settings with both
    spectra: ``largest``, the log ratio of the largest |eigenvalue|; ``near`` / ``negative``, the absolute-threshold
    mass difference in points."""
    settings = [s for s in pooled_settings(study, method, "baseline")
                if any(h["run"] == f"{s}-{method}" for h in study.summary["hessian"])]
    runs = [f"{s}-{m}" for s in settings for m in (method, "baseline")]

    def value(sums: Sums, cell: Mapping[str, Any]) -> Any:
        if statistic == "largest":
            return log_largest(sums, cell["cell"], cell["probes"])
        return mass(sums, cell["cell"], statistic, cell["probes"])

    def difference(sums: Sums, cells: Sequence[Mapping[str, Any]]) -> Any:
        pairs = [(cells[2 * i], cells[2 * i + 1]) for i in range(len(settings))]
        return sum(value(sums, m) - value(sums, b) for m, b in pairs) / len(pairs)

    return spectrum_claim(spec, study, evidence, runs=runs, quantities=[statistic], per_cells=difference,
                          reason=f"no pooled setting has a {method} and a baseline Hessian spectrum on one seed")


# ------------------------------------------------------------------------------------------------------- the table
RowBuilder = Callable[[ClaimSpec, Study, Evidence], Claim]
FIXED_ROWS: dict[str, RowBuilder] = {
    "baseline_stagnates_grad_norm": partial(trajectory_claim, methods=("baseline",), statistic=grad_norm_decay,
                                            what="gradient norm last / second quarter"),
    "baseline_stagnates_perplexity": partial(trajectory_claim, methods=("baseline",), statistic=late_share,
                                             what="share of the log-perplexity reduction in the last half, %"),
    "baseline_stalls": partial(trajectory_claim, methods=("baseline",), statistic=baseline_stall,
                               what="stall ratio (codes changed per unit of learning rate, last half / first)",
                               undefined=NO_STALL),
    "baseline_stagnates_relative_grad_norm": partial(
        trajectory_claim, methods=("baseline",), statistic=relative_grad_norm_decay,
        what="relative gradient norm ||grad_W L|| / ||W|| last / second quarter", undefined=NO_STAGNATION),
    "flat_near_zero_w1": partial(one_bit_mass, quantity="near"),
    "flat_near_zero_relative_w1": partial(one_bit_mass, quantity="near_relative"),
    "flat_balance_w1": one_bit_balance,
    "fewer_bits_near_zero_trend": partial(bit_trend, statistic="near"),
    "fewer_bits_largest_trend": partial(bit_trend, statistic="largest"),
    "interpolation_steepens_largest": partial(method_vs_baseline_spectrum, method="interpolation",
                                              statistic="largest"),
    "interpolation_steepens_near_zero": partial(method_vs_baseline_spectrum, method="interpolation",
                                                statistic="near"),
    "interpolation_fewer_codes_change": partial(
        trajectory_claim, methods=("interpolation", "baseline"),
        statistic=partial(mechanism_vs_baseline, method="interpolation", field="codes_changed_after_first"),
        what="codes changed per period after the first interpolation, interpolation - baseline, points",
        undefined=NO_MECHANISM),
    "interpolation_away_from_boundaries": partial(
        trajectory_claim, methods=("interpolation", "baseline"),
        statistic=partial(mechanism_vs_baseline, method="interpolation", field="near_boundary_after"),
        what="latent weights within the next period's travel of a code boundary after each interpolation, "
             "interpolation - baseline, points", undefined=NO_MECHANISM),
    "noise_larger_grad_norm": partial(trajectory_claim, methods=("noise", "baseline"), statistic=noise_grad_norm,
                                      what="ln(gradient norm over the last half, noise / baseline)"),
    "noise_more_negative_mass": partial(method_vs_baseline_spectrum, method="noise", statistic="negative"),
}
PER_SETTING_ROWS: dict[str, Callable[[ClaimSpec, Study, Evidence, str], Claim]] = {
    "winq_faster": speedup,
    "winq_lower_perplexity": lower_perplexity,
}
POOLED_ROWS: dict[str, RowBuilder] = {
    "winq_lower_perplexity_pooled": partial(pooled_improvement, model="winq", reference="baseline"),
    "interpolation_alone_improves": partial(pooled_improvement, model="interpolation", reference="baseline"),
    "noise_alone_improves": partial(pooled_improvement, model="noise", reference="baseline"),
    "winq_beats_interpolation": partial(pooled_improvement, model="winq", reference="interpolation"),
    "winq_beats_noise": partial(pooled_improvement, model="winq", reference="noise"),
    "interpolation_beats_noise": partial(pooled_improvement, model="interpolation", reference="noise"),
    "winq_lower_perplexity_any_regime": partial(pooled_improvement, model="winq", reference="baseline"),
    "winq_zero_shot_cloze": partial(zero_shot, task="cloze"),
    "winq_zero_shot_choice": partial(zero_shot, task="choice"),
    "hadamard_winq_improves": hadamard_improvement,
}


def per_setting_settings(study: Study) -> list[str]:
    """The study settings a per-setting row is computed for: those without rotation that compare WinQ with the
    baseline."""
    return [s for s in study.summary["settings"] if not study.setting(s).get("hadamard")
            and study.compares(s, "winq", "baseline")]


def claim_rows(specs: Mapping[str, ClaimSpec], study: Study, evidence: Evidence) -> list[Claim]:
    """Every row, in the report's order: the fixed rows, the per-setting rows (for every configured setting, in
    config order; a spec of one the study does not compare is not testable, with the reason), the pooled rows.
    ValueError naming spec ids the code does not know, and the missing ones (every fixed and pooled id, and each
    per-setting prefix for every setting of :func:`per_setting_settings`)."""
    settings = study.configured_settings
    study_settings = list(study.summary["settings"])
    outside = [s for s in study_settings if s not in settings]
    if outside:
        raise ValueError(f"study settings {outside} are not configured settings ({', '.join(settings)})")
    computed = per_setting_settings(study)
    per_setting = {claim_id(prefix, s): (prefix, s) for prefix in PER_SETTING_ROWS for s in settings}
    known = {*FIXED_ROWS, *per_setting, *POOLED_ROWS}
    required = {*FIXED_ROWS, *POOLED_ROWS, *(cid for cid, (_, s) in per_setting.items() if s in computed)}
    unknown, missing = sorted(set(specs) - known), sorted(required - set(specs))
    if unknown or missing:
        raise ValueError(f"claims: unknown ids {unknown or 'none'}, missing ids {missing or 'none'}")
    rows = [build(specs[cid], study, evidence) for cid, build in FIXED_ROWS.items()]
    for prefix, build_setting in PER_SETTING_ROWS.items():
        for s in settings:
            spec = specs.get(claim_id(prefix, s))
            if spec is None:
                continue
            if s in computed:
                rows.append(build_setting(spec, study, evidence, s))
            elif s in study_settings:
                compared = ", ".join(study.summary["compared"][s]) or "none"
                rows.append(not_testable(spec, f"setting {s!r} does not compare WinQ with the baseline on the seeds "
                                               f"in this profile (compared: {compared})"))
            else:
                rows.append(not_testable(spec, f"setting {s!r} is not in this profile's study_settings "
                                               f"({', '.join(study_settings)})"))
    rows += [build(specs[cid], study, evidence) for cid, build in POOLED_ROWS.items()]
    return rows


# ------------------------------------------------------------------------------------------ implementation checks
def _close(a: float, b: float) -> bool:
    """``a == b`` up to :data:`TOLERANCE` (relative, or absolute near 0)."""
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def paired_units_check(study: Study) -> Check:
    """Every evaluation scores the same test windows (the same per-window token counts) and the same number of
    examples per task: the pairing of the bootstraps."""
    cells = list(study.evaluations)
    windows = {tuple(study.evaluation(c)["metrics"]["perplexity"]["window_tokens"]) for c in cells}
    examples = {task: {len(study.evaluation(c)["metrics"][task][fields.per_example]) for c in cells}
                for task, fields in TASK_ACCURACY.items()}
    measured = (f"{len(cells)} evaluations: {len(windows)} distinct window layout(s) of "
                f"{', '.join(str(n) for n in sorted(len(w) for w in windows))} windows; examples "
                + ", ".join(f"{task} {sorted(n)}" for task, n in examples.items()))
    return Check("paired_test_units", "every model is scored on the same test windows and zero-shot examples",
                 measured, len(windows) == 1 and all(len(n) == 1 for n in examples.values()),
                 tuple(study.cited(cells)))


def scores_check(study: Study) -> Check:
    """The per-unit scores give each record's metrics (:func:`common.eval.scores.score_mismatches`)."""
    failures = [m for cell in study.evaluations for m in score_mismatches(cell, study.evaluation(cell), TASK_ACCURACY)]
    return Check("scores_give_metrics", "per-window and per-example scores reproduce every evaluation's perplexity "
                 "and correct counts", "; ".join(failures) or f"{len(study.evaluations)} evaluations agree",
                 not failures, tuple(study.cited(list(study.evaluations))))


def spectrum_check(study: Study) -> Check:
    """Per Hessian cell: the mean of the per-probe relative near-zero masses is its near-zero mass, the largest
    per-probe |Ritz value| its largest |eigenvalue|, and at the relative and at each absolute threshold the near-zero,
    negative and positive mass sum to 1."""
    failures = []
    for cell in study.summary["hessian"]:
        values = probe_values(cell)
        total = cell["near_zero_mass"] + cell["negative_mass"] + cell["positive_mass"]
        totals = [sum(cell[f"{name}_masses"].values()) for name in ("abs", "notebook")]
        if not (_close(values["near_relative"].mean(), cell["near_zero_mass"])
                and _close(values["largest"].max(), cell["largest_abs_eigenvalue"]) and _close(total, 1.0)
                and all(_close(t, 1.0) for t in totals)
                and _close(values["near"].mean(), cell["abs_masses"]["near_zero"])):
            failures.append(f"{cell['cell']}: near-zero {cell['near_zero_mass']:.6g} vs "
                            f"{values['near_relative'].mean():.6g} from its probes, largest "
                            f"{cell['largest_abs_eigenvalue']:.6g} vs {values['largest'].max():.6g}, masses sum to "
                            f"{total:.6g} (relative), {totals[0]:.6g}, {totals[1]:.6g} (absolute)")
    cells = len(study.summary["hessian"])
    return Check("spectrum_from_probes", "every spectrum's mass fractions and largest |eigenvalue| follow from its "
                 "probes' Ritz values and weights (the masses sum to 1 at every threshold)",
                 "; ".join(failures) or f"{cells} spectra agree", not failures, (study.summary_path,))


def stored_bits_per_weight(meta: Mapping[str, Any]) -> float:
    """The bits per quantized weight of codes packed ``n`` per byte and one float32 scale per row:
    ``8 sum_l o_l (ceil(i_l / n) + 4) / sum_l o_l i_l`` over the stored layers' ``(o_l, i_l)`` shapes (for one
    shape with ``n | i``: ``8 / n + 32 / in_features``, e.g. ``1 + 32 / in_features`` at 1 bit). ValueError naming
    a checkpoint whose scales are not float32 per row."""
    weights = meta["recipe"]["weights"]
    if (weights["block_size"], meta["scale_storage"], weights["global_scale"]) != ("row", "float32", None):
        raise ValueError(f"scales stored as {meta['scale_storage']} per {weights['block_size']} block (global "
                         f"scale {weights['global_scale']}), not float32 per row")
    n = int(meta["packing"]["codes_per_byte"])
    shapes = [entry["shape"] for entry in meta["weights"].values()]
    return 8 * sum(o * (-(-i // n) + 4) for o, i in shapes) / sum(o * i for o, i in shapes)


def bits_per_weight_check(study: Study) -> Check:
    """Each cell's reported bits per weight (the summary's, from ``size_report.json``) equals
    :func:`stored_bits_per_weight` of its checkpoint's quantization config."""
    failures, parts = [], []
    for row in study.summary["cells"]:
        cell = row["cell"]
        if cell not in study.quantized:
            failures.append(f"{cell}: no quantization config")
            continue
        try:
            expected = stored_bits_per_weight(study.quantized[cell])
        except ValueError as err:
            failures.append(f"{cell}: {err}")
            continue
        if row["bits_per_weight"] is None or not _close(row["bits_per_weight"], expected):
            failures.append(f"{cell}: {row['bits_per_weight']} reported vs {expected} from its layers")
        parts.append(f"{cell} {expected:.4f}")
    return Check("bits_per_weight_identity", "the stored bits per quantized weight are the packed codes plus one "
                 "float32 scale per row, 8 sum o (ceil(i / n) + 4) / sum o i (1 + 32 / in_features at 1 bit)",
                 "; ".join(failures) or ", ".join(parts), not failures, (study.summary_path,))


def interpolation_check(study: Study) -> Check:
    """Every interpolating cell interpolated ``max_steps // K`` times (after optimizer steps K, 2K, ..., N counted
    from 1), every other cell never."""
    failures, counts = [], set()
    for row in study.summary["cells"]:
        expected = row["max_steps"] // row["every"] if row["every"] else 0
        if row["interpolations"] != expected:
            failures.append(f"{row['cell']}: {row['interpolations']} interpolations, K = {row['every']} of "
                            f"{row['max_steps']} steps, expected {expected}")
        counts.add((row["max_steps"], row["every"], row["interpolations"]))
    measured = "; ".join(failures) or ", ".join(f"N = {n}, K = {k}: {i}" for n, k, i in sorted(counts, key=str))
    return Check("interpolation_count", "every interpolating run interpolates N // K times (N its run length), the "
                 "others never", measured, not failures, (study.summary_path,))


def seed_check(study: Study) -> Check:
    """Every cell ``<run>/seed<k>`` was trained with data-order seed ``k`` and noise seed ``k`` (its recorded
    training config and QAT record): the pairing by seed."""
    failures = [f"{r['cell']}: data seed {r['data_seed']}, noise seed {r['noise_seed']}" for r in study.summary["cells"]
                if not r["data_seed"] == r["noise_seed"] == r["seed"]]
    return Check("seed_cells", "every training cell's data order and noise are seeded with its path's seed",
                 "; ".join(failures) or f"{len(study.summary['cells'])} cells agree", not failures,
                 (study.summary_path,))


def codes_kept_check(study: Study) -> Check:
    """No interpolation changed a code: every cell's ``codes_changed_by_interpolation_max`` (its mechanism records)
    is 0, the identity ``Q(0.2 W + 0.8 Q(W)) = Q(W)`` with the scales untouched (fact sheet); the cells without
    mechanism records are skipped, and the measurement says how many were checked."""
    cells = study.summary["cells"]
    largest = {row["cell"]: row["mechanism"]["mean"]["codes_changed_by_interpolation_max"] for row in cells
               if row["mechanism"] is not None}
    failures = [f"{cell}: an interpolation changed a share {share:.3g} of the codes"
                for cell, share in largest.items() if share != 0]
    measured = (f"{len(largest)} of {len(cells)} cells checked (the others have no mechanism records): "
                + ("; ".join(failures) or "no interpolation changed a code"))
    return Check("interpolation_keeps_codes", "no interpolation changes a code: Q(0.2 W + 0.8 Q(W)) = Q(W) with the "
                 "scales untouched", measured, not failures, (study.summary_path,))


def study_checks(study: Study) -> list[Check]:
    """The implementation checks run with the claims (a failed one fails the build)."""
    return [paired_units_check(study), scores_check(study), spectrum_check(study), bits_per_weight_check(study),
            interpolation_check(study), codes_kept_check(study), seed_check(study)]


def claims(specs: Mapping[str, ClaimSpec], study: Study, evidence: Evidence) -> ClaimsResult:
    """The claims table (:data:`common.report.PaperClaims`): every row of :func:`claim_rows` and every check of
    :func:`study_checks`."""
    return ClaimsResult(claim_rows(specs, study, evidence), study_checks(study))
