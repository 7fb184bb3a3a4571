"""What WinQ's interpolation does to the codes, and the authors' stagnation statistic, recorded during a QAT run.

Mechanism, per interpolation period. WinQ's interpolation ``W <- (1 - a) W + a Q(W)`` (:mod:`.method`) keeps
every code (the scales are untouched) and can only matter where a latent weight can reach a code boundary before
the next interpolation. With the period ``K`` and the boundaries after optimizer steps ``K, 2K, ...`` counted from 1
(:func:`.method.winq_step`; in runs that do not interpolate too, so a baseline is paired with an interpolating
run step for step), :class:`WinQDiagnostics` records at every boundary:

* ``codes_changed``: the share of integer codes (:func:`common.quantizers.lowbit_codes`) that differ between the
period's
  start (right after the previous boundary's interpolation; the start of training for the first period) and its
  end (right after the boundary's optimizer step, before its interpolation); ``codes_changed_by_interpolation``:
  the share the interpolation itself changes (0 by the fact sheet's identity ``Q((1 - a) W + a Q(W)) = Q(W)``; an
  implementation check);
* ``near_boundary_before`` / ``near_boundary_after``: the share of latent weights whose distance to the nearest code
  boundary (:func:`boundary_distance`, weight units) is below the *travel* of the next period, right before / right
  after the interpolation (equal in a run that does not interpolate). The travel is the sum of the learning rate
  over the next period (:func:`period_travel`; Adam moves a weight by about ``lr`` a step: the fact sheet), so a
  weight farther than that cannot change its code before the next boundary. None at a boundary without a next
  period (the last step of the run);
* ``clipped_before`` / ``clipped_after``: the share of latent weights outside the quantizer's clip range, where the
  straight-through estimator passes them no gradient (:func:`clipped`: ``u < lo`` or ``u > hi`` of
  :func:`common.quantizers.lowbit.lowbit_grads`).

Every quantity is that of the quantizer's input, noise-free: the latent weight ``W`` (``W H`` with a Hadamard
rotation: the codes, boundaries and clip range live in the rotated basis, whose coordinates move by about ``lr`` a
step when the latent weights move by ``+-lr`` with independent signs) with the clamped per-row scale ``alpha_c``.
Code boundaries (:func:`code_boundaries`, in units of ``alpha_c``) are where ``q(u)`` of
:mod:`common.quantizers.lowbit` changes level, the midpoints between adjacent levels::

    bits   boundaries                                          levels
    1      0                                                   -1, 1
    1.58   (k + 1/2) / 1.5, k = -1, 0:      -1/3, 1/3            -2/3, 0, 2/3
    2      (k + 1/2 + 1/2) / 2, k = -2..0:  -1/2, 0, 1/2         -3/4, -1/4, 1/4, 3/4
    3, 4   k + 1/2, k = Qn .. Qp - 1                           Qn .. Qp

Stagnation (:func:`relative_grad_norm`): the authors' statistic (fact sheet: their Hessian notebook measures it on
saved checkpoints over 20 batches), the gradient norm of the quantized Linears' weights over their norm, averaged
over a fixed set of batches::

    r = (1/B) sum_b ||grad_W L_b|| / ||W||

with ``W`` the latent weights of every low-bit quantized Linear as one vector (what the optimizer updates), ``L_b``
the mean next-token loss of batch ``b`` (:func:`common.train.causal_lm_loss`). It runs in eval mode (the noise-free
quantizer, as a saved checkpoint is evaluated; no dropout: no random draw at all) with ``torch.autograd.grad`` (no
``.grad`` touched): the training trajectory is bit for bit that of a run without it. The batches
(:func:`fixed_batches`) are a seeded sample of the training split, the same for every run and seed.
:class:`WinQDiagnostics` measures it at every evaluation of the training loop (``eval_every`` and the last step).

Records, one JSON object a line, rewritten atomically at every new record and, on resume, from the hook's state (the
records made up to the checkpoint), so a resumed run writes the records of an uninterrupted one:
``mechanism.jsonl`` (:data:`MECHANISM_FILE`; fields :data:`MECHANISM_FIELDS`, one line per boundary) and
``stagnation.jsonl`` (:data:`STAGNATION_FILE`; fields :data:`STAGNATION_FIELDS`, one line per evaluation).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from common.data.shards import TokenShards
from common.io import write_jsonl
from common.quantizers.lowbit import (
    LowBitWeight,
    clamp_alpha,
    lowbit_codes,
    lowbit_grads,
    lowbit_spec,
    stretched_index,
)
from common.train import Hooks, SequenceSampler, TrainConfig, causal_lm_loss, learning_rate

from .method import WinQ, winq_step

MECHANISM_FILE = "mechanism.jsonl"
STAGNATION_FILE = "stagnation.jsonl"
MECHANISM_FIELDS = ("period", "step", "steps_taken", "interpolated", "travel", "weights", "codes_changed",
                    "codes_changed_by_interpolation", "near_boundary_before", "near_boundary_after",
                    "clipped_before", "clipped_after")
STAGNATION_FIELDS = ("step", "steps_taken", "relative_grad_norm", "batches", "sequences_per_batch")
STAGNATION_BATCHES = 20  # the authors' (fact sheet)
# the sample's SequenceSampler seed: no training cell's data order uses it (cells use their seed + epoch: 0 .. ~10)
STAGNATION_SEED = 1000


def code_boundaries(bits: float) -> tuple[float, ...]:
    """The code boundaries of ``bits`` in units of the scale, ascending (module docstring table): where the rounding
    inside ``q(u)`` switches, ``u n - shift = k + 1/2`` for the stretched quantizers (``k`` from the index of ``-c``
    to the index below that of ``c``), ``u = k + 1/2`` for LSQ (``k = Qn .. Qp - 1``), 0 for the sign."""
    spec = lowbit_spec(bits)
    if spec.family == "binary":
        return (0.0,)
    if spec.family == "stretched":
        lowest, highest = (int(k) for k in stretched_index(torch.tensor([spec.lo, spec.hi], dtype=torch.float64),
                                                           spec))
        return tuple((k + 0.5 + spec.shift) / spec.n for k in range(lowest, highest))
    return tuple(k + 0.5 for k in range(int(spec.lo), int(spec.hi)))


def boundary_distance(weight: torch.Tensor, alpha: torch.Tensor, bits: float) -> torch.Tensor:
    """``min_b |W - b alpha_c|`` over the :func:`code_boundaries` ``b`` of ``bits``: each weight's distance to the
    nearest code boundary in weight units (``alpha_c = clamp_alpha(alpha)``, one per row; ``|W|`` at 1 bit)."""
    alpha = clamp_alpha(alpha)
    distance = torch.full_like(weight, math.inf)
    for boundary in code_boundaries(bits):
        distance = torch.minimum(distance, (weight - boundary * alpha).abs())
    return distance


def clipped(weight: torch.Tensor, alpha: torch.Tensor, bits: float) -> torch.Tensor:
    """Whether each weight is outside the clip range, i.e. the quantizer's straight-through gradient to it is zero
    (``u < lo`` or ``u > hi``, ``u = W / alpha_c``): :func:`common.quantizers.lowbit.lowbit_grads` of a unit
    gradient."""
    return lowbit_grads(weight, alpha, torch.ones_like(weight), bits)[0] == 0


def period_travel(step: int, period: int, config: TrainConfig) -> float:
    """The sum of the learning rate (:func:`common.train.learning_rate`) over the period after 0-based optimizer step
    ``step``: steps ``step + 1 .. step + period``, those of the run (``< config.max_steps``); 0.0 after the last."""
    return math.fsum(learning_rate(s, config) for s in range(step + 1, min(step + 1 + period, config.max_steps)))


def lowbit_layers(model: nn.Module) -> dict[str, tuple[nn.Parameter, LowBitWeight]]:
    """``{name: (latent weight, its quantizer)}`` of every Linear of ``model`` that
    a :class:`common.recipes.LowBitRecipe` quantizes (:func:`common.quantization.prepare`), in module order."""
    return {name: (module.parametrizations.weight.original, module.parametrizations.weight[0])
            for name, module in model.named_modules()
            if parametrize.is_parametrized(module, "weight")
            and isinstance(module.parametrizations.weight[0], LowBitWeight)}


def quantizer_input(latent: torch.Tensor, quantizer: LowBitWeight) -> torch.Tensor:
    """What ``quantizer`` rounds, detached: the latent weight, or ``W H`` with a Hadamard rotation."""
    latent = latent.detach()
    return latent if quantizer.hadamard is None else latent @ quantizer.hadamard


def code_map(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{name: integer codes}`` of every low-bit layer (:func:`common.quantizers.lowbit_codes` of its noise-free
    quantizer
    input), as int8 (every code fits: -8 .. 7 at 4 bits)."""
    with torch.no_grad():
        return {name: lowbit_codes(quantizer_input(latent, quantizer), quantizer.alpha, quantizer.bits)[1]
                .elements.to(torch.int8) for name, (latent, quantizer) in lowbit_layers(model).items()}


