"""The study's configuration and its runs.

A *run* is ``<setting>-<method>`` (``w2-winq``, ``w1.58-baseline``; setting names hold no ``-``: the schema allows
``[a-z0-9.]``) and a *training cell* is one seed of it, ``<run>/seed<k>`` (:func:`common.qat.seeds.seed_cell`): a seed
fixes the data order, the initialisation of anything new and the noise, so two methods of one seed share their data
order and a claim pairs them by seed.

Which runs, on which seeds:

* ``compared``: setting -> the methods whose runs the claims compare; each is trained on every seed of ``seeds``
  (the default profile: 3 seeds for W1 and W2 x every method, the baselines of every A16 bit width for the trend
  over bits, W3's WinQ for its per-setting row);
* ``figure_methods``: the methods every other study setting also runs, on ``figure_seeds`` only (they fill the
  figures; the captions say one seed);
* a study setting's runs are its compared methods and ``figure_methods``, in the order of ``methods``.

Learning rates come per setting group, as in the paper (:func:`learning_rate_group`): ``low_bit`` (W <= 2, A16),
``a8`` (8-bit activations, any W), ``high_bit`` (W >= 3, A16). The interpolation period ``K`` is a fraction of the
run per group, as the paper's (``interpolation.fraction``: a quarter for 1-2 bits, 60k of 240k steps; a half for
>= 3 bits, 40k of 80k): ``K = fraction x max_steps``, an integer >= 1 (checked), so a run interpolates
``max_steps // K`` times, after optimizer steps ``K, 2K, ..., N`` (:func:`.method.winq_step`). The run length
``max_steps`` is ``train.max_steps``, or the group's ``train_steps`` where one is set (:func:`run_steps`: the paper
profile's 240k steps for 1-2 bits and W1A8, 80k for >= 3 bits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.config import active_profile, merged
from common.qat.seeds import seed_cell
from common.recipes import LOWBIT_BITS
from common.registry import lookup
from common.train import TrainConfig, learning_rate

KEY = "winq"
FIGURES = ("curves", "grad-norm", "diagnostics", "final", "spectra", "spectra-methods",  # the report's figures
           "hessian-stats")
BIT_WIDTHS = {str(bits): bits for bits in LOWBIT_BITS}  # by their YAML spelling: "1", "1.58", "2", "3", "4"
GROUPS = ("low_bit", "a8", "high_bit")


@dataclass(frozen=True)
class Method:
    """Which WinQ components a method uses."""

    interpolate: bool
    noise: bool


METHODS: dict[str, Method] = {
    "baseline": Method(interpolate=False, noise=False),  # ParetoQ QAT
    "winq": Method(interpolate=True, noise=True),
    "interpolation": Method(interpolate=True, noise=False),
    "noise": Method(interpolate=False, noise=True),
}


def profile_config(config: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The study config of ``profile``, checked beyond the schema (every study and compared setting exists, bit
    widths and methods are known, the baseline of a setting is compared whenever another of its methods is, the
    figure seeds are among the seeds, the pooled settings compare a baseline, every interpolation period is an
    integer within the run, the train fields are valid), ValueError naming the key."""
    active = active_profile(config, profile, KEY)
    for name, setting in active["settings"].items():
        lookup(BIT_WIDTHS, str(setting["bits"]), "weight bit width", f"{KEY}.settings.{name}.bits")
    for name in active["study_settings"]:
        lookup(active["settings"], name, "setting", f"{KEY}.study_settings")
    for key in ("methods", "figure_methods", "hessian.methods"):
        section, _, field = key.rpartition(".")
        for method in (active[section] if section else active)[field]:
            lookup(METHODS, method, "method", f"{KEY}.{key}")
            if method not in active["methods"]:
                raise ValueError(f"{KEY}.{key}: {method!r} is not a study method; valid: "
                                 f"{', '.join(active['methods'])}")
    for name, methods in active["compared"].items():
        lookup(active["settings"], name, "setting", f"{KEY}.compared")
        for method in methods:
            if method not in active["methods"]:
                raise ValueError(f"{KEY}.compared.{name}: {method!r} is not a study method; valid: "
                                 f"{', '.join(active['methods'])}")
        if methods and "baseline" not in methods:
            raise ValueError(f"{KEY}.compared.{name}: the claims compare every method with the baseline of the same "
                             "seed: 'baseline' must be compared too")
    outside = [s for s in active["figure_seeds"] if s not in active["seeds"]]
    if outside:
        raise ValueError(f"{KEY}.figure_seeds {outside} are not among the seeds {active['seeds']} (a figure run's "
                         "baseline is trained on its seed)")
    for name in active["pooled_settings"]:
        lookup(active["settings"], name, "setting", f"{KEY}.pooled_settings")
    for name in active["study_settings"]:
        if "baseline" not in study_methods(active, name):
            raise ValueError(f"{KEY}: setting {name!r} has no baseline run (compared or figure_methods)")
    for group in GROUPS:
        interpolation_every(active, group)
    for name in run_names(active):
        train_config(active, name)
    pilot = active["pilot"]
    for name in pilot["settings"]:
        lookup(active["settings"], name, "setting", f"{KEY}.pilot.settings")
    for candidate, overrides in pilot["candidates"].items():
        study = merged(active, overrides)
        try:
            for group in GROUPS:
                interpolation_every(study, group)
                TrainConfig.from_dict({**study["train"], "lr": study["learning_rates"][group],
                                       "max_steps": run_steps(study, group)})
        except ValueError as err:
            raise ValueError(f"{KEY}.pilot.candidates.{candidate}: {err}") from None
    return active


