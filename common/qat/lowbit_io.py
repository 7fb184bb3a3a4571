"""Files of a low-bit QAT checkpoint (ParetoQ quantizers, :mod:`common.quantizers.lowbit`) and the trained model they
hold.

A low-bit QAT checkpoint folder (written by :func:`common.qat.run.qat_run` with a :class:`LowBitAttachment`, e.g.
``papers.winq.run.winq_run``) is a plain HF checkpoint of the *latent* weights (:func:`common.models.save_checkpoint`)
plus

* ``lowbit_scales.safetensors`` (:data:`SCALES_FILE`): the learned scales, one float32 tensor ``<module name>.alpha``
  (out x 1) per quantized layer (:func:`lowbit_scales`, :func:`save_lowbit_scales`);
* ``lowbit_metadata.json`` (:data:`METADATA_FILE`, written by ``save_checkpoint``) with a ``qat`` record
  (:func:`lowbit_record`): ``format_version`` (:data:`LOWBIT_RECORD_VERSION`), ``bits``, ``activation_bits``,
  ``hadamard``, ``layers``, and the run's method settings after them.

Versions: this writer writes record version 1; the reader reads :data:`READABLE_RECORD_VERSIONS` and refuses a
record without a version (written before versioning) or of another version, naming it.

:func:`load_lowbit_layers` re-attaches the quantizers (through :func:`common.quantization.prepare`) with these scales,
so the effective weights ``Q(W)`` are exactly those at the end of training. It is the loader of the checkpoint kind
``"lowbit_qat"`` (marker :data:`SCALES_FILE`) registered here, so :func:`common.models.load_checkpoint` loads such a
folder as the trained low-bit model; :func:`load_lowbit_model` is that, refusing any other kind.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from common.io import atomic_path, read_json
from common.models import (
    CHECKPOINT_MARKERS,
    METADATA_FILE,
    CheckpointKind,
    load_checkpoint,
    load_float_model,
    register_checkpoint_kind,
)
from common.quantization import prepare
from common.quantizers import LowBitHandle
from common.recipes import LowBitRecipe, recipe_to_dict
from common.train import Hooks

from .run import Attachment

SCALES_FILE = CHECKPOINT_MARKERS["lowbit_qat"].marker  # "lowbit_scales.safetensors"
LOWBIT_RECORD_VERSION = 1
READABLE_RECORD_VERSIONS = (1,)
RECORD_FIELDS = ("format_version", "bits", "activation_bits", "hadamard", "layers")  # what the reader needs
__all__ = ["LOWBIT_RECORD_VERSION", "METADATA_FILE", "READABLE_RECORD_VERSIONS", "SCALES_FILE", "LowBitAttachment",
           "load_lowbit_layers", "load_lowbit_model", "lowbit_record", "lowbit_scales", "read_lowbit_record",
           "save_lowbit_scales"]


def lowbit_record(handle: LowBitHandle, **method: Any) -> dict[str, Any]:
    """The checkpoint's ``qat`` record of ``handle``: :data:`RECORD_FIELDS` (``format_version`` =
    :data:`LOWBIT_RECORD_VERSION`, the handle's bits, activation bits, Hadamard flag and layers), ``recipe`` (the
    handle's :class:`common.recipes.LowBitRecipe`, :func:`common.recipes.recipe_to_dict`), then the method's settings
    ``method`` (JSON values; they may not redefine a record field)."""
    clash = sorted(set(method) & {*RECORD_FIELDS, "recipe"})
    if clash:
        raise ValueError(f"method setting {clash[0]!r} would overwrite a low-bit record field")
    return {"format_version": LOWBIT_RECORD_VERSION, "bits": handle.bits, "activation_bits": handle.activation_bits,
            "hadamard": handle.hadamard, "layers": list(handle.names), "recipe": recipe_to_dict(handle.recipe),
            **method}


class LowBitAttachment(Attachment):
    """A low-bit QAT method for :func:`common.qat.run.qat_run`: ``handle`` (of :func:`common.quantization.prepare`
    with a :class:`common.recipes.LowBitRecipe`), its training ``hooks`` and the record (:func:`lowbit_record`).
    After training it keeps the learned scales (the skeleton then releases the quantizers) and writes
    :data:`SCALES_FILE` into the checkpoint, so :func:`load_lowbit_model` rebuilds ``Q(W)`` exactly."""

    def __init__(self, handle: LowBitHandle, hooks: Hooks | None = None, **method: Any) -> None:
        super().__init__(lowbit_record(handle, **method), hooks)
        self.handle = handle
        self._scales: dict[str, torch.Tensor] = {}

    def finish(self, run_dir: Path) -> dict[str, Any]:
        self._scales = lowbit_scales(self.handle)
        return {}

    def save(self, out: Path) -> None:
        save_lowbit_scales(self._scales, out)


def lowbit_scales(handle: LowBitHandle) -> dict[str, torch.Tensor]:
    """``{"<name>.alpha": alpha}`` of every layer of ``handle``: detached contiguous CPU copies (the tensors of
    :data:`SCALES_FILE`)."""
    return {f"{name}.alpha": alpha.detach().cpu().contiguous().clone() for name, alpha in handle.alphas().items()}


def save_lowbit_scales(scales: Mapping[str, torch.Tensor], folder: str | os.PathLike[str]) -> Path:
    """Write ``scales`` (:func:`lowbit_scales`) to ``folder/lowbit_scales.safetensors`` atomically; returns the
    path. Write it after the checkpoint itself (``save_checkpoint`` replaces the whole folder)."""
    path = Path(folder) / SCALES_FILE
    with atomic_path(path) as tmp:
        save_file(dict(scales), str(tmp))
    return path


def read_lowbit_record(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``qat`` record of the low-bit QAT checkpoint ``folder``; ValueError naming the folder when it has no
    :data:`SCALES_FILE`, its :data:`METADATA_FILE` has no ``qat`` record with ``bits``, or the record's
    ``format_version`` is missing or not in :data:`READABLE_RECORD_VERSIONS`."""
    folder = Path(folder)
    if not (folder / SCALES_FILE).is_file():
        raise ValueError(f"{str(folder)!r} is not a low-bit QAT checkpoint: no {SCALES_FILE}")
    metadata = read_json(folder / METADATA_FILE) if (folder / METADATA_FILE).is_file() else {}
    qat = metadata.get("qat")
    if not qat or "bits" not in qat:
        raise ValueError(f"{str(folder / METADATA_FILE)!r} has no low-bit QAT record ('qat' with 'bits')")
    if qat.get("format_version") not in READABLE_RECORD_VERSIONS:
        raise ValueError(f"{str(folder / METADATA_FILE)!r}: low-bit QAT record version {qat.get('format_version')!r};"
                         f" this reader reads versions {', '.join(map(str, READABLE_RECORD_VERSIONS))} (a record "
                         "without one predates versioning: retrain or rewrite it)")
    missing = [field for field in RECORD_FIELDS if field not in qat]
    if missing:
        raise ValueError(f"{str(folder / METADATA_FILE)!r}: the low-bit QAT record lacks {missing[0]!r}")
    return qat


