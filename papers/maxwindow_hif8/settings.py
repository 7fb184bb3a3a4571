"""The study's configuration and its runs.

The grid mirrors the paper's eight experiments: every observer x learning rate {high, low} x BF16 warmup
{0, W}, plus an unquantized (BF16) baseline at each learning rate -- 4 x 2 x 2 + 2 = 18 runs. A run is named
``bf16-lr<rate>`` or ``<observer>-lr<rate>-w<warmup steps>``, e.g. ``max_window-lrlow-w40`` (the paper's recipe:
max_window, warmup, low learning rate).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from common.config import active_profile
from common.formats import FORMATS
from common.observers import OBSERVER_NAMES
from common.ptq import QuantRecipe
from common.registry import lookup
from common.train import TrainConfig

KEY = "maxwindow_hif8"
FIGURES = ("loss-curves", "saturation", "downstream", "forgetting", "observer-study")  # the report's figure kinds = ids
RUN = re.compile(r"(?:bf16-lr(?P<bf16_rate>high|low))|(?:(?P<observer>[a-z_]+)-lr(?P<rate>high|low)-w(?P<warmup>\d+))")


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
    return active


def run_names(config: Mapping[str, Any]) -> list[str]:
    """Every run of the grid (module docstring), baselines first."""
    warmups = (0, config["bf16_warmup_steps"])
    return [f"bf16-lr{rate}" for rate in ("high", "low")] + [
        f"{observer}-lr{rate}-w{warmup}" for observer in config["observers"] for rate in ("high", "low")
        for warmup in warmups]


def run_settings(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``{"observer" (None for BF16), "rate", "lr", "warmup_steps", "observer_options"}`` of a run name."""
    match = RUN.fullmatch(name)
    if match is None:
        raise ValueError(f"run name {name!r} is not bf16-lr<high|low> or <observer>-lr<high|low>-w<steps>")
    if match["bf16_rate"]:
        rate, observer, warmup = match["bf16_rate"], None, 0
    else:
        rate, observer, warmup = match["rate"], match["observer"], int(match["warmup"])
        if observer not in OBSERVER_NAMES:
            raise ValueError(f"run {name!r}: unknown observer {observer!r}; valid: {', '.join(OBSERVER_NAMES)}")
    return {"observer": observer, "rate": rate, "lr": config["learning_rates"][rate], "warmup_steps": warmup,
            "observer_options": dict(config["observer_options"].get(observer, {})) if observer else {}}


def train_config(config: Mapping[str, Any], rate: str, seed: int = 0) -> TrainConfig:
    """The :class:`common.train.TrainConfig` of every run at learning rate ``rate`` (same data order: ``seed``)."""
    return TrainConfig.from_dict({**config["train"], "lr": config["learning_rates"][rate], "seed": seed,
                                  "progress": False})
