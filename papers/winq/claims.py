"""The claims table of the WinQ paper as evidence: every row an estimate with its 95% interval, computed from the
artifacts, and a verdict by the fixed rule of :mod:`common.report.claims`; the identities apart, as checks.

The predictions are the config's ``claims:`` (``papers/winq/config.yaml``, validated by
``workflow/schemas/claims.schema.yaml``). A row's id says what the code computes: the ids of :data:`SPECTRUM_ROWS`
and :data:`POOLED_ROWS`, and ``<prefix>_<setting>`` for each prefix of :data:`PER_SETTING_ROWS` and each study
setting (the setting's name with ``.`` written ``_``: ``winq_lower_perplexity_w1_58``). A claim the paper states
per setting (its results table) is one row per setting; a claim about the method in general (the ablation, the
Hessian mechanism, the zero-shot average, the trend over bit widths) is one pooled row.

Intervals: paired percentile bootstraps (:meth:`common.uncertainty.Evidence.paired`, the workflow's ``evidence``
settings), each over the units every model compared shares:

* perplexity at equal budget, over the test-evaluation windows (every model scores the same windows: checked).
  With ``P_m = exp(S_nll,m / S_tokens,m)`` from the resampled window sums, the improvement of model ``m`` over the
  reference ``r`` is ``100 (1 - P_m / P_r)`` percent;
* zero-shot accuracy, over the task's examples: ``100 (S_correct,m - S_correct,r) / n`` accuracy points;
* Hessian spectra, over the SLQ probes. Every spectrum draws its start vectors from one generator seeded alike in
  one dimension (checked), so probe ``p`` starts from the same vector in every cell: the probes pair across cells.
  Per probe, its largest |Ritz value| ``max_k |theta_pk|`` and its near-zero mass ``sum_{|theta_pk| <= c} tau_pk``
  (``c`` the cell's threshold, held fixed); a cell's value is their mean over probes (for the near-zero mass
  exactly the cell's: checked). Statistics of cells go through :data:`SPECTRUM`'s transform ``f``: the near-zero
  mass in percent, ``ln`` of the largest |eigenvalue|. The interval is SLQ's Monte Carlo error for the one trained
  model (few probes give a narrow percentile interval).

A pooled row averages the per-setting statistic over the study settings inside every resample (one draw of the
units serves every model of every setting). Every run has one training seed, so every interval is conditional on
the trained models (evaluation and SLQ sampling, not training noise). When the study gains seeds (issue 14), the
statistic of each seed's full sums becomes one value per seed and the paired bootstrap gives way to a t-interval
over paired seeds (:func:`common.uncertainty.t_interval`); the statistics stay as they are.

The speedup (steps to the baseline's final validation perplexity) has no interval: with one seed, the
validation log (``eval_log.csv`` of :mod:`common.train`) keeps one perplexity per evaluation, not per-sequence
scores. Its rows are not testable, the measured steps in their detail.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from common.eval.scores import ACCURACY, example_correct, score_mismatches, window_columns
from common.report import Check, Claim, ClaimSpec, judge
from common.uncertainty import Evidence, Sums, perplexity

from .study import hessian_of, improvement, row_of

PERCENT = 100.0
TOLERANCE = 1e-9  # relative: a recomputed float identity (sums in another order) holds to this
TASKS = {"cloze": ACCURACY["acc"], "choice": ACCURACY["acc_norm"]}  # the zero-shot task -> the summary's accuracy
SPEEDUP_REASON = ("one training seed, and the validation log (eval_log.csv of common.train) keeps one perplexity per "
                  "evaluation, not per-sequence scores: the steps to the baseline's final validation perplexity have "
                  "no sampling distribution here. Testable with per-sequence validation NLL in the log (a bootstrap "
                  "over validation sequences) or with seeds (issue 14)")


@dataclass(frozen=True)
class Study:
    """What the claims read: the study's ``summary`` (:func:`papers.winq.study.study_summary`), each run's
    evaluation record (per-window and per-example scores) and its checkpoint's ``quantization_config.json``, and the
    paths the rows cite (``summary_path``; ``evaluation_paths``: run -> its evaluation record)."""

    summary: Mapping[str, Any]
    evaluations: Mapping[str, Mapping[str, Any]]
    quantized: Mapping[str, Mapping[str, Any]]
    summary_path: str
    evaluation_paths: Mapping[str, str]

    def evaluation(self, run: str) -> Mapping[str, Any]:
        """The evaluation record of ``run`` (ValueError naming a run without one)."""
        if run not in self.evaluations:
            raise ValueError(f"no evaluation record of run {run!r}; evaluated: {', '.join(self.evaluations)}")
        return self.evaluations[run]

    def cited(self, runs: Sequence[str]) -> list[str]:
        """The evaluation records of ``runs``."""
        return [self.evaluation_paths[run] for run in runs]


def setting_label(row: Mapping[str, Any]) -> str:
    """``W<bits>A<16|8>`` of a summary row."""
    activations = "A16" if row["activation_bits"] is None else f"A{row['activation_bits']}"
    return f"W{row['bits']:g}{activations}"


def claim_id(prefix: str, setting: str) -> str:
    """The id of a per-setting row: ``<prefix>_<setting>`` with ``.`` as ``_`` (the schema's ids are
    ``[a-z0-9_]+``)."""
    return f"{prefix}_{setting.replace('.', '_')}"


def not_testable(spec: ClaimSpec, reason: str, evidence: Sequence[str] = (), detail: str = "") -> Claim:
    """The row of ``spec`` without an estimate, for ``reason``."""
    return judge(spec, None, reason=reason, evidence=evidence, detail=detail)


def missing_methods(study: Study, methods: Sequence[str]) -> str:
    """The reason a comparison of ``methods`` cannot be made ('' when every one is a study method)."""
    absent = [m for m in methods if m not in study.summary["methods"]]
    return f"the study's methods ({', '.join(study.summary['methods'])}) lack {', '.join(absent)}" if absent else ""


# ------------------------------------------------------------------------------------ perplexity at equal budget
def improvement_claim(spec: ClaimSpec, study: Study, evidence: Evidence, *, model: str, reference: str,
                      settings: Sequence[str]) -> Claim:
    """The test-perplexity improvement of ``model`` over ``reference`` at equal budget, in percent, averaged over
    ``settings``: ``(100 / |S|) sum_s (1 - P_{s-model} / P_{s-reference})``, bootstrapped over the test windows."""
    reason = missing_methods(study, (model, reference))
    if reason:
        return not_testable(spec, reason, [study.summary_path])
    pairs = [(f"{s}-{model}", f"{s}-{reference}") for s in settings]
    runs = [run for pair in pairs for run in pair]
    columns: dict[str, np.ndarray] = {}
    for run in runs:
        columns |= window_columns(run, study.evaluation(run))

    def statistic(sums: Sums) -> np.ndarray:
        return sum(PERCENT * improvement(perplexity(sums, m), perplexity(sums, r)) for m, r in pairs) / len(pairs)

    estimate = evidence.paired(columns, statistic, "test windows")
    parts = []
    for m, r in pairs:
        p_m, p_r = (study.evaluation(run)["metrics"]["perplexity"]["perplexity"] for run in (m, r))
        parts.append(f"{setting_label(row_of(study.summary, m))}: test perplexity {p_r:.2f} ({reference}) -> "
                     f"{p_m:.2f} ({model}), {PERCENT * improvement(p_m, p_r):+.2f}%")
    return judge(spec, estimate, detail="; ".join(parts), evidence=study.cited(runs))


def lower_perplexity(spec: ClaimSpec, study: Study, evidence: Evidence, setting: str) -> Claim:
    """WinQ's improvement over the baseline in one setting (:func:`improvement_claim`)."""
    return improvement_claim(spec, study, evidence, model="winq", reference="baseline", settings=[setting])