def changed_share(start: Mapping[str, torch.Tensor], end: Mapping[str, torch.Tensor]) -> float:
    """The share of entries that differ between ``start`` and ``end`` (same names and shapes), over all layers;
    ValueError naming a layer that one lacks or whose shape differs."""
    if set(start) != set(end):
        raise ValueError(f"the code maps hold other layers: {sorted(set(start) ^ set(end))[:3]}")
    changed = total = 0
    for name, codes in start.items():
        if codes.shape != end[name].shape:
            raise ValueError(f"layer {name!r}: codes of shape {tuple(codes.shape)} and {tuple(end[name].shape)}")
        changed += int((codes != end[name]).sum())
        total += codes.numel()
    return changed / total


def mechanism_shares(model: nn.Module, travel: float | None) -> dict[str, Any]:
    """``{"weights": n, "near_boundary": share, "clipped": share}`` over every low-bit layer's quantizer input
    (module docstring): the share closer than ``travel`` to a code boundary (None for ``travel`` None) and the share
    outside the clip range. ValueError for a model without low-bit layers or a negative ``travel``."""
    if travel is not None and not travel >= 0:
        raise ValueError(f"travel must be a number >= 0 or None, got {travel!r}")
    layers = lowbit_layers(model)
    if not layers:
        raise ValueError("the model has no low-bit quantized Linear (common.quantization.prepare with a LowBitRecipe)")
    near = outside = total = 0
    with torch.no_grad():
        for latent, quantizer in layers.values():
            weight, alpha = quantizer_input(latent, quantizer), quantizer.alpha.detach()
            if travel is not None:
                near += int((boundary_distance(weight, alpha, quantizer.bits) < travel).sum())
            outside += int(clipped(weight, alpha, quantizer.bits).sum())
            total += weight.numel()
    return {"weights": total, "near_boundary": None if travel is None else near / total, "clipped": outside / total}


