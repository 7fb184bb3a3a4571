"""The study's configuration and its runs.

The grid: every study setting (``study_settings``, names of ``settings``: a weight bit width and ``null`` or 8
activation bits) x every method (``methods``: ``baseline`` = ParetoQ QAT, ``winq`` = interpolation + noise, and the
ablations ``interpolation`` and ``noise``), 6 x 4 = 24 runs by default. A run is named ``<setting>-<method>``, e.g.
``w2-winq``, ``w1.58-baseline``, ``w2a8-noise`` (setting names hold no ``-``: the schema allows ``[a-z0-9.]``).

Learning rates come per setting group, as in the paper (:func:`learning_rate_group`): ``low_bit`` (W <= 2, A16),
``a8`` (8-bit activations, any W), ``high_bit`` (W >= 3, A16).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.config import active_profile
from common.qat.lowbit import LOWBIT_BITS
from common.registry import lookup
from common.train import TrainConfig

from .run import METHODS

KEY = "winq"
FIGURES = ("curves", "final", "spectra", "spectra-winq", "hessian-stats")  # the report's figure kinds = ids
BIT_WIDTHS = {str(bits): bits for bits in LOWBIT_BITS}  # by their YAML spelling: "1", "1.58", "2", "3", "4"


def profile_config(config: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The study config of ``profile``, checked beyond the schema (every study setting exists, bit widths and methods
    are known, interpolation happens within the run, the train fields are valid), ValueError naming the key."""
    active = active_profile(config, profile, KEY)
    for name, setting in active["settings"].items():
        lookup(BIT_WIDTHS, str(setting["bits"]), "weight bit width", f"{KEY}.settings.{name}.bits")
    for name in active["study_settings"]:
        lookup(active["settings"], name, "setting", f"{KEY}.study_settings")
    for method in active["methods"]:
        lookup(METHODS, method, "method", f"{KEY}.methods")
    for method in active["hessian"]["methods"]:
        if method not in active["methods"]:
            raise ValueError(f"{KEY}.hessian.methods: {method!r} is not a study method; valid: "
                             f"{', '.join(active['methods'])}")
    every, steps = active["interpolation"]["every"], active["train"]["max_steps"]
    if every >= steps:
        raise ValueError(f"{KEY}.interpolation.every {every} must be below train.max_steps {steps} (no interpolation "
                         "would happen)")
    for name in run_names(active):
        train_config(active, name)
    return active


def run_names(config: Mapping[str, Any]) -> list[str]:
    """Every run of the grid (module docstring): study settings in their configured order, each with every method
    in the configured order."""
    return [f"{setting}-{method}" for setting in config["study_settings"] for method in config["methods"]]


def hessian_runs(config: Mapping[str, Any]) -> list[str]:
    """The runs whose Hessian spectrum the study computes: every study setting with each of ``hessian.methods``."""
    return [f"{setting}-{method}" for setting in config["study_settings"] for method in config["hessian"]["methods"]]


def run_config(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The part of ``config`` that run ``name`` depends on, alone: its setting, its learning-rate group's rate, the
    interpolation and noise settings only when its method uses them (the noise seed always), the Hadamard flag and
    the train fields. :func:`run_settings` and :func:`train_config` of this part equal those of ``config``, so a
    workflow can rerun one run when (and only when) its own settings change."""
    settings = run_settings(config, name)
    group = learning_rate_group(settings["bits"], settings["activation_bits"])
    part = {"settings": {settings["setting"]: dict(config["settings"][settings["setting"]])},
            "study_settings": [settings["setting"]], "methods": [settings["method"]],
            "learning_rates": {group: config["learning_rates"][group]}, "hadamard": config["hadamard"],
            "noise": dict(config["noise"]) if settings["noise_sigma"] else {"seed": config["noise"]["seed"]},
            "train": dict(config["train"])}
    if settings["interpolation"]:
        part["interpolation"] = dict(config["interpolation"])
    return part


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
    """The settings of run ``name``: ``setting``, ``bits``, ``activation_bits``, ``method``, ``lr`` (of the setting's
    :func:`learning_rate_group`), ``interpolation`` (``{"every", "strength"}`` for ``winq`` and ``interpolation``,
    else None), ``noise_sigma`` (``noise.sigma`` for ``winq`` and ``noise``, else 0.0), ``noise_seed``,
    ``hadamard``. ValueError naming a name that is not ``<study setting>-<method>`` of this config."""
    setting, _, method = name.rpartition("-")
    if not setting:
        raise ValueError(f"run name {name!r} is not <setting>-<method>")
    if setting not in config["study_settings"]:
        raise ValueError(f"run {name!r}: {setting!r} is not a study setting; valid: "
                         f"{', '.join(config['study_settings'])}")
    if method not in config["methods"]:
        raise ValueError(f"run {name!r}: unknown method {method!r}; valid: {', '.join(config['methods'])}")
    bits, activation_bits = config["settings"][setting]["bits"], config["settings"][setting]["activation_bits"]
    components = METHODS[method]
    return {"setting": setting, "bits": bits, "activation_bits": activation_bits, "method": method,
            "lr": config["learning_rates"][learning_rate_group(bits, activation_bits)],
            "interpolation": ({"every": config["interpolation"]["every"],
                               "strength": config["interpolation"]["strength"]} if components.interpolate else None),
            "noise_sigma": float(config["noise"]["sigma"]) if components.noise else 0.0,
            "noise_seed": config["noise"]["seed"], "hadamard": config["hadamard"]}


def train_config(config: Mapping[str, Any], name: str, seed: int = 0) -> TrainConfig:
    """The :class:`common.train.TrainConfig` of run ``name``: the ``train`` fields, its group's learning rate, data
    order ``seed`` (the same for every run), no progress bar."""
    return TrainConfig.from_dict({**config["train"], "lr": run_settings(config, name)["lr"], "seed": seed,
                                  "progress": False})