def pooled_improvement(spec: ClaimSpec, study: Study, evidence: Evidence, *, model: str, reference: str) -> Claim:
    """:func:`improvement_claim` averaged over every study setting."""
    return improvement_claim(spec, study, evidence, model=model, reference=reference,
                             settings=study.summary["settings"])


# ----------------------------------------------------------------------------------------------- zero-shot tasks
def zero_shot(spec: ClaimSpec, study: Study, evidence: Evidence, *, task: str) -> Claim:
    """WinQ's zero-shot accuracy minus the baseline's on ``task`` (:data:`TASKS`), in points, averaged over the
    study settings: ``(100 / (|S| n)) sum_s (S_correct,s-winq - S_correct,s-baseline)``, bootstrapped over the
    task's ``n`` examples."""
    reason = missing_methods(study, ("winq", "baseline"))
    if reason:
        return not_testable(spec, reason, [study.summary_path])
    fields = TASKS[task]
    pairs = [(f"{s}-winq", f"{s}-baseline") for s in study.summary["settings"]]
    runs = [run for pair in pairs for run in pair]
    columns = {run: example_correct(run, study.evaluation(run), task, fields) for run in runs}
    n = len(columns[runs[0]])

    def statistic(sums: Sums) -> np.ndarray:
        return sum(PERCENT * (sums[m] - sums[r]) / n for m, r in pairs) / len(pairs)

    estimate = evidence.paired(columns, statistic, f"{task} examples")
    parts = [f"{setting_label(row_of(study.summary, m))}: {task} {fields.metric} {columns[r].mean():.3f} (baseline) -> "
             f"{columns[m].mean():.3f} (winq)" for m, r in pairs]
    return judge(spec, estimate, detail="; ".join(parts), evidence=study.cited(runs))


