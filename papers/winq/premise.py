"""The premise of WinQ's method claims, measured on the baselines, and the baseline-only pilot that looks for a
regime where it holds.

The method rows (WinQ is faster, reaches a lower perplexity; its components' ablations) rest on the paper's premise:
"The main bottleneck is its slow convergence and early performance plateau, particularly below 4-bit-widths"
(arXiv:2605.17471v1, Abstract). A statistic of that premise must measure the progress of the *quantized* weights
against the step budget the schedule gives them, not the shape of the validation curve: under a cosine schedule to
zero the last half of a run carries about 18% of the summed learning rate, and the validation gain made there is
mostly the annealing of a decaying rate, not evidence of progress or of its absence.

**Stall ratio** (``stall``: the premise, the regime card's ``stall_<w>``). With ``c_k`` the share of the quantized
weights' codes that changed over interpolation period ``k`` (``mechanism.jsonl``, recorded at the boundaries
``K, 2K, ..`` of every method, the baseline included) and ``S_k`` the learning rate summed over that period
(:func:`papers.winq.settings.period_lr_sums`), over the ``P = N // K`` periods, ``early`` the first ``P // 2`` and
``late`` the last ``P // 2`` (the middle one of an odd count in neither)::

    stall = (sum_late c_k / sum_late S_k) / (sum_early c_k / sum_early S_k)

Adam moves a weight by about ``lr`` a step, so weights that keep finding better codes change them in proportion to
the rate the schedule gives them: steady progress gives about 1, a stall (weights held in a flat region, their codes
no longer changing whatever the rate) far less. None with fewer than two periods, or no code change or no rate in
the first half.

Context, not the premise (the pilot's table reports them beside it):

* **gain per rate** (``gain_per_lr``): the validation log-perplexity gain per unit of summed learning rate in the
  last half of the run over the same in the first half, ``(ln(P_half / P_last) / sum_{t >= N/2} lr_t) /
  (ln(P_first / P_half) / sum_{t < N/2} lr_t)`` (``P_half``: the last evaluation at or before ``N / 2`` steps);
  annealing makes it large under a cosine schedule, so it cannot tell a stall from progress;
* the authors' statistic (``relative_grad_norm``): ``||grad_W L|| / ||W||`` of the quantized linears, the mean over
  the evaluations of the last quarter over that of the second (``stagnation.jsonl``);
* the late share (``late_share``): the share (%) of the log-perplexity gain, first evaluation to last, made in the
  last half of the run (the earlier premise row, ill-posed under cosine-to-zero for the reason above).

**The pilot** (the config's ``pilot:``, written and committed before its runs). Each candidate overrides the study
config of the profile (``learning_rates``, ``train_steps``, ``train``) and trains the baseline of every pilot setting
on the pilot's seed, held out from the claims' seeds. Per candidate: the premise and its context per setting, the
regime card's travel and step rows under its schedule (:func:`papers.winq.regime.regime_values`), the measured
seconds per step and the default profile's estimated wall time under its regime (:func:`budget_hours`). The rule
(:func:`choose`): the first candidate, in the config's order, whose premise holds at every pilot setting, whose card
rows all lie inside their bounds, and whose estimated default wall time fits the budget; none, when none does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from common.config import merged
from common.io import read_json
from common.qat.seeds import parse_seed_cell, seed_cell
from common.report import RegimeRow, regime_specs
from common.train import TrainConfig, learning_rate

from .regime import STALL, regime_values, stall_id
from .settings import run_settings, train_config, training_cells
from .study import cell_stall, mechanism_summary, read_curve, read_records, stagnation_summary, value_at_half

PILOT_METHOD = "baseline"
PERCENT = 100.0


def gain_per_lr(curve: Sequence[tuple[int, float]], train: TrainConfig) -> float | None:
    """The gain-per-rate ratio (module docstring) of a validation curve ``[(steps taken, perplexity), ..]`` under
    ``train``'s schedule; None when the first half gains nothing."""
    n = train.max_steps
    first, half, last = curve[0][1], value_at_half(curve, n), curve[-1][1]
    rates = [learning_rate(t, train) for t in range(n)]
    early, late = math.fsum(rates[: n // 2]), math.fsum(rates[n // 2:])
    gain_early = math.log(first / half)
    if gain_early <= 0 or early <= 0 or late <= 0:
        return None
    return (math.log(half / last) / late) / (gain_early / early)


def late_share(curve: Sequence[tuple[int, float]], max_steps: int) -> float | None:
    """The share (%) of the log-perplexity gain, first evaluation to last, made in the last half of the run (None
    without a gain)."""
    first, half, last = curve[0][1], value_at_half(curve, max_steps), curve[-1][1]
    total = math.log(first / last)
    return None if total <= 0 else PERCENT * math.log(half / last) / total


# ---------------------------------------------------------------------------------------------------- the pilot
def candidate_config(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The profile's study ``config`` under pilot candidate ``name``'s overrides (ValueError naming an unknown
    candidate)."""
    candidates = config["pilot"]["candidates"]
    if name not in candidates:
        raise ValueError(f"unknown pilot candidate {name!r}; valid: {', '.join(candidates)}")
    return merged(config, candidates[name])


def pilot_study(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Candidate ``name``'s pilot study: the baseline of every pilot setting, on the pilot's seed alone."""
    pilot = config["pilot"]
    settings, seed = list(pilot["settings"]), int(pilot["seed"])
    return {**candidate_config(config, name), "study_settings": settings, "methods": [PILOT_METHOD],
            "compared": {s: [PILOT_METHOD] for s in settings}, "figure_methods": [], "seeds": [seed],
            "figure_seeds": [seed], "pooled_settings": settings}


def pilot_runs(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every pilot cell as ``(candidate, <setting>-baseline/seed<k>)``, candidate by candidate in config order."""
    pilot = config["pilot"]
    return [(name, seed_cell(f"{s}-{PILOT_METHOD}", int(pilot["seed"]))) for name in pilot["candidates"]
            for s in pilot["settings"]]


def pilot_cells(config: Mapping[str, Any]) -> list[str]:
    """Every pilot cell, ``<candidate>/<setting>-baseline/seed<k>`` (:func:`pilot_runs`)."""
    return [f"{name}/{cell}" for name, cell in pilot_runs(config)]


def budget_hours(config: Mapping[str, Any], name: str, seconds_per_step: float) -> float:
    """The default profile's estimated wall time (hours) under candidate ``name``'s regime: the pretraining, then
    every training cell of the profile's study (its settings, methods and seeds; each its group's run length under
    the candidate) at ``seconds_per_step``, times the budget's ``overhead`` (evaluation, checkpoint quantization,
    spectra), over its ``cores``."""
    budget = config["pilot"]["budget"]
    study = candidate_config(config, name)
    steps = sum(run_settings(study, parse_seed_cell(cell)[0])["max_steps"] for cell in training_cells(study))
    return (budget["pretraining_minutes"] / 60
            + budget["overhead"] * steps * seconds_per_step / budget["cores"] / 3600)


def pilot_row(config: Mapping[str, Any], name: str, runs: Mapping[str, Mapping[str, Any]],
              parameters: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """One candidate's row of the pilot's table. ``runs``: per pilot setting, its baseline's ``codes_changed`` (per
    period), ``curve`` (``[(steps taken, validation perplexity)]``), ``relative_grad_norm`` (the last- over
    second-quarter ratio, or None) and ``seconds`` and ``steps`` (its training summary's); ``parameters``: the base
    model's (the card's rows). ValueError naming a pilot setting without a run."""
    pilot, study = config["pilot"], pilot_study(config, name)
    specs = regime_specs(config["regime"])
    card, _ = regime_values(study, parameters)
    card_rows = {rid: value for rid, value in card.items() if rid in specs and not rid.startswith(f"{STALL}_")}
    settings: dict[str, dict[str, Any]] = {}
    for setting in pilot["settings"]:
        if setting not in runs:
            raise ValueError(f"pilot candidate {name!r} has no {setting} baseline run")
        run, entry = f"{setting}-{PILOT_METHOD}", runs[setting]
        train = train_config(study, run)
        settings[setting] = {STALL: cell_stall(study, run, entry["codes_changed"]),
                             "gain_per_lr": gain_per_lr(entry["curve"], train),
                             "relative_grad_norm": entry["relative_grad_norm"],
                             "late_share": late_share(entry["curve"], train.max_steps)}
    premise_rows = {s: stall_id(s) for s in pilot["settings"]}
    lacking = [rid for rid in premise_rows.values() if rid not in specs]
    if lacking:
        raise ValueError(f"the regime card has no premise row {', '.join(lacking)} for the pilot's settings (the rule "
                         "reads its bound)")
    premise = all(RegimeRow(specs[rid], settings[s][STALL]).inside for s, rid in premise_rows.items())
    outside = sorted(rid for rid, value in card_rows.items() if not RegimeRow(specs[rid], value).inside)
    seconds = math.fsum(runs[s]["seconds"] for s in pilot["settings"])
    per_step = seconds / sum(runs[s]["steps"] for s in pilot["settings"])
    hours = budget_hours(config, name, per_step)
    return {"candidate": name, "overrides": dict(pilot["candidates"][name]), "settings": settings,
            "card": card_rows, "card_outside": outside, "seconds_per_step": per_step, "budget_hours": hours,
            "premise_holds": premise, "card_inside": not outside, "fits": hours <= pilot["budget"]["hours"]}


def read_pilot_run(run_dir: str | os.PathLike[str], max_steps: int) -> dict[str, Any]:
    """What :func:`pilot_row` reads of one pilot cell's run folder: ``codes_changed`` (``mechanism.jsonl``),
    ``curve`` (``eval_log.csv``), ``relative_grad_norm`` (``stagnation.jsonl``, last over second quarter of a run of
    ``max_steps``) and its training summary's ``seconds`` and ``steps``."""
    folder = Path(run_dir)
    mechanism = mechanism_summary(read_records(folder / "mechanism.jsonl"))
    training = read_json(folder / "train_summary.json")
    return {"codes_changed": [] if mechanism is None else mechanism["codes_changed"],
            "curve": read_curve(folder / "eval_log.csv"),
            "relative_grad_norm": stagnation_summary(read_records(folder / "stagnation.jsonl"),
                                                     max_steps)["last_over_second"],
            "seconds": float(training["seconds"]), "steps": int(training["steps"])}


def pilot_table(config: Mapping[str, Any], run_dirs: Sequence[str | os.PathLike[str]],
                parameters: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """The pilot's table from its cells' run folders (``.../pilot/<candidate>/runs/<setting>-baseline/seed<k>``):
    a :func:`pilot_row` per candidate in config order, and the candidate :func:`choose` picks (None: none).
    ValueError naming a pilot cell without a folder, or a folder of no pilot cell."""
    folders = {f"{Path(d).parents[2].name}/{Path(d).parent.name}/{Path(d).name}": Path(d) for d in run_dirs}
    wanted = pilot_cells(config)
    missing, stray = [c for c in wanted if c not in folders], [c for c in folders if c not in wanted]
    if missing or stray:
        raise ValueError(f"pilot run folders: missing {missing or 'none'}, not pilot cells {stray or 'none'}")
    runs: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in config["pilot"]["candidates"]}
    for name, cell in pilot_runs(config):
        run = parse_seed_cell(cell)[0]
        runs[name][run.rpartition("-")[0]] = read_pilot_run(folders[f"{name}/{cell}"],
                                                            train_config(pilot_study(config, name), run).max_steps)
    rows = [pilot_row(config, name, settings, parameters) for name, settings in runs.items()]
    return {"seed": int(config["pilot"]["seed"]), "settings": list(config["pilot"]["settings"]),
            "budget": dict(config["pilot"]["budget"]), "rows": rows, "chosen": choose(rows)}


def choose(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The pilot's rule (module docstring): the first row whose premise holds, whose card rows are all inside and
    which fits the budget; None when none does."""
    return next((r["candidate"] for r in rows if r["premise_holds"] and r["card_inside"] and r["fits"]), None)