def fixed_batches(tokens: torch.Tensor | TokenShards, seq_len: int, batch_size: int, count: int = STAGNATION_BATCHES,
                  seed: int = STAGNATION_SEED) -> torch.Tensor:
    """``count`` batches of ``batch_size`` sequences of ``seq_len + 1`` tokens, shape (count, batch_size,
    seq_len + 1): the first ``count * batch_size`` sequences of :class:`common.train.SequenceSampler`'s order with
    ``seed`` (a seeded sample without replacement of the split's non-overlapping sequences, repeating only when the
    split holds fewer). ValueError naming a count or batch size that is not an integer >= 1, or a seed that is not
    an integer."""
    for name, value in (("count", count), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    sequences = SequenceSampler(tokens, seq_len, seed).batch(0, count * batch_size)
    return sequences.reshape(count, batch_size, seq_len + 1)


def _total_norm(tensors: Iterable[torch.Tensor]) -> float:
    """The L2 norm of the tensors as one vector (float64 accumulation)."""
    return math.sqrt(math.fsum(float(torch.linalg.vector_norm(t.detach().double())) ** 2 for t in tensors))


def relative_grad_norm(model: nn.Module, batches: Iterable[torch.Tensor]) -> float:
    """The authors' stagnation statistic (module docstring): ``(1/B) sum_b ||grad_W L_b|| / ||W||`` over the latent
    weights ``W`` of every low-bit layer, each batch (``(b, L + 1)`` tokens) on its own, in eval mode (the model's
    mode is restored), by ``torch.autograd.grad``: no ``.grad``, optimizer state or random stream is touched.
    ValueError for a model without low-bit layers or no batch."""
    weights = [latent for latent, _ in lowbit_layers(model).values()]
    if not weights:
        raise ValueError("the model has no low-bit quantized Linear (common.quantization.prepare with a LowBitRecipe)")
    device, was_training = weights[0].device, model.training
    model.eval()
    try:
        with torch.enable_grad():
            norms = [_total_norm(torch.autograd.grad(causal_lm_loss(model, batch.to(device)), weights))
                     for batch in batches]
    finally:
        model.train(was_training)
    if not norms:
        raise ValueError("relative_grad_norm needs at least one batch")
    return math.fsum(norms) / len(norms) / _total_norm(weights)


class WinQDiagnostics(Hooks):
    """The training hooks of a WinQ-study run: ``method_hooks`` (:class:`.method.WinQ`, or the hooks of a run
    without interpolation) wrapped so that the mechanism is measured around every boundary of ``period`` and the
    stagnation statistic on ``batches`` at every evaluation (module docstring), written to ``run_dir``.

    ``period``: the boundaries' ``K``; ``method_hooks.every`` for WinQ (another value is a ValueError), None for a
    run without interpolation that records no mechanism. ``config``: the run's :class:`common.train.TrainConfig` (the
    learning-rate schedule of the travel). ``run_dir`` None: measure and write nothing (the ranks of a data-parallel
    run that write no files); the method's hooks still run. The state (:meth:`state_dict`) holds the method's, the
    records so far and the codes at the start of the current period.
    """

    def __init__(self, method_hooks: Hooks, config: TrainConfig, batches: torch.Tensor, period: int | None = None,
                 run_dir: str | os.PathLike[str] | None = None) -> None:
        interpolates = isinstance(method_hooks, WinQ)
        if interpolates and period is None:
            period = method_hooks.every
        if period is not None and (isinstance(period, bool) or not isinstance(period, int) or period < 1):
            raise ValueError(f"period must be an integer >= 1 or None, got {period!r}")
        if interpolates and period != method_hooks.every:
            raise ValueError(f"period {period} differs from the interpolation's every {method_hooks.every}: the "
                             "boundaries are the interpolations")
        self.method_hooks, self.config, self.batches, self.period = method_hooks, config, batches, period
        self.interpolates = interpolates
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.mechanism: list[dict[str, Any]] = []
        self.stagnation: list[dict[str, Any]] = []
        self._period_codes: dict[str, torch.Tensor] = {}

    def _write(self) -> None:
        if self.run_dir is not None:
            write_jsonl(self.run_dir / MECHANISM_FILE, self.mechanism)
            write_jsonl(self.run_dir / STAGNATION_FILE, self.stagnation)

    def on_train_start(self, model: nn.Module, start_step: int) -> None:
        self.method_hooks.on_train_start(model, start_step)
        if self.run_dir is None:
            return
        if start_step == 0:
            self.mechanism, self.stagnation = [], []
            self._period_codes = code_map(model) if self.period is not None else {}
        self._write()  # a resumed run: the records up to its checkpoint (later ones are made again)

    def before_step(self, model: nn.Module, step: int) -> None:
        self.method_hooks.before_step(model, step)

    def after_backward(self, model: nn.Module, step: int) -> None:
        self.method_hooks.after_backward(model, step)

    def after_optimizer_step(self, model: nn.Module, step: int) -> None:
        if self.run_dir is None or self.period is None or not winq_step(step, self.period):
            self.method_hooks.after_optimizer_step(model, step)
            return
        travel = period_travel(step, self.period, self.config)
        reach = travel if step + 1 < self.config.max_steps else None  # no next period after the last step
        before, end_codes = mechanism_shares(model, reach), code_map(model)
        self.method_hooks.after_optimizer_step(model, step)
        after, start_codes = mechanism_shares(model, reach), code_map(model)
        self.mechanism.append({
            "period": (step + 1) // self.period, "step": step, "steps_taken": step + 1,
            "interpolated": self.interpolates, "travel": travel, "weights": before["weights"],
            "codes_changed": changed_share(self._period_codes, end_codes),
            "codes_changed_by_interpolation": changed_share(end_codes, start_codes),
            "near_boundary_before": before["near_boundary"], "near_boundary_after": after["near_boundary"],
            "clipped_before": before["clipped"], "clipped_after": after["clipped"]})
        self._period_codes = start_codes
        self._write()

    def on_eval(self, model: nn.Module, step: int, metrics: dict[str, float]) -> None:
        self.method_hooks.on_eval(model, step, metrics)
        if self.run_dir is None:
            return
        self.stagnation.append({"step": step, "steps_taken": step + 1,
                                "relative_grad_norm": relative_grad_norm(model, self.batches),
                                "batches": len(self.batches), "sequences_per_batch": int(self.batches.shape[1])})
        self._write()

    def state_dict(self) -> dict[str, Any]:
        return {"method": self.method_hooks.state_dict(), "mechanism": list(self.mechanism),
                "stagnation": list(self.stagnation), "period_codes": dict(self._period_codes)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.method_hooks.load_state_dict(state["method"])
        self.mechanism, self.stagnation = list(state["mechanism"]), list(state["stagnation"])
        self._period_codes = dict(state["period_codes"])
