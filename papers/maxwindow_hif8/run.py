"""One continual-pretraining run of the study: a pretrained checkpoint trained further on a shifted corpus,
either unquantized (the BF16 baseline; "BF16" = the model's own precision) or with HiF8 W8A8 QAT (a
:class:`common.recipes.DelayedScalingRecipe` through the front door, :func:`common.quantization.prepare`, on the
paper's selection :func:`common.quantizers.w8a8_selection`: MLP gate/up/down, the first 3 and last 2 of 26 blocks, or
the
same proportion, left unquantized) with one amax observer, its
history unit (``"call"``: one entry per forward / backward call, i.e. per micro-batch, as the authors' code;
``"step"``: one per optimizer step), its amax reduction across data-parallel ranks (``"none"``: per rank, as the
authors' code; ``"data_parallel"``: the maximum over the ranks, under ``torchrun``) and an optional BF16 warmup of
``warmup_steps`` optimizer steps (:class:`common.qat.BF16Warmup`).

The run is :func:`common.qat.run.qat_run` with a :class:`W8A8Attachment` (resume and the stale-checkpoint guard are
the skeleton's; the seed ``config.seed`` fixes the data order). Outputs: the trained checkpoint of the latent
weights (``lowbit_metadata.json`` records the run and its saturation summary), and in ``run_dir`` the training logs
of :func:`common.train.train`, ``qat.json`` (the run's record), ``telemetry.csv.gz`` (:data:`TELEMETRY_FILE`: one
row per quantized layer, tensor role and call, gzip-compressed; the header alone for the baseline) and
``saturation.json`` (:func:`common.quantizers.saturation_summary`).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from common.io import atomic_path, write_json
from common.observers import OBSERVER_NAMES
from common.qat import BF16Warmup
from common.qat.run import Attachment, qat_run
from common.quantization import prepare
from common.quantizers import TELEMETRY_FIELDS, W8A8Handle, saturation_summary, w8a8_selection
from common.recipes import DelayedScalingRecipe, recipe_to_dict
from common.train import TrainConfig

# The telemetry's CSV (common.quantizers' format), gzip-compressed: a default run's 35,000-46,000 rows take 5-7 MB
# as text and about a sixth of that compressed, what keeps the published results within their budget
TELEMETRY_FILE = "telemetry.csv.gz"


def write_gzip(source: Path, out: Path) -> None:
    """The bytes of ``source`` gzip-compressed (level 9) into ``out``, with no file name and mtime 0 in the header, so
    that the same content gives the same bytes (``make verify`` compares the CSV inside, SHA256SUMS the bytes)."""
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw,
                                               mtime=0) as packed:
        packed.write(source.read_bytes())


class W8A8Attachment(Attachment):
    """A run's W8A8 QAT (``handle`` with its BF16 warmup hooks) or, with ``handle=None``, the unquantized baseline;
    after training it writes :data:`TELEMETRY_FILE` and ``saturation.json`` into the run folder (the baseline: the
    header alone and ``{}``, so every run has the same files)."""

    def __init__(self, record: Mapping[str, Any], handle: W8A8Handle | None = None, warmup_steps: int = 0) -> None:
        super().__init__(record, BF16Warmup(handle, warmup_steps) if handle is not None else None)
        self.handle = handle

    def finish(self, run_dir: Path) -> dict[str, Any]:
        saturation: dict[str, Any] = {}
        with atomic_path(run_dir / TELEMETRY_FILE) as packed:
            text = packed.with_name(packed.name + ".csv")  # the CSV beside it, removed once compressed
            try:
                if self.handle is not None:
                    self.handle.write_telemetry(text)
                    saturation = saturation_summary(self.handle.telemetry_rows())
                else:
                    text.write_text(",".join(TELEMETRY_FIELDS) + "\n", encoding="utf-8")
                write_gzip(text, packed)
            finally:
                text.unlink(missing_ok=True)
        write_json(run_dir / "saturation.json", saturation)
        return {"saturation": saturation}


def maxwindow_run(init: str | os.PathLike[str], train_split: str | os.PathLike[str],
                  validation_split: str | os.PathLike[str] | None, config: TrainConfig,
                  run_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, observer: str | None,
                  warmup_steps: int = 0, fmt: str = "hif8", observer_options: Mapping[str, Any] | None = None,
                  max_val: float = 15.0, history_unit: str = "call", amax_reduction: str = "none",
                  device: torch.device | None = None) -> dict[str, Any]:
    """Train one run (module docstring) on ``device`` (None: CUDA when present); ``observer=None`` is the unquantized
    baseline. Returns the metadata of
    :func:`common.qat.run.qat_run` (``qat``: observer, format, warmup_steps, max_val, observer_options,
    history_unit, layers, the run's :class:`common.recipes.DelayedScalingRecipe` record (None for BF16; it holds
    ``amax_reduction``) and the saturation summary). ValueError for a bad setting, before anything is loaded."""
    if observer is not None and observer not in OBSERVER_NAMES:
        raise ValueError(f"unknown observer {observer!r}; valid: {', '.join(OBSERVER_NAMES)} (or None for BF16)")
    if not 0 <= warmup_steps <= config.max_steps:
        raise ValueError(f"warmup_steps must be in [0, max_steps={config.max_steps}], got {warmup_steps}")
    quantized = observer is not None
    recipe = DelayedScalingRecipe(fmt, max_val, observer, tuple((observer_options or {}).items()), history_unit,
                                  amax_reduction=amax_reduction) if quantized else None

    def attach(model: torch.nn.Module) -> W8A8Attachment:
        layers = w8a8_selection(model) if quantized else []
        record = {"observer": observer, "format": fmt if quantized else None, "warmup_steps": warmup_steps,
                  "max_val": max_val, "observer_options": dict(observer_options or {}),
                  "history_unit": history_unit if quantized else None, "layers": layers,
                  "recipe": None if recipe is None else recipe_to_dict(recipe)}
        if not quantized:
            return W8A8Attachment(record)
        return W8A8Attachment(record, prepare(model, recipe, names=layers), warmup_steps)

    return qat_run(init, train_split, validation_split, config, run_dir, out, attach, device)
