"""One QAT run skeleton for every QAT method of the project (W8A8 delayed scaling, low-bit ParetoQ/WinQ).

A run trains a pretrained checkpoint further with quantizers attached and leaves a checkpoint of the *latent*
(unquantized) weights; quantizing that checkpoint is a later step (``common.ptq``). The skeleton::

    model, tokenizer = load_model(init)
    attachment = attach(model)              # the method: common.quantization.prepare(model, recipe), hooks, record
    attachment.prepare(tokens)              # what the method takes from the training split (before any write)
    write run_dir/qat.json = attachment.record
    train(model, tokens, config, run_dir, hooks=attachment.hooks, record={**attachment.record, "init": ...},
          stale_checkpoint="restart")       # resumes a checkpoint of the same config, record AND init weights
    extra = attachment.finish(run_dir)      # quantizers still attached: telemetry, learned scales, counts
    release(model)                          # common.quantization.release: the latent weights stay in the layers
    save_checkpoint(model, tokenizer, out, metadata)
    attachment.save(out)                    # the method's own files in the checkpoint folder

``metadata`` (``out/lowbit_metadata.json``) holds ``init``, ``train_split``, ``train_tokens``, ``parameters`` (of the
saved model), ``training`` (:func:`common.train.train`'s summary: steps, tokens, seconds, the whole
:class:`TrainConfig`, its ``seed`` included) and ``qat`` = ``{**attachment.record, **extra}``.

Resume: the training loop stores the record in its checkpoint and resumes only a checkpoint of the same
:class:`TrainConfig`, world size and record (``stale_checkpoint="restart"``: another one is ignored and replaced),
so a changed QAT setting (an observer, a bit width, the noise) never continues another run's weights, and a
killed run ends with the weights of an uninterrupted one (the hooks' state travels in the checkpoint). The record
the loop compares also names the initial model (:func:`init_identity`: its folder and the SHA-256 of its weight
files), so a run of another base model (a changed ``base_model``) never resumes this one's checkpoint either.

The seed of a run is ``config.seed``: it fixes the data order (:class:`common.train.SequenceSampler`), the torch
generator at the start (initialisation of anything new) and, by the methods' convention, their noise. Seeds are a
level of every training cell's path, ``<run>/seed<k>`` (:mod:`common.qat.seeds`: :func:`seed_cell`,
:func:`parse_seed_cell`), e.g.
``results/models/trained/winq/w2-winq/seed1``, and of everything made from it (its logs, quantized checkpoint and
evaluations), so two seeds of one run are two file targets and a claim pairs runs by seed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from common.data import TokenShards, load_tokens
from common.io import sha256_file, write_json
from common.models import count_parameters, load_model, save_checkpoint
from common.quantization import release
from common.train import Hooks, TrainConfig, is_main_process, train

QAT_RECORD_FILE = "qat.json"
class Attachment:
    """What a QAT method attached to a model (through :func:`common.quantization.prepare`, which the skeleton's
    :func:`common.quantization.release` undoes): its training ``hooks``, its ``record`` (JSON-like settings: what the
    run did, compared on resume), a step the skeleton calls before training and two it calls after (module
    docstring). The base class is the unquantized run: no hooks, nothing to prepare, finish or save."""

    def __init__(self, record: Mapping[str, Any], hooks: Hooks | None = None) -> None:
        self.record = dict(record)
        self.hooks = hooks or Hooks()

    def prepare(self, train_tokens: torch.Tensor | TokenShards) -> None:
        """Right after the attachment, before anything is written or trained: take what the method needs from the
        training split's tokens (the stream the run trains on, :func:`common.data.load_tokens`); a ValueError here
        leaves no file."""

    def finish(self, run_dir: Path) -> dict[str, Any]:
        """After training, quantizers still attached: write the method's run artifacts into ``run_dir`` and return
        entries added to the checkpoint's ``qat`` record."""
        return {}

    def save(self, out: Path) -> None:
        """The method's own files in the saved checkpoint folder ``out`` (after ``save_checkpoint``, which writes
        the folder whole)."""


def init_identity(init: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"path", "weights_sha256": {file: sha256}}`` of the checkpoint folder ``init`` (its ``*.safetensors``)."""
    folder = Path(init)
    files = sorted(folder.glob("*.safetensors"))
    return {"path": str(folder), "weights_sha256": {file.name: sha256_file(file) for file in files}}


def qat_run(init: str | os.PathLike[str], train_split: str | os.PathLike[str],
            validation_split: str | os.PathLike[str] | None, config: TrainConfig, run_dir: str | os.PathLike[str],
            out: str | os.PathLike[str], attach: Callable[[nn.Module], Attachment],
            device: torch.device | None = None) -> dict[str, Any]:
    """Train one QAT run (module docstring) of ``init`` on ``train_split`` (JSONL documents, or their token shards:
    :func:`common.data.load_tokens`), the validation curve on ``validation_split`` (None: no curve), on ``device``
    (:func:`common.train.train`'s; None: CUDA when present); returns the metadata written to
    ``out/lowbit_metadata.json``. Under ``torchrun`` (one process per GPU, data parallel) every rank trains and only
    rank 0 (:func:`common.train.is_main_process`) writes the run's files: the record, the method's artifacts (its
    rank's telemetry) and the checkpoint. ValueError naming a missing split before anything is loaded."""
    for flag, path in (("train split", train_split), ("validation split", validation_split)):
        if path is not None and not Path(path).exists():
            raise ValueError(f"no {flag} at {str(path)!r}")
    model, tokenizer = load_model(init)
    train_tokens = load_tokens(tokenizer, train_split)
    val_tokens = load_tokens(tokenizer, validation_split, in_memory=True) if validation_split else None
    attachment = attach(model)
    attachment.prepare(train_tokens)
    run_dir = Path(run_dir)
    writer = is_main_process()
    if writer:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / QAT_RECORD_FILE, attachment.record)
    summary = train(model, train_tokens, config, run_dir, val_tokens=val_tokens, hooks=attachment.hooks,
                    stale_checkpoint="restart", record={**attachment.record, "init": init_identity(init)},
                    device=device)
    extra = attachment.finish(run_dir) if writer else {}
    release(model)
    metadata = {"init": str(init), "train_split": str(train_split), "train_tokens": int(train_tokens.numel()),
                "parameters": count_parameters(model), "training": summary, "qat": {**attachment.record, **extra}}
    if writer:
        save_checkpoint(model.cpu(), tokenizer, out, metadata)
        attachment.save(Path(out))
    return metadata