# --------------------------------------------------------------------------------------------------- the speedup
def speedup(spec: ClaimSpec, study: Study, evidence: Evidence, setting: str) -> Claim:
    """Not testable (:data:`SPEEDUP_REASON`); the detail: WinQ's and the baseline's steps to the baseline's final
    validation perplexity and their ratio (``evidence`` is unused until seeds give an interval)."""
    reason = missing_methods(study, ("winq", "baseline"))
    if reason:
        return not_testable(spec, reason, [study.summary_path])
    winq, baseline = row_of(study.summary, f"{setting}-winq"), row_of(study.summary, f"{setting}-baseline")
    reached = ("never reached" if winq["speedup"] is None
               else f"{winq['steps_to_baseline']} steps, {winq['speedup']:.2f}x")
    detail = (f"{setting_label(winq)}: baseline {baseline['steps_to_baseline']} steps to its final validation "
              f"perplexity {baseline['final_val_perplexity']:.2f}; WinQ {reached} (evaluated every "
              f"{study.summary['eval_every']} steps)")
    return not_testable(spec, SPEEDUP_REASON, [study.summary_path], detail)


# ------------------------------------------------------------------------------------------------ Hessian spectra
# statistic -> the transform f of a cell's mean over probes: the near-zero mass in percent, ln of the largest
SPECTRUM: dict[str, Callable[[Any], Any]] = {"near_zero": lambda mean: PERCENT * mean, "largest": np.log}


