"""One low-bit QAT run of the study and the trained low-bit model it leaves.

A run trains the base model with the ParetoQ quantizers of :mod:`common.qat.lowbit` (:func:`attach_lowbit` on
:func:`lowbit_selection`: every attention and MLP Linear of the blocks; per-row learnable scales ``alpha``) at
``bits`` weight bits, optionally 8-bit per-token activations and a Hadamard rotation, with one of the
:data:`METHODS`: ``baseline`` (ParetoQ QAT), ``winq`` (interpolation + noise, :mod:`common.winq`),
``interpolation`` or ``noise`` alone. Interpolation: ``W <- (1 - strength) W + strength Q(W)`` after the optimizer
step of every step ``s > 0`` with ``s % every == 0`` (:class:`common.winq.WinQ`); noise: ``sigma N(0, I)`` on the
latent weights and scales in every training forward, none at evaluation (:meth:`LowBitHandle.set_noise`).

Outputs: in ``run_dir`` the logs of :func:`common.train.train` (``eval_log.csv``: validation loss and perplexity
every ``eval_every`` steps and at the last step, the curve the speedup is read from) and ``qat.json`` (the run's
QAT settings); in ``out`` the checkpoint of the *latent* weights (a plain HF model: ``save_checkpoint``; its
``lowbit_metadata.json`` records the run) and ``lowbit_scales.safetensors`` with the learned scales, one tensor
``<module name>.alpha`` (out x 1) per quantized layer (the files of :mod:`common.qat.lowbit_io`).
:func:`common.qat.lowbit_io.load_lowbit_model` re-attaches the quantizers with these scales, so
its effective weights ``Q(W)`` are exactly those at the end of training; ``python -m common.ptq quantize --recipe
learned`` stores them as packed integer codes and the learned per-row scales.

A run resumes from ``run_dir/checkpoint.pt`` after a kill: the hooks' state (interpolation count, the noise
generator) travels in the checkpoint, so a resumed run ends with the weights of an uninterrupted one. A checkpoint
of another training configuration is ignored (``stale_checkpoint="restart"``), and so is one whose ``qat.json``
differs from this run's QAT settings (the training loop compares only the :class:`TrainConfig`, which two methods of
one setting share): the run starts over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.data import read_jsonl, token_stream
from common.io import read_json, write_json
from common.models import count_parameters, load_model, save_checkpoint
from common.qat.lowbit import LowBitHandle, attach_lowbit, lowbit_selection, lowbit_spec
from common.qat.lowbit_io import lowbit_scales, save_lowbit_scales
from common.train import Hooks, TrainConfig, train
from common.winq import WINQ_STRENGTH, WinQ


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


class NoiseState(Hooks):
    """The hooks of a run without interpolation: the handle's noise generator in the checkpoint state (what
    :class:`common.winq.WinQ` saves too), so a resumed noise run draws the noise an uninterrupted one would."""

    def __init__(self, handle: LowBitHandle) -> None:
        self.handle = handle

    def state_dict(self) -> dict[str, Any]:
        return {"handle": self.handle.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.handle.load_state_dict(state["handle"])


def check_method(method: str, every: int | None, noise_sigma: float) -> Method:
    """The :class:`Method` of ``method``; ValueError naming the value for an unknown method, an interpolating method
    without an integer ``every >= 1`` or another with one, a noise method without ``noise_sigma > 0`` or another
    with one (the recorded settings always say what the run did)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    components = METHODS[method]
    if components.interpolate and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ValueError(f"method {method!r} interpolates: every must be an integer >= 1, got {every!r}")
    if not components.interpolate and every is not None:
        raise ValueError(f"method {method!r} does not interpolate: every must be None, got {every!r}")
    if isinstance(noise_sigma, bool) or not isinstance(noise_sigma, int | float) or noise_sigma < 0:
        raise ValueError(f"noise_sigma must be a number >= 0, got {noise_sigma!r}")
    if components.noise != (noise_sigma > 0):
        need = "> 0" if components.noise else "0"
        raise ValueError(f"method {method!r} needs noise_sigma {need}, got {noise_sigma!r}")
    return components