def compared_methods(config: Mapping[str, Any], setting: str) -> list[str]:
    """The methods of ``setting`` whose runs the claims compare (trained on every seed), in ``methods`` order; none
    for a setting outside the study."""
    if setting not in config["study_settings"]:
        return []
    chosen = config["compared"].get(setting) or []
    return [m for m in config["methods"] if m in chosen]


def study_methods(config: Mapping[str, Any], setting: str) -> list[str]:
    """Every method ``setting`` runs: its compared ones and ``figure_methods``, in ``methods`` order."""
    chosen = {*compared_methods(config, setting), *config["figure_methods"]}
    return [m for m in config["methods"] if m in chosen]


def run_names(config: Mapping[str, Any]) -> list[str]:
    """Every run of the study (module docstring): study settings in their configured order, each with its methods
    (:func:`study_methods`)."""
    return [f"{setting}-{method}" for setting in config["study_settings"]
            for method in study_methods(config, setting)]


def run_seeds(config: Mapping[str, Any], name: str) -> list[int]:
    """The seeds of run ``name``: ``seeds`` for a compared run, else ``figure_seeds``."""
    setting, _, method = name.rpartition("-")
    return list(config["seeds"] if method in compared_methods(config, setting) else config["figure_seeds"])


def training_cells(config: Mapping[str, Any]) -> list[str]:
    """Every training cell ``<run>/seed<k>`` (:func:`common.qat.seeds.seed_cell`), run by run, seeds ascending."""
    return [seed_cell(name, seed) for name in run_names(config) for seed in sorted(run_seeds(config, name))]


def hessian_cells(config: Mapping[str, Any]) -> list[str]:
    """The cells whose Hessian spectrum the study computes: every seed of every compared run of a method in
    ``hessian.methods`` (the spectra the claims compare, paired by seed)."""
    return [seed_cell(f"{setting}-{method}", seed) for setting in config["study_settings"]
            for method in compared_methods(config, setting) if method in config["hessian"]["methods"]
            for seed in sorted(config["seeds"])]


def run_steps(config: Mapping[str, Any], group: str) -> int:
    """The run length (optimizer steps) of learning-rate group ``group``: ``train_steps[group]`` where set, else
    ``train.max_steps``."""
    return _run_length(config, group)[1]


def _run_length(config: Mapping[str, Any], group: str) -> tuple[str, int]:
    """``(the config key that sets it, the run length)`` of learning-rate group ``group`` (:func:`run_steps`)."""
    own = config.get("train_steps") or {}
    if group in own:
        return f"train_steps.{group}", int(own[group])
    return "train.max_steps", int(config["train"]["max_steps"])


def interpolation_every(config: Mapping[str, Any], group: str) -> int:
    """The interpolation period ``K = fraction x max_steps`` of learning-rate group ``group`` (``max_steps``:
    :func:`run_steps`); ValueError naming the keys when it is not an integer >= 1 (a fraction whose product with the
    run length is not whole) or exceeds the run."""
    fraction = config["interpolation"]["fraction"][group]
    length, steps = _run_length(config, group)
    every = fraction * steps
    if abs(every - round(every)) > 1e-9 or round(every) < 1:
        raise ValueError(f"{KEY}.interpolation.fraction.{group} {fraction} x {length} {steps} = {every:g} is "
                         "not an integer >= 1 (the interpolation period K in steps)")
    if round(every) > steps:
        raise ValueError(f"{KEY}.interpolation.fraction.{group} {fraction} gives K = {round(every)} above "
                         f"{length} {steps} (no interpolation would happen)")
    return round(every)


