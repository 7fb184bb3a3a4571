"""Files of a low-bit QAT checkpoint (ParetoQ quantizers, :mod:`common.qat.lowbit`) and the trained model they hold.

A low-bit QAT checkpoint folder (written by ``papers.winq.run.winq_run``) is a plain HF checkpoint of the *latent*
weights (:func:`common.models.save_checkpoint`) plus

* ``lowbit_scales.safetensors`` (:data:`SCALES_FILE`): the learned scales, one float32 tensor ``<module name>.alpha``
  (out x 1) per quantized layer (:func:`lowbit_scales`, :func:`save_lowbit_scales`);
* ``lowbit_metadata.json`` (:data:`METADATA_FILE`, written by ``save_checkpoint``) with a ``qat`` record: ``bits``,
  ``activation_bits``, ``hadamard``, ``layers`` (and the run's method settings).

:func:`load_lowbit_model` re-attaches the quantizers with these scales, so the effective weights ``Q(W)`` are
exactly those at the end of training.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from common.io import atomic_path, read_json
from common.models import METADATA_FILE, load_model

from .lowbit import LowBitHandle, attach_lowbit

SCALES_FILE = "lowbit_scales.safetensors"
__all__ = ["METADATA_FILE", "SCALES_FILE", "load_lowbit_model", "lowbit_scales", "read_lowbit_record",
           "save_lowbit_scales"]


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
    :data:`SCALES_FILE` or its :data:`METADATA_FILE` has no ``qat`` record with ``bits``."""
    folder = Path(folder)
    if not (folder / SCALES_FILE).is_file():
        raise ValueError(f"{str(folder)!r} is not a low-bit QAT checkpoint: no {SCALES_FILE}")
    metadata = read_json(folder / METADATA_FILE) if (folder / METADATA_FILE).is_file() else {}
    qat = metadata.get("qat")
    if not qat or "bits" not in qat:
        raise ValueError(f"{str(folder / METADATA_FILE)!r} has no low-bit QAT record ('qat' with 'bits')")
    return qat


def load_lowbit_model(folder: str | os.PathLike[str]) -> tuple[torch.nn.Module, Any, LowBitHandle]:
    """``(model, tokenizer, handle)`` of a low-bit QAT checkpoint (module docstring): the latent weights with the
    run's quantizers re-attached (:func:`read_lowbit_record`: bits, activation bits, Hadamard, layers) and the
    learned scales of :data:`SCALES_FILE`; noise off, eval mode. Its effective weights ``Q(W)`` equal those at the
    end of training exactly. ValueError for a folder without the scales or the metadata's ``qat`` record, or scales
    that do not match the layers (names or shapes)."""
    folder = Path(folder)
    qat = read_lowbit_record(folder)
    model, tokenizer = load_model(folder)
    handle = attach_lowbit(model, qat["layers"], qat["bits"], activation_bits=qat["activation_bits"],
                           hadamard=qat["hadamard"])
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
    return model.eval(), tokenizer, handle
