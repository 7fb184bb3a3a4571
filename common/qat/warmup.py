"""BF16 warmup before W8A8 QAT, as a :class:`common.train.Hooks` callback.

Fact sheet (``papers/maxwindow_hif8``): train ``warmup_steps`` optimizer steps unquantized, then reset the amax
history and switch HiF8 on. "BF16" means unquantized here: the disabled layers run in the model's own precision
(bf16 under the training loop's ``bf16`` autocast, else float32).

``BF16Warmup(handle, W)``: steps ``0 .. W-1`` run with plain Linear layers (no quantization, no observer updates);
at the start of step ``W`` every observer is reset and quantization is switched on (``handle.enable()``). Every
step first sets the handle's step (``handle.step(step)``: the step stamped on the telemetry rows, and with
``history_unit="step"`` the commit of the previous step's amax maximum as one history entry). A run resumed from a
checkpoint after step ``W`` gets the observers' history, the pending per-step maxima and the telemetry rows so far
back through ``state_dict`` / ``load_state_dict`` (the training loop's hooks state).
"""

from __future__ import annotations

from typing import Any

import torch

from common.quantizers import W8A8Handle
from common.train import Hooks


class BF16Warmup(Hooks):
    """Quantization off for optimizer steps ``< warmup_steps``, on (observers reset) from step ``warmup_steps``."""

    def __init__(self, handle: W8A8Handle, warmup_steps: int) -> None:
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {warmup_steps!r}")
        self.handle, self.warmup_steps = handle, warmup_steps

    def on_train_start(self, model: torch.nn.Module, start_step: int) -> None:
        if start_step <= self.warmup_steps:
            self.handle.disable()  # step W itself switches on in before_step
        elif not self.handle.enabled:
            self.handle.enable(reset=False)  # resumed after W without saved hook state: keep what is there

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        self.handle.step(step)
        if step == self.warmup_steps:
            self.handle.enable()

    def state_dict(self) -> dict[str, Any]:
        return {"warmup_steps": self.warmup_steps, "handle": self.handle.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.handle.load_state_dict(state["handle"])
