"""WinQ (Li, Liu et al., ICML 2026): low-bit QAT that leaves the flat regions around saddle points faster.

Fact sheet ``papers/winq``. WinQ trains a model quantized with the ParetoQ quantizers of
:mod:`common.quantizers.lowbit` and adds two components:

- Interpolation (re-initialization), :class:`WinQ`: after the optimizer step of every step ``s`` (0-based) with
  ``(s + 1) % K == 0``, i.e. after optimizer steps ``K, 2K, ...`` counted from 1 (the authors' callback tests the
  trainer's global step after its increment), the last step of a run of ``N`` steps included when ``K`` divides
  ``N``: ``N // K`` interpolations. Every quantized layer's latent weight moves toward its quantized value::

      W <- (1 - a) W + a Q_eff(W),      a = 0.8 (the authors' code: W <- 0.2 W + 0.8 Q(W))

  with ``Q_eff`` noise-free (:meth:`common.quantizers.LowBitHandle.quantized_weight`). With a Hadamard rotation
  ``Q_eff(W) = Q(W H) H^T`` and ``H`` orthogonal, so ``(1 - a) W + a Q(W H) H^T = ((1 - a) W H + a Q(W H)) H^T``:
  the same step interpolates the rotated weight ``W H`` toward ``Q(W H)``, i.e. in the rotated basis (fact sheet).
- Noise injection, configured on the handle: ``handle.set_noise(sigma, seed)`` (sigma = 1e-3 in the paper) adds
  ``sigma N(0, I)`` to the latent weights and the per-row scales in every training forward, none at evaluation.

WinQ is both; the ablations are interpolation only (no ``set_noise``) and noise only (no :class:`WinQ` hook). In
the shared training loop::

    handle = prepare(model, LowBitRecipe(2))         # common.quantization, common.recipes
    handle.set_noise(1e-3, seed=0)
    train(model, tokens, config, run_dir, hooks=WinQ(handle, every=K))

The hook's ``state_dict`` holds the interpolation count and the handle's noise generator, so a resumed run draws
the noise an uninterrupted run would; the latent weights and scales are model parameters (the loop saves them).
What the interpolation does to the codes, and the authors' stagnation statistic, are recorded by
:class:`.diagnostics.WinQDiagnostics` around these hooks.
"""

from __future__ import annotations

from typing import Any

import torch

from common.quantizers.lowbit import LowBitHandle
from common.train import Hooks

WINQ_STRENGTH = 0.8


def interpolate_toward(weight: torch.Tensor, target: torch.Tensor, strength: float) -> torch.Tensor:
    """``(1 - a) W + a T`` with ``a = strength`` (fact sheet: ``W <- (1 - a) W + a Q(W)``)."""
    return (1 - strength) * weight + strength * target


def winq_step(step: int, every: int) -> bool:
    """Whether 0-based optimizer step ``step`` interpolates (after its optimizer step): ``(step + 1) % every == 0``,
    i.e. after the ``every``-th, ``2 every``-th, ... optimizer step counted from 1 (the authors' callback fires on
    the trainer's global step after its increment), so ``max_steps // every`` times in a run, the last step
    included when ``every`` divides ``max_steps``."""
    return (step + 1) % every == 0


class WinQ(Hooks):
    """Interpolate every quantized latent weight after every ``every``-th optimizer step (:func:`winq_step`)."""

    def __init__(self, handle: LowBitHandle, every: int, strength: float = WINQ_STRENGTH) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an integer >= 1, got {every!r}")
        if isinstance(strength, bool) or not isinstance(strength, int | float) or not 0 <= strength <= 1:
            raise ValueError(f"strength must be a number in [0, 1], got {strength!r}")
        self.handle, self.every, self.strength = handle, every, float(strength)
        self.interpolations = 0

    def interpolate(self) -> None:
        """``W <- (1 - a) W + a Q_eff(W)`` for every layer of the handle, in place on the latent weights."""
        with torch.no_grad():
            for name in self.handle.names:
                latent = self.handle.latent_weight(name)
                latent.copy_(interpolate_toward(latent, self.handle.quantized_weight(name), self.strength))
        self.interpolations += 1

    def after_optimizer_step(self, model: torch.nn.Module, step: int) -> None:
        if winq_step(step, self.every):
            self.interpolate()

    def state_dict(self) -> dict[str, Any]:
        return {"every": self.every, "strength": self.strength, "interpolations": self.interpolations,
                "handle": self.handle.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.interpolations = int(state["interpolations"])
        self.handle.load_state_dict(state["handle"])