def winq_run(init: str | os.PathLike[str], train_split: str | os.PathLike[str],
             validation_split: str | os.PathLike[str], config: TrainConfig, run_dir: str | os.PathLike[str],
             out: str | os.PathLike[str], *, bits: float, activation_bits: int | None = None, method: str,
             every: int | None = None, strength: float = WINQ_STRENGTH, noise_sigma: float = 0.0,
             noise_seed: int = 0, hadamard: bool = False) -> dict[str, Any]:
    """Train one run (module docstring) from the checkpoint ``init`` on ``train_split`` (JSONL documents), the
    validation curve on ``validation_split``; returns the metadata written to ``out/lowbit_metadata.json``:
    ``init``, ``train_split``, ``train_tokens``, ``parameters`` (of the saved model, scales excluded),
    ``training`` (:func:`common.train.train`'s summary) and ``qat`` (``bits``, ``activation_bits``, ``hadamard``,
    ``method``, ``layers``, ``every``, ``strength``, ``noise_sigma``, ``noise_seed``, ``interpolations``: the
    number performed, ``(max_steps - 1) // every`` for an interpolating method, else 0).

    ValueError naming the value: an unknown bit width or method, ``every``/``noise_sigma`` that do not fit the
    method (:func:`check_method`), a missing split; :func:`attach_lowbit` rejects a bad ``activation_bits`` and a
    Hadamard rotation of layers whose ``in_features`` is not a power of two.
    """
    lowbit_spec(bits)
    components = check_method(method, every, noise_sigma)
    for flag, path in (("train split", train_split), ("validation split", validation_split)):
        if not Path(path).is_file():
            raise ValueError(f"no {flag} at {str(path)!r}")
    model, tokenizer = load_model(init)
    train_tokens = token_stream(tokenizer, read_jsonl(train_split))
    val_tokens = token_stream(tokenizer, read_jsonl(validation_split))
    layers = lowbit_selection(model)
    handle = attach_lowbit(model, layers, bits, activation_bits=activation_bits, hadamard=hadamard)
    handle.set_noise(noise_sigma, noise_seed)
    hooks = WinQ(handle, every, strength) if components.interpolate else NoiseState(handle)
    qat = {"bits": handle.bits, "activation_bits": activation_bits, "hadamard": hadamard, "method": method,
           "layers": layers, "every": every, "strength": float(strength) if components.interpolate else None,
           "noise_sigma": float(noise_sigma), "noise_seed": noise_seed}
    run_dir = Path(run_dir)
    _forget_stale_checkpoint(run_dir, qat)
    summary = train(model, train_tokens, config, run_dir, val_tokens=val_tokens, hooks=hooks,
                    stale_checkpoint="restart")
    scales = lowbit_scales(handle)
    handle.remove()  # the latent weights stay in the layers
    metadata = {"init": str(init), "train_split": str(train_split), "train_tokens": int(train_tokens.numel()),
                "parameters": count_parameters(model), "training": summary,
                "qat": {**qat, "interpolations": hooks.interpolations if isinstance(hooks, WinQ) else 0}}
    save_checkpoint(model.cpu(), tokenizer, out, metadata)
    save_lowbit_scales(scales, out)
    return metadata


def _forget_stale_checkpoint(run_dir: Path, qat: dict[str, Any]) -> None:
    """Remove ``run_dir/checkpoint.pt`` unless ``run_dir/qat.json`` records these QAT settings; then record them."""
    record = run_dir / "qat.json"
    if not record.is_file() or read_json(record) != qat:
        (run_dir / "checkpoint.pt").unlink(missing_ok=True)
    write_json(record, qat)
