"""The study's configuration and its runs.

The runs are those the claims compare (:data:`STUDY_RUNS`, of the paper's eight experiments amax algorithm x
learning rate x warmup, plus a BF16 baseline per learning rate): the BF16 baselines at both rates, the paper's
recipe (max_window, BF16 warmup W, low learning rate), its three one-change ablations (most_recent, no warmup, the
high rate), current tensor scaling (CTS) at both rates and exp_smooth at the recipe's settings -- 9 runs with
every observer configured, each trained with every seed of ``seeds`` (the cell ``<run>/seed<k>``). A run is named
``bf16-lr<rate>`` or ``<observer>-lr<rate>-w<warmup steps>``, e.g. ``max_window-lrlow-w40``. Grid cells no claim or
figure reads (exp_smooth at the high rate, most_recent without warmup, ...) are not trained.

The negative controls (:data:`CONTROL_RUNS`): the recipe with one setting of ``variants:`` changed (e.g.
``coarse_scale``: a ``max_val`` that puts every tensor in HiF8's coarse outer tiers), named
``<observer>-lr<rate>-w<warmup>-<variant>``, trained with every seed when the config names the variant; each is a
variant that should break the bounds of the near-lossless rows (the config's ``control`` rows).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from common.config import active_profile
from common.formats import FORMATS
from common.observers import OBSERVER_NAMES
from common.recipes import QuantRecipe
from common.registry import lookup
from common.train import TrainConfig

KEY = "maxwindow_hif8"
FIGURES = ("loss-curves", "saturation", "downstream", "forgetting", "observer-study")  # the report's figure kinds = ids
RUN = re.compile(r"(?:bf16-lr(?P<bf16_rate>high|low))|(?:(?P<observer>[a-z_]+)-lr(?P<rate>high|low)-w(?P<warmup>\d+)"
                 r"(?:-(?P<variant>[a-z_]+))?)")


def profile_config(config: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The study config of ``profile``, checked beyond the schema (format, warmup within the run, the train
    fields and the checkpoint recipe are valid), ValueError naming the offending key."""
    active = active_profile(config, profile, KEY)
    lookup(FORMATS, active["format"], "format", f"{KEY}.format")
    if active["bf16_warmup_steps"] >= active["train"]["max_steps"]:
        raise ValueError(f"{KEY}.bf16_warmup_steps {active['bf16_warmup_steps']} must be below train.max_steps "
                         f"{active['train']['max_steps']}")
    train_config(active, "low")
    QuantRecipe.from_dict(active["checkpoint_quantization"])
    high, low = active["learning_rates"]["high"], active["learning_rates"]["low"]
    if not high > low:
        raise ValueError(f"{KEY}.learning_rates: high {high} must be above low {low}")
    if "max_window" not in active["observers"]:
        raise ValueError(f"{KEY}.observers must include max_window (the recipe), got {active['observers']}")
    return active


STUDY_RUNS = (  # (observer or None for BF16, rate, warmup: "W" = bf16_warmup_steps or 0), the claims' runs
    (None, "low", 0), (None, "high", 0), ("max_window", "low", "W"), ("most_recent", "low", "W"),
    ("max_window", "low", 0), ("max_window", "high", "W"), ("current", "low", "W"), ("current", "high", "W"),
    ("exp_smooth", "low", "W"))
CONTROL_RUNS = (("max_window", "low", "W", "coarse_scale"),)  # (observer, rate, warmup, variant): the controls


def run_name(observer: str | None, rate: str, warmup: int, variant: str | None = None) -> str:
    """``bf16-lr<rate>`` for ``observer=None``, else ``<observer>-lr<rate>-w<warmup>`` (``-<variant>`` added for a
    control)."""
    if observer is None:
        return f"bf16-lr{rate}"
    return f"{observer}-lr{rate}-w{warmup}" + (f"-{variant}" if variant else "")


def run_names(config: Mapping[str, Any]) -> list[str]:
    """The runs of the study (module docstring) whose observer the profile configures, baselines first, then the
    controls whose variant the config names (``variants``)."""
    warmup = config["bf16_warmup_steps"]
    study = [run_name(observer, rate, warmup if w == "W" else w) for observer, rate, w in STUDY_RUNS
             if observer is None or observer in config["observers"]]
    controls = [run_name(observer, rate, warmup if w == "W" else w, variant)
                for observer, rate, w, variant in CONTROL_RUNS
                if observer in config["observers"] and variant in config.get("variants", {})]
    return study + controls


def control_run(config: Mapping[str, Any], variant: str) -> str:
    """The control run of ``variant`` (:data:`CONTROL_RUNS`)."""
    for observer, rate, w, name in CONTROL_RUNS:
        if name == variant:
            return run_name(observer, rate, config["bf16_warmup_steps"] if w == "W" else w, name)
    raise ValueError(f"no control run of variant {variant!r}; controls: {[c[3] for c in CONTROL_RUNS]}")


def recipe(config: Mapping[str, Any]) -> str:
    """The paper's recipe: ``max_window-lrlow-w<W>``."""
    return run_name("max_window", "low", config["bf16_warmup_steps"])


def run_settings(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``{"observer" (None for BF16), "rate", "lr", "warmup_steps", "observer_options", "variant" (None but for a
    control), "max_val"}`` of a run name (a control's ``max_val`` from ``config["variants"][variant]``, else the
    config's)."""
    match = RUN.fullmatch(name)
    if match is None:
        raise ValueError(f"run name {name!r} is not bf16-lr<high|low> or <observer>-lr<high|low>-w<steps>")
    if match["bf16_rate"]:
        rate, observer, warmup, variant = match["bf16_rate"], None, 0, None
    else:
        rate, observer, warmup, variant = match["rate"], match["observer"], int(match["warmup"]), match["variant"]
        if observer not in OBSERVER_NAMES:
            raise ValueError(f"run {name!r}: unknown observer {observer!r}; valid: {', '.join(OBSERVER_NAMES)}")
    overrides: Mapping[str, Any] = {}
    if variant is not None:
        variants = config.get("variants", {})
        if variant not in variants:
            raise ValueError(f"run {name!r}: variant {variant!r} is not among the config's variants "
                             f"{sorted(variants)}")
        overrides = variants[variant]
    return {"observer": observer, "rate": rate, "lr": config["learning_rates"][rate], "warmup_steps": warmup,
            "observer_options": dict(config["observer_options"].get(observer, {})) if observer else {},
            "variant": variant, "max_val": overrides.get("max_val", config.get("max_val"))}


def train_config(config: Mapping[str, Any], rate: str, seed: int = 0) -> TrainConfig:
    """The :class:`common.train.TrainConfig` of every run at learning rate ``rate`` and seed ``seed`` (the runs of
    one seed share its data order, so they are compared paired by seed)."""
    return TrainConfig.from_dict({**config["train"], "lr": config["learning_rates"][rate], "seed": seed,
                                  "progress": False})