def load_lowbit_layers(folder: str | os.PathLike[str]) -> tuple[torch.nn.Module, LowBitHandle]:
    """``(model, handle)`` of a low-bit QAT checkpoint (module docstring): the latent weights
    (:func:`common.models.load_float_model`) prepared with the run's quantizers (:func:`read_lowbit_record`: bits,
    activation bits, Hadamard, layers; :func:`common.quantization.prepare`) and the learned scales of
    :data:`SCALES_FILE`; noise off, eval mode. Its effective weights ``Q(W)`` equal those at the end of training
    exactly. ValueError for a folder without the scales or the metadata's ``qat`` record, or scales that do not match
    the layers (names or shapes)."""
    folder = Path(folder)
    qat = read_lowbit_record(folder)
    model = load_float_model(folder)
    handle = prepare(model, LowBitRecipe(qat["bits"], qat["activation_bits"], qat["hadamard"]), names=qat["layers"])
    scales = load_file(str(folder / SCALES_FILE))
    expected = {f"{name}.alpha" for name in handle.names}
    if set(scales) != expected:
        raise ValueError(f"{SCALES_FILE} in {str(folder)!r} holds {sorted(set(scales) ^ expected)[:3]} that do not "
                         "match the quantized layers")
    with torch.no_grad():
        for name, alpha in handle.alphas().items():
            saved = scales[f"{name}.alpha"]
            if saved.shape != alpha.shape:
                raise ValueError(f"{SCALES_FILE}: {name}.alpha has shape {tuple(saved.shape)}, the layer needs "
                                 f"{tuple(alpha.shape)}")
            alpha.copy_(saved)
    return model.eval(), handle


LOWBIT_KIND = register_checkpoint_kind(CheckpointKind(  # what common.models.load_checkpoint loads
    "lowbit_qat", "low-bit QAT", SCALES_FILE, read_lowbit_record, load_lowbit_layers))


def load_lowbit_model(folder: str | os.PathLike[str]) -> tuple[torch.nn.Module, Any, LowBitHandle]:
    """``(model, tokenizer, handle)`` of the low-bit QAT checkpoint ``folder`` (:func:`load_lowbit_layers`, through
    :func:`common.models.load_checkpoint`); ValueError for a folder of another kind (:func:`read_lowbit_record`)."""
    loaded = load_checkpoint(folder, kind=LOWBIT_KIND.name)
    return loaded.model, loaded.tokenizer(), loaded.handle
