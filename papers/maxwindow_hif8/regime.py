"""The regime card of the Max-Window paper (:mod:`common.report.regime`): our value of every quantity of
``config.yaml`` ``regime:``, measured from the config the runs were trained with and the recipe's artifacts.

* ``lr_ratio`` = ``learning_rates.high / learning_rates.low``: the high-rate runs' peak learning rate over the
  low-rate ones' (the recipe's); the paper's 1e-4 / 1e-5 (:func:`lr_ratio`);
* ``warmup_share`` = ``bf16_warmup_steps / train.max_steps``: the share of the optimizer steps trained in BF16
  before HiF8 is switched on (:func:`warmup_share`);
* ``window_steps`` = ``window / e``: max_window's history length in optimizer steps, ``window`` its entries and
  ``e`` the entries one optimizer step adds to a role's history, ``e = grad_accum`` with one entry per call
  (``history_unit="call"``: one forward and one backward per micro-batch, :mod:`common.quantizers.w8a8`) and ``e = 1``
  with one per step (:func:`window_steps`);
* ``quantized_share`` = ``sum_l n_l / N``: the parameters ``n_l`` of the linears ``l`` QAT quantized (the layers of
  the recipe's telemetry, their weight shapes from its HiF8 checkpoint's quantization record) over the model's
  parameters ``N`` (its BF16 evaluation record: ``model.parameters()``, a tied weight counted once), of the recipe's
  first seed (:func:`quantized_share`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from common.observers import make_observer
from common.report import RegimeRow, regime_rows, regime_specs
from common.select import block_index

from .claims import Study
from .settings import KEY, recipe

CONFIG_KEYS = ("learning_rates", "bf16_warmup_steps", "train", "observer_options", "history_unit", "regime")


def lr_ratio(config: Mapping[str, Any]) -> float:
    """``learning_rates.high / learning_rates.low``."""
    rates = config["learning_rates"]
    return rates["high"] / rates["low"]


def warmup_share(config: Mapping[str, Any]) -> float:
    """``bf16_warmup_steps / train.max_steps``."""
    return config["bf16_warmup_steps"] / config["train"]["max_steps"]


def entries_per_step(config: Mapping[str, Any]) -> int:
    """History entries one optimizer step adds to a role's history: ``train.grad_accum`` (default 1) for
    ``history_unit="call"``, 1 for ``"step"``."""
    return config["train"].get("grad_accum", 1) if config["history_unit"] == "call" else 1


def window_entries(config: Mapping[str, Any]) -> int:
    """max_window's history length: ``observer_options.max_window.window``, else the observer's default."""
    return make_observer("max_window", **config["observer_options"].get("max_window", {})).window


def window_steps(config: Mapping[str, Any]) -> float:
    """:func:`window_entries` over :func:`entries_per_step`."""
    return window_entries(config) / entries_per_step(config)


def _blocks(layers: Sequence[str]) -> str:
    """`` in blocks a–b`` (``a, c`` when not contiguous; `` in block a`` for one) of the layer names' transformer
    blocks; "" when some name has none."""
    indices = [block_index(name) for name in layers]
    if None in indices:
        return ""
    blocks = sorted(set(indices))
    if len(blocks) == 1:
        return f" in block {blocks[0]}"
    contiguous = blocks == list(range(blocks[0], blocks[-1] + 1))
    return f" in blocks {blocks[0]}–{blocks[-1]}" if contiguous else f" in blocks {', '.join(map(str, blocks))}"


def quantized_share(layers: Sequence[str], quantization: Mapping[str, Any], parameters: int) -> tuple[float, str]:
    """``(sum_l n_l / N, how)``: ``n_l`` the product of layer ``l``'s weight shape in ``quantization["weights"]``
    (a HiF8 checkpoint's record), ``N = parameters``; ValueError naming a layer without a shape or a count that is
    not positive."""
    shapes = quantization.get("weights", {})
    missing = [name for name in layers if name not in shapes]
    if missing or not layers:
        raise ValueError(f"the HiF8 checkpoint record has no weight shape of the QAT layers {missing or 'none'} "
                         f"(it records {sorted(shapes) or 'no weight'})")
    if not (isinstance(parameters, int) and parameters > 0):
        raise ValueError(f"the model's parameter count must be a positive integer, got {parameters!r}")
    quantized = sum(math.prod(shapes[name]["shape"]) for name in layers)
    kinds = ", ".join(dict.fromkeys(name.rsplit(".", 1)[-1] for name in layers))
    tied = "tied weights counted once" if quantization.get("tied") else "no tied weights"
    linears = (f"{len(layers)} linears ({kinds}){_blocks(layers)} hold" if len(layers) > 1
               else f"1 linear ({kinds}){_blocks(layers)} holds")
    return quantized / parameters, f"{linears} {quantized:,} of the model's {parameters:,} parameters; {tied}"


def regime_values(study: Study) -> tuple[dict[str, float], dict[str, str]]:
    """Our value of every regime quantity and how it was measured (module docstring), from ``study.config`` and the
    recipe's first seed; ValueError naming config keys the claims step was not given."""
    config = study.config
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"{KEY}: the regime card needs the config keys {missing} (pass them to the claims step)")
    run, seed = recipe(config), study.seeds[0]
    layers = list(dict.fromkeys(row["layer"] for row in study.run_telemetry(run, seed).data))
    hif8, bf16 = (study.evaluation(precision, run, seed, "pretrain") for precision in ("hif8", "bf16"))
    share, how = quantized_share(layers, hif8.data.get("quantization") or {}, bf16.data["model"].get("parameters"))
    rates, train = config["learning_rates"], config["train"]
    per_step = (f"{entries_per_step(config)} per optimizer step (one per call, grad_accum "
                f"{train.get('grad_accum', 1)})" if config["history_unit"] == "call"
                else "1 per optimizer step (history_unit step)")
    measured = {"lr_ratio": lr_ratio(config), "warmup_share": warmup_share(config),
                "window_steps": window_steps(config), "quantized_share": share}
    notes = {"lr_ratio": f"{rates['high']:g} / {rates['low']:g}",
             "warmup_share": f"{config['bf16_warmup_steps']} of {train['max_steps']} steps",
             "window_steps": f"{window_entries(config)} entries, {per_step}",
             "quantized_share": f"{how} ({run}, seed {seed})"}
    return measured, notes


def regime_card(study: Study) -> list[RegimeRow]:
    """The card's rows: ``study.config["regime"]``'s specs with :func:`regime_values`, in the order of
    :func:`regime_values` (the config reaches the claims step as key-sorted JSON)."""
    measured, notes = regime_values(study)
    specs = regime_specs(study.config["regime"], f"{KEY}.regime")
    ordered = {rid: specs[rid] for rid in measured if rid in specs} | specs
    return regime_rows(ordered, measured, notes)