def run_config(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The part of ``config`` that run ``name`` depends on, alone: its setting, its learning-rate group's rate, the
    interpolation fraction of its group (every method: the diagnostics' period) and the strength only when its
    method interpolates, the noise sigma only when its method adds noise, the ``diagnostics`` settings, and the
    train fields with its group's run length as ``max_steps``. :func:`run_settings` and :func:`train_config` of this
    part equal those of ``config``, so a workflow reruns one run when (and only when) its own settings change (the
    seed is the cell's, a wildcard; the claims, the regime card and the paper's setup are no run's)."""
    settings = run_settings(config, name)
    group = learning_rate_group(settings["bits"], settings["activation_bits"])
    strength = {"strength": config["interpolation"]["strength"]} if settings["interpolation"] else {}
    return {
        "settings": {settings["setting"]: dict(config["settings"][settings["setting"]])},
        "study_settings": [settings["setting"]], "methods": [settings["method"]],
        "compared": {settings["setting"]: [settings["method"]]}, "figure_methods": [], "seeds": [0],
        "figure_seeds": [0], "learning_rates": {group: config["learning_rates"][group]},
        "interpolation": {**strength, "fraction": {group: config["interpolation"]["fraction"][group]}},
        "noise": {"sigma": config["noise"]["sigma"]} if settings["noise_sigma"] else {},
        "diagnostics": dict(config["diagnostics"]),
        "train": {**config["train"], "max_steps": settings["max_steps"]}}


def learning_rate_group(bits: float, activation_bits: int | None) -> str:
    """The paper's learning-rate group of a setting: ``"a8"`` with 8-bit activations, else ``"low_bit"`` for
    W <= 2 (1, 1.58, 2 bits) and ``"high_bit"`` for W >= 3 (3, 4 bits). ValueError for an unknown bit width."""
    lookup(BIT_WIDTHS, str(bits), "weight bit width")
    if activation_bits == 8:
        return "a8"
    if activation_bits is not None:
        raise ValueError(f"unknown activation bit width {activation_bits!r}; valid: None (A16), 8")
    return "low_bit" if bits <= 2 else "high_bit"


def run_settings(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The settings of run ``name``: ``setting``, ``bits``, ``activation_bits``, ``method``, ``lr`` and ``max_steps``
    (of the setting's :func:`learning_rate_group`; :func:`run_steps`), ``interpolation`` (``{"every", "strength"}``
    for ``winq`` and ``interpolation``, ``every`` = :func:`interpolation_every` of the group; else None),
    ``noise_sigma`` (``noise.sigma`` for ``winq`` and ``noise``, else 0.0), ``hadamard`` (the setting's flag,
    default false), ``diagnostics_every`` (the period of the mechanism records, :func:`interpolation_every` of the
    group for every method: a run without interpolation records at the same boundaries ``K, 2K, ...`` as the
    interpolating runs of its setting, so they pair step for step). ValueError naming a name that is not
    ``<study setting>-<method>`` of a method the setting runs."""
    setting, _, method = name.rpartition("-")
    if not setting:
        raise ValueError(f"run name {name!r} is not <setting>-<method>")
    if setting not in config["study_settings"]:
        raise ValueError(f"run {name!r}: {setting!r} is not a study setting; valid: "
                         f"{', '.join(config['study_settings'])}")
    if method not in config["methods"]:
        raise ValueError(f"run {name!r}: unknown method {method!r}; valid: {', '.join(config['methods'])}")
    if method not in study_methods(config, setting):
        raise ValueError(f"run {name!r}: setting {setting!r} runs {', '.join(study_methods(config, setting))}")
    entry = config["settings"][setting]
    bits, activation_bits = entry["bits"], entry["activation_bits"]
    group = learning_rate_group(bits, activation_bits)
    components = METHODS[method]
    return {"setting": setting, "bits": bits, "activation_bits": activation_bits, "method": method,
            "lr": config["learning_rates"][group], "max_steps": run_steps(config, group),
            "interpolation": ({"every": interpolation_every(config, group),
                               "strength": config["interpolation"]["strength"]} if components.interpolate else None),
            "noise_sigma": float(config["noise"]["sigma"]) if components.noise else 0.0,
            "hadamard": bool(entry.get("hadamard", False)), "diagnostics_every": interpolation_every(config, group)}


def train_config(config: Mapping[str, Any], name: str, seed: int = 0) -> TrainConfig:
    """The :class:`common.train.TrainConfig` of run ``name``: the ``train`` fields, its group's learning rate and run
    length, the cell's ``seed`` (data order, initialisation and noise), no progress bar."""
    settings = run_settings(config, name)
    return TrainConfig.from_dict({**config["train"], "lr": settings["lr"], "max_steps": settings["max_steps"],
                                  "seed": seed, "progress": False})


def period_lr_sums(train: TrainConfig, every: int) -> list[float]:
    """The learning rate summed over each interpolation period, ``S_k = sum_{t=(k-1)K}^{kK-1} lr_t`` for
    ``k = 1 .. N // K`` (``lr_t``: :func:`common.train.learning_rate` of 0-based optimizer step ``t``; the
    interpolations follow optimizer steps ``K, 2K, ..`` counted from 1; a tail shorter than ``K`` is no period).
    ValueError unless ``1 <= every <= max_steps``."""
    if isinstance(every, bool) or not isinstance(every, int) or not 1 <= every <= train.max_steps:
        raise ValueError(f"the interpolation period K must be an integer in [1, max_steps = {train.max_steps}], "
                         f"got {every!r}")
    return [math.fsum(learning_rate(t, train) for t in range(start, start + every))
            for start in range(0, train.max_steps - every + 1, every)]