def probe_values(cell: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per probe of a Hessian cell: ``largest`` = ``max_k |theta_pk|`` and ``near_zero`` = ``sum_{|theta_pk| <= c}
    tau_pk`` with ``c`` the cell's ``near_zero_threshold``."""
    c = cell["near_zero_threshold"]
    nodes = [np.abs(np.asarray(theta, dtype=np.float64)) for theta in cell["nodes"]]
    weights = [np.asarray(tau, dtype=np.float64) for tau in cell["weights"]]
    return {"largest": np.array([theta.max() for theta in nodes]),
            "near_zero": np.array([tau[theta <= c].sum() for theta, tau in zip(nodes, weights, strict=True)])}


def spectrum_columns(cells: Sequence[Mapping[str, Any]], statistic: str) -> dict[str, np.ndarray]:
    """``{run: per-probe statistic}`` of ``cells``; ValueError when the cells' probes do not pair (another probe
    count, seed or Hessian dimension)."""
    keys = {(c["probes"], c["seed"], c["parameters"]) for c in cells}
    if len(keys) > 1:
        raise ValueError("Hessian cells do not pair by probe: " + ", ".join(
            f"{c['run']} ({c['probes']} probes, seed {c['seed']}, {c['parameters']} parameters)" for c in cells))
    return {c["run"]: probe_values(c)[statistic] for c in cells}


def cell_statistic(sums: Sums, run: str, statistic: str, probes: int) -> np.ndarray:
    """``f(S_run / probes)``: the cell's statistic (:data:`SPECTRUM`) from bootstrap sums."""
    return SPECTRUM[statistic](np.asarray(sums[run]) / probes)


def a16_baselines(study: Study) -> list[Mapping[str, Any]]:
    """The baseline spectra with 16-bit activations, by weight bits."""
    return sorted((h for h in study.summary["hessian"] if h["method"] == "baseline" and h["activation_bits"] is None),
                  key=lambda h: h["bits"])


def spectrum_detail(cells: Sequence[Mapping[str, Any]]) -> str:
    """The cells' near-zero mass and largest |eigenvalue| as reported, for a row's detail."""
    return "; ".join(f"{h['run']}: near-zero {h['near_zero_mass']:.1%}, largest |eigenvalue| "
                     f"{h['largest_abs_eigenvalue']:.4g} ({h['probes']} probes)" for h in cells)


def one_bit_near_zero(spec: ClaimSpec, study: Study, evidence: Evidence) -> Claim:
    """The near-zero mass (percent) of the 1-bit A16 baseline's spectrum, bootstrapped over its probes."""
    cells = [h for h in a16_baselines(study) if h["bits"] == 1]
    if not cells:
        return not_testable(spec, "the study has no Hessian spectrum of a 1-bit baseline with 16-bit activations",
                            [study.summary_path])
    (cell,) = cells
    columns = spectrum_columns(cells, "near_zero")
    estimate = evidence.paired(columns, partial(cell_statistic, run=cell["run"], statistic="near_zero",
                                                  probes=cell["probes"]), "SLQ probes")
    return judge(spec, estimate, detail=spectrum_detail(cells), evidence=[study.summary_path])


def bit_trend(spec: ClaimSpec, study: Study, evidence: Evidence, *, statistic: str) -> Claim:
    """The least-squares slope of the baseline's ``statistic`` (:data:`SPECTRUM`) on weight bits over the A16
    settings, ``sum_c w_c f_c`` with ``w_c = (b_c - mean b) / sum_c (b_c - mean b)^2``, bootstrapped over the probes
    (paired across the cells)."""
    cells = a16_baselines(study)
    bits = np.array([h["bits"] for h in cells], dtype=np.float64)
    if len(set(bits.tolist())) < 2:
        return not_testable(spec, "the study has baseline spectra at fewer than two weight bit widths with 16-bit "
                                  f"activations ({', '.join(h['run'] for h in cells) or 'none'})",
                            [study.summary_path])
    centred = bits - bits.mean()
    slope_weights = centred / (centred**2).sum()
    columns = spectrum_columns(cells, statistic)
    probes = cells[0]["probes"]

    def slope(sums: Sums) -> np.ndarray:
        return sum(w * cell_statistic(sums, h["run"], statistic, probes)
                   for w, h in zip(slope_weights, cells, strict=True))

    estimate = evidence.paired(columns, slope, "SLQ probes")
    return judge(spec, estimate, detail=spectrum_detail(cells), evidence=[study.summary_path])


def winq_vs_baseline_spectrum(spec: ClaimSpec, study: Study, evidence: Evidence, *, statistic: str) -> Claim:
    """WinQ's spectrum ``statistic`` minus the baseline's, ``(1/|S|) sum_s (f_{s-winq} - f_{s-baseline})`` over
    the settings with both spectra (for ``largest``, the mean log ratio), bootstrapped over the probes."""
    pairs = [(winq, baseline) for s in study.summary["settings"]
             if (winq := hessian_of(study.summary, f"{s}-winq")) is not None
             and (baseline := hessian_of(study.summary, f"{s}-baseline")) is not None]
    if not pairs:
        return not_testable(spec, "the study has no setting with both a baseline and a WinQ Hessian spectrum",
                            [study.summary_path])
    cells = [cell for pair in pairs for cell in pair]
    columns = spectrum_columns(cells, statistic)
    probes = cells[0]["probes"]

    def difference(sums: Sums) -> np.ndarray:
        return sum(cell_statistic(sums, w["run"], statistic, probes) - cell_statistic(sums, b["run"], statistic, probes)
                   for w, b in pairs) / len(pairs)

    estimate = evidence.paired(columns, difference, "SLQ probes")
    return judge(spec, estimate, detail=spectrum_detail(cells), evidence=[study.summary_path])


# ------------------------------------------------------------------------------------------------------- the table
RowBuilder = Callable[[ClaimSpec, Study, Evidence], Claim]
SPECTRUM_ROWS: dict[str, RowBuilder] = {
    "lower_bits_flatter_one_bit": one_bit_near_zero,
    "lower_bits_flatter_near_zero_trend": partial(bit_trend, statistic="near_zero"),
    "lower_bits_flatter_largest_trend": partial(bit_trend, statistic="largest"),
    "winq_steepens_largest": partial(winq_vs_baseline_spectrum, statistic="largest"),
    "winq_steepens_near_zero": partial(winq_vs_baseline_spectrum, statistic="near_zero"),
}
PER_SETTING_ROWS: dict[str, Callable[[ClaimSpec, Study, Evidence, str], Claim]] = {
    "winq_faster": speedup,
    "winq_lower_perplexity": lower_perplexity,
}
POOLED_ROWS: dict[str, RowBuilder] = {
    "both_components_matter_interpolation_alone": partial(pooled_improvement, model="interpolation",
                                                          reference="baseline"),
    "both_components_matter_noise_alone": partial(pooled_improvement, model="noise", reference="baseline"),
    "both_components_matter_without_noise": partial(pooled_improvement, model="winq", reference="interpolation"),
    "both_components_matter_without_interpolation": partial(pooled_improvement, model="winq", reference="noise"),
    "winq_zero_shot_cloze": partial(zero_shot, task="cloze"),
    "winq_zero_shot_choice": partial(zero_shot, task="choice"),
}


def study_claims(specs: Mapping[str, ClaimSpec], study: Study, evidence: Evidence,
                 settings: Sequence[str]) -> list[Claim]:
    """Every row, in the report's order: the spectrum rows, the per-setting rows (``settings``: every configured
    setting, in config order; a spec of one outside the study is not testable, with the reason), the pooled rows.
    ValueError naming spec ids the code does not know, and the missing ones (every fixed id, and each per-setting
    prefix for every study setting)."""
    study_settings = list(study.summary["settings"])
    outside = [s for s in study_settings if s not in settings]
    if outside:
        raise ValueError(f"study settings {outside} are not configured settings ({', '.join(settings)})")
    per_setting = {claim_id(prefix, s): (prefix, s) for prefix in PER_SETTING_ROWS for s in settings}
    known = {*SPECTRUM_ROWS, *per_setting, *POOLED_ROWS}
    required = {*SPECTRUM_ROWS, *POOLED_ROWS,
                *(cid for cid, (_, s) in per_setting.items() if s in study_settings)}
    unknown, missing = sorted(set(specs) - known), sorted(required - set(specs))
    if unknown or missing:
        raise ValueError(f"claims: unknown ids {unknown or 'none'}, missing ids {missing or 'none'}")
    rows = [build(specs[cid], study, evidence) for cid, build in SPECTRUM_ROWS.items()]
    for prefix, build_setting in PER_SETTING_ROWS.items():
        for s in settings:
            spec = specs.get(claim_id(prefix, s))
            if spec is None:
                continue
            rows.append(build_setting(spec, study, evidence, s) if s in study_settings else not_testable(
                spec, f"setting {s!r} is not in this profile's study_settings ({', '.join(study_settings)})"))
    rows += [build(specs[cid], study, evidence) for cid, build in POOLED_ROWS.items()]
    return rows


# ------------------------------------------------------------------------------------------ implementation checks
def _close(a: float, b: float) -> bool:
    """``a == b`` up to :data:`TOLERANCE` (relative, or absolute near 0)."""
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def paired_units_check(study: Study) -> Check:
    """Every run's evaluation scores the same test windows (the same per-window token counts) and the same number
    of examples per task: the pairing of the bootstraps."""
    runs = list(study.evaluations)
    windows = {tuple(study.evaluation(r)["metrics"]["perplexity"]["window_tokens"]) for r in runs}
    examples = {task: {len(study.evaluation(r)["metrics"][task][fields.per_example]) for r in runs}
                for task, fields in TASKS.items()}
    measured = (f"{len(runs)} evaluations: {len(windows)} distinct window layout(s) of "
                f"{', '.join(str(n) for n in sorted(len(w) for w in windows))} windows; examples "
                + ", ".join(f"{task} {sorted(n)}" for task, n in examples.items()))
    return Check("paired_test_units", "every model is scored on the same test windows and zero-shot examples",
                 measured, len(windows) == 1 and all(len(n) == 1 for n in examples.values()),
                 tuple(study.cited(runs)))


def scores_check(study: Study) -> Check:
    """The per-unit scores give each record's metrics (:func:`common.eval.scores.score_mismatches`):
    ``exp(sum nll / sum tokens)`` its perplexity, the window tokens its token count, the per-example correctness
    its correct counts."""
    failures = [m for run in study.evaluations for m in score_mismatches(run, study.evaluation(run), TASKS)]
    return Check("scores_give_metrics", "per-window and per-example scores reproduce every evaluation's perplexity "
                 "and correct counts", "; ".join(failures) or f"{len(study.evaluations)} evaluations agree",
                 not failures, tuple(study.cited(list(study.evaluations))))


def spectrum_check(study: Study) -> Check:
    """Per Hessian cell: the mean of the per-probe near-zero masses is its near-zero mass, the largest per-probe
    |Ritz value| its largest |eigenvalue|, and near-zero, negative and positive mass sum to 1."""
    failures = []
    for cell in study.summary["hessian"]:
        values = probe_values(cell)
        total = cell["near_zero_mass"] + cell["negative_mass"] + cell["positive_mass"]
        if not (_close(values["near_zero"].mean(), cell["near_zero_mass"])
                and _close(values["largest"].max(), cell["largest_abs_eigenvalue"]) and _close(total, 1.0)):
            failures.append(f"{cell['run']}: near-zero {cell['near_zero_mass']:.6g} vs "
                            f"{values['near_zero'].mean():.6g} from its probes, largest "
                            f"{cell['largest_abs_eigenvalue']:.6g} vs {values['largest'].max():.6g}, masses sum to "
                            f"{total:.6g}")
    cells = len(study.summary["hessian"])
    return Check("spectrum_from_probes", "every spectrum's mass fractions and largest |eigenvalue| follow from its "
                 "probes' Ritz values and weights (the masses sum to 1)",
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
    """Each run's reported bits per weight (the summary's, from ``size_report.json``) equals
    :func:`stored_bits_per_weight` of its checkpoint's quantization config."""
    failures, parts = [], []
    for row in study.summary["runs"]:
        run = row["run"]
        if run not in study.quantized:
            failures.append(f"{run}: no quantization config")
            continue
        try:
            expected = stored_bits_per_weight(study.quantized[run])
        except ValueError as err:
            failures.append(f"{run}: {err}")
            continue
        if row["bits_per_weight"] is None or not _close(row["bits_per_weight"], expected):
            failures.append(f"{run}: {row['bits_per_weight']} reported vs {expected} from its layers")
        parts.append(f"{run} {expected:.4f}")
    return Check("bits_per_weight_identity", "the stored bits per quantized weight are the packed codes plus one "
                 "float32 scale per row, 8 sum o (ceil(i / n) + 4) / sum o i (1 + 32 / in_features at 1 bit)",
                 "; ".join(failures) or ", ".join(parts), not failures, (study.summary_path,))


def study_checks(study: Study) -> list[Check]:
    """The implementation checks run with the claims (a failed one fails the build)."""
    return [paired_units_check(study), scores_check(study), spectrum_check(study), bits_per_weight_check(study)]
