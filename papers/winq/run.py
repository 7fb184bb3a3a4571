"""One low-bit QAT run of the study and the trained low-bit model it leaves.

A run trains the base model with the ParetoQ quantizers of :mod:`common.quantizers.lowbit` (a
:class:`common.recipes.LowBitRecipe` through the front door, :func:`common.quantization.prepare`, on its default
selection :func:`common.quantizers.lowbit_selection`: every attention and MLP Linear of the blocks; per-row learnable
scales ``alpha``) at ``bits`` weight bits, optionally 8-bit per-token activations and a Hadamard rotation, with one
of the
:data:`.settings.METHODS`: ``baseline`` (ParetoQ QAT), ``winq`` (interpolation + noise, :mod:`.method`),
``interpolation`` or ``noise`` alone. Interpolation: ``W <- (1 - strength) W + strength Q(W)`` after optimizer
steps ``K, 2K, ..., N`` counted from 1 (:class:`.method.WinQ`, ``K = every``); noise: ``sigma N(0, I)`` on the
latent weights and scales in every training forward, none at evaluation (:meth:`LowBitHandle.set_noise`), drawn
from a generator seeded with the run's seed (``config.seed``, which also fixes the data order).

The run is :func:`common.qat.run.qat_run` with a :class:`common.qat.lowbit_io.LowBitAttachment`: outputs, resume
and the stale-checkpoint guard are the skeleton's. In ``run_dir`` the logs of :func:`common.train.train`
(``eval_log.csv``: validation loss and perplexity every ``eval_every`` steps and at the last step, the curve the
speedup is read from) and ``qat.json`` (the run's record); in ``out`` the checkpoint of the *latent* weights (its
``lowbit_metadata.json`` holds the versioned record of :func:`common.qat.lowbit_io.lowbit_record` with the method's
settings) and ``lowbit_scales.safetensors`` with the learned scales.
:func:`common.qat.lowbit_io.load_lowbit_model` re-attaches the quantizers with these scales, so its effective
weights ``Q(W)`` are exactly those at the end of training; ``python -m common.ptq checkpoint --recipe learned`` stores
them as packed integer codes and the learned per-row scales.

Every run also records the diagnostics of :mod:`.diagnostics` in ``run_dir``: ``mechanism.jsonl`` (codes
changed per period, the share of latent weights within a period's travel of a code boundary and the clipped share,
before and after every interpolation; at the same boundaries ``K, 2K, ...`` in a run that does not interpolate when
it is given ``diagnostics_every``, so it pairs with the interpolating runs) and ``stagnation.jsonl`` (the authors'
relative gradient norm at every evaluation, on ``stagnation_batches`` batches of ``micro_batch_size`` sequences
sampled from the training split with ``stagnation_seed``: the same batches for every run and seed). They leave the
training trajectory unchanged; their settings are part of the run's record (``diagnostics``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from common.data import TokenShards
from common.qat.lowbit_io import LowBitAttachment
from common.qat.run import qat_run
from common.quantization import prepare
from common.quantizers.lowbit import LowBitHandle
from common.recipes import LowBitRecipe
from common.train import Hooks, TrainConfig, is_main_process

from .diagnostics import STAGNATION_BATCHES, STAGNATION_SEED, WinQDiagnostics, fixed_batches
from .method import WINQ_STRENGTH, WinQ
from .settings import METHODS, Method


class NoiseState(Hooks):
    """The hooks of a run without interpolation: the handle's noise generator in the checkpoint state (what
    :class:`.method.WinQ` saves too), so a resumed noise run draws the noise an uninterrupted one would."""

    def __init__(self, handle: LowBitHandle) -> None:
        self.handle = handle

    def state_dict(self) -> dict[str, Any]:
        return {"handle": self.handle.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.handle.load_state_dict(state["handle"])


class WinQAttachment(LowBitAttachment):
    """The low-bit attachment of a WinQ method: its hooks are ``method_hooks`` (:class:`.method.WinQ`, or
    :class:`NoiseState` for a method without interpolation) until :meth:`prepare` wraps them in
    :class:`.diagnostics.WinQDiagnostics` (boundaries every ``period``, records in ``run_dir``; None: none
    written) with the stagnation statistic's fixed batches, drawn from the training split the run loaded
    (``stagnation_batches`` batches of ``config.micro_batch_size`` sequences of ``config.seq_len + 1`` tokens,
    sampled with ``stagnation_seed``); records the number of interpolations performed."""

    def __init__(self, handle: LowBitHandle, method_hooks: Hooks, config: TrainConfig, *, period: int | None,
                 run_dir: str | os.PathLike[str] | None, stagnation_batches: int, stagnation_seed: int,
                 **method: Any) -> None:
        super().__init__(handle, method_hooks, **method)
        self.method_hooks, self.config, self.period, self.run_dir = method_hooks, config, period, run_dir
        self.stagnation_batches, self.stagnation_seed = stagnation_batches, stagnation_seed

    def prepare(self, train_tokens: torch.Tensor | TokenShards) -> None:
        batches = fixed_batches(train_tokens, self.config.seq_len, self.config.micro_batch_size,
                                self.stagnation_batches, self.stagnation_seed)
        self.hooks = WinQDiagnostics(self.method_hooks, self.config, batches, self.period, self.run_dir)

    def finish(self, run_dir: Path) -> dict[str, Any]:
        super().finish(run_dir)
        interpolations = self.method_hooks.interpolations if isinstance(self.method_hooks, WinQ) else 0
        return {"interpolations": interpolations}


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
             hadamard: bool = False, diagnostics_every: int | None = None,
             stagnation_batches: int = STAGNATION_BATCHES, stagnation_seed: int = STAGNATION_SEED,
             device: torch.device | None = None) -> dict[str, Any]:
    """Train one run (module docstring) from the checkpoint ``init`` on ``train_split`` (JSONL documents or their
    token shards), the validation curve on ``validation_split``, on ``device`` (None: CUDA when present); returns the
    metadata of :func:`common.qat.run.qat_run`, whose ``qat`` record holds
    :func:`common.qat.lowbit_io.lowbit_record`'s fields and ``method``, ``every``, ``strength``, ``noise_sigma``,
    ``noise_seed`` (= ``config.seed``), ``diagnostics`` (``{"every", "stagnation_batches", "stagnation_seed"}``) and
    ``interpolations``: the number performed, ``max_steps // every`` for an interpolating method, else 0.

    Diagnostics (module docstring): ``diagnostics_every`` is the period of the mechanism records, ``every`` for an
    interpolating method (None means ``every``; another value is a ValueError), the paired interpolating runs'
    ``K`` for a method without interpolation (None: no mechanism records); ``stagnation_batches`` batches (the
    authors' 20) sampled with ``stagnation_seed`` for the relative gradient norm, from the training tokens the QAT
    skeleton loaded (:meth:`WinQAttachment.prepare`: the split is tokenized once).

    ValueError naming the value: an unknown bit width or method, ``every``/``noise_sigma`` that do not fit the
    method (:func:`check_method`), a missing split; after the model is loaded and before anything is written, a bad
    ``diagnostics_every`` (:class:`.diagnostics.WinQDiagnostics`), ``stagnation_batches`` or
    ``stagnation_seed`` (:func:`.diagnostics.fixed_batches`); the recipe
    (:class:`common.recipes.LowBitRecipe`) rejects a bad ``bits`` or ``activation_bits`` before anything is loaded,
    :func:`common.quantizers.attach_lowbit` a Hadamard rotation of layers whose ``in_features`` is not a power of two.
    """
    recipe = LowBitRecipe(bits, activation_bits, hadamard)
    components = check_method(method, every, noise_sigma)
    period = every if diagnostics_every is None else diagnostics_every  # None for a method that does not interpolate

    def attach(model: torch.nn.Module) -> WinQAttachment:
        handle = prepare(model, recipe)
        handle.set_noise(noise_sigma, config.seed)
        method_hooks = WinQ(handle, every, strength) if components.interpolate else NoiseState(handle)
        return WinQAttachment(handle, method_hooks, config, period=period,
                              run_dir=run_dir if is_main_process() else None, stagnation_batches=stagnation_batches,
                              stagnation_seed=stagnation_seed, method=method, every=every,
                              strength=float(strength) if components.interpolate else None,
                              noise_sigma=float(noise_sigma), noise_seed=config.seed,
                              diagnostics={"every": period, "stagnation_batches": stagnation_batches,
                                           "stagnation_seed": stagnation_seed})

    return qat_run(init, train_split, validation_split, config, run_dir, out, attach, device)
