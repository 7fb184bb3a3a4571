"""W8A8 QAT with quantized gradients and delayed per-tensor scaling (HiF8 by default): ``papers/maxwindow_hif8``.

For a selected ``nn.Linear`` with weight ``W`` (out x in), input ``x``, output gradient ``g`` (Cheng et al. 2026,
after the authors' code)::

    forward   y  = Q_x(x) Q_w(W)^T + b
    backward  dx = Q_g(g) Q_w(W)          dW = Q_g(g)^T Q_x(x)          db = sum of g over tokens (unquantized)

``Q_r(t) = fmt(t s_r) / s_r`` (:func:`common.qat.scaled.scaled_qdq`: saturating, the format's default rounding,
TA for HiF8) with one per-tensor scale per role ``r`` in :data:`ROLES` of each layer, each role with its own
observer (:mod:`common.observers`). Delayed scaling, per call of the role (a forward for ``input`` and ``weight``,
a backward for ``grad_output``; one optimizer step without gradient accumulation)::

    a = max |t|                                       # one reduction, reused below
    p = observer.predict(current=a)                   # history up to the previous call; None: cold start
    s = float32(max_val / ((a if p is None else p) + 1e-12))   # delayed_scale; 1.0 if that amax is not finite
    Q(t) = fmt(t s) / s
    observer.update(a)                                # AFTER: zero / non-finite amaxes are skipped

The straight-through estimator is implicit: the backward uses the quantized operands as written above and no
clipping mask, so gradients pass "as if nothing happened" to values the forward clipped. The forward's ``Q_x(x)``
and ``Q_w(W)`` are saved for the backward (not re-quantized). The matmuls of the backward run in the weight's dtype
(float32 under bf16 autocast); ``dx`` comes back in ``x``'s dtype.

Telemetry, one row per role per call (:data:`TELEMETRY_FIELDS`): ``step`` (the handle's step counter),
``layer``, ``role``, ``amax`` ``a``, ``predicted_amax`` (the amax the scale came from: ``p``, or ``a`` on a cold
start), ``scale`` ``s``, ``clipped_fraction`` (values with ``|t s| > fmt.max`` in float32: clipped by the format),
``over_range_fraction`` (values with ``|t| > predicted_amax`` in float32: outside the range the scale maps onto
``[-max_val, max_val]``), ``overflow`` (``a > p``: a saturation event of the delayed scale; never on a cold start)
and ``cold_start``. With ``max_val = 15`` HiF8 (maximum 2^15) only clips values above ``2^15 / 15 ~ 2185`` times the
prediction; a smaller spike above the prediction lands in HiF8's coarse tiers (counted by ``over_range_fraction``)
and is clipped only where ``max_val`` is the format's maximum. The fractions cost a pass only when ``a`` exceeds
the threshold.

Per-rank: under DDP each rank keeps its own observers (the amaxes are not all-reduced across ranks, unlike the
authors' code). The observers hold Python floats, so every role costs one device synchronisation per call on GPUs.

Evaluation (calls under ``torch.no_grad()``) quantizes with the current prediction (its own amax on a cold start)
and leaves the observers and the telemetry alone. A disabled layer (``enabled = False``, the BF16 warmup of
:class:`common.qat.warmup.BF16Warmup`) is exactly ``nn.Linear``: no quantization, no observer updates.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from common.formats import Format, get_format
from common.io import atomic_path
from common.observers import HIF8_MAX_VAL, Observer, delayed_scale, make_observer
from common.ptq.apply import linear_modules
from common.ptq.select import DEFAULT_INCLUDE, select_linears

from .scaled import float32, scaled_qdq

ROLES = ("input", "weight", "grad_output")
TELEMETRY_FIELDS = ("step", "layer", "role", "amax", "predicted_amax", "scale", "clipped_fraction",
                    "over_range_fraction", "overflow", "cold_start")
PAPER_SKIP_PROPORTION = (3 / 26, 2 / 26)  # first 3 and last 2 of OpenPangu-Embedded-1B's 26 blocks stay BF16


def tensor_amax(t: torch.Tensor) -> float:
    """``max |t|`` as a float (NaN if ``t`` has a NaN, 0 for an empty tensor); ``aminmax`` is one fused pass."""
    if t.numel() == 0:
        return 0.0
    low, high = (float(v) for v in torch.aminmax(t.detach()))
    return math.nan if math.isnan(low) or math.isnan(high) else max(-low, high)


def scale_for(amax: float, max_val: float) -> float:
    """``float32(delayed_scale(amax, max_val))``; 1.0 for an amax that is not finite (a cold start on Inf/NaN)."""
    return float32(delayed_scale(amax, max_val)) if math.isfinite(amax) else 1.0


class Telemetry:
    """The in-memory saturation log of a handle: rows of :data:`TELEMETRY_FIELDS` stamped with ``step``."""

    def __init__(self) -> None:
        self.step = 0
        self.rows: list[dict[str, Any]] = []

    def record(self, layer: str, role: str, t: torch.Tensor, amax: float, predicted: float, scale: float,
               cold_start: bool, fmt_max: float) -> None:
        n = max(t.numel(), 1)
        over = clipped = 0.0
        if amax > predicted:
            over = int(torch.count_nonzero(t.detach().float().abs() > predicted)) / n
        if amax * scale > fmt_max:  # float64 bound: below it no float32 product |t s| exceeds fmt_max
            clipped = int(torch.count_nonzero((t.detach().float() * scale).abs() > fmt_max)) / n
        self.rows.append({"step": self.step, "layer": layer, "role": role, "amax": amax, "predicted_amax": predicted,
                          "scale": scale, "clipped_fraction": clipped, "over_range_fraction": over,
                          "overflow": (not cold_start) and amax > predicted, "cold_start": cold_start})

    def write(self, path: str | os.PathLike[str]) -> None:
        """All rows so far as CSV, atomically (the file appears whole or not at all)."""
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=TELEMETRY_FIELDS)
            writer.writeheader()
            writer.writerows(self.rows)


class RoleQuantizer:
    """Delayed-scaling fake quantizer of one tensor role of one layer (module docstring)."""

    def __init__(self, layer: str, role: str, fmt: Format, observer: Observer, max_val: float,
                 telemetry: Telemetry | None) -> None:
        self.layer, self.role, self.fmt, self.observer = layer, role, fmt, observer
        self.max_val, self.telemetry = max_val, telemetry

    def __call__(self, t: torch.Tensor, observe: bool = True) -> torch.Tensor:
        """``Q(t)`` in ``t``'s dtype; ``observe=False`` leaves the observer and the telemetry alone."""
        amax = tensor_amax(t)
        predicted = self.observer.predict(current=amax)
        cold_start = predicted is None
        used = amax if cold_start else predicted
        scale = scale_for(used, self.max_val)
        quantized = scaled_qdq(t.detach(), scale, self.fmt)
        if observe:
            if self.telemetry is not None:
                self.telemetry.record(self.layer, self.role, t, amax, used, scale, cold_start, self.fmt.max)
            self.observer.update(amax)
        return quantized


class W8A8Layer:
    """The three role quantizers of one Linear and its ``enabled`` switch; ``linear`` is its forward."""

    def __init__(self, name: str, fmt: str | Format = "hif8", observer: str = "max_window",
                 observer_options: dict[str, Any] | None = None, max_val: float = HIF8_MAX_VAL,
                 telemetry: Telemetry | None = None) -> None:
        fmt = get_format(fmt)
        delayed_scale(1.0, max_val)  # validates max_val
        self.name, self.enabled = name, True
        self.quantizers = {role: RoleQuantizer(name, role, fmt, make_observer(observer, **(observer_options or {})),
                                               max_val, telemetry) for role in ROLES}

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``F.linear`` when disabled; otherwise quantized (module docstring)."""
        if not self.enabled:
            return F.linear(x, weight, bias)
        if not torch.is_grad_enabled():
            q = self.quantizers
            return F.linear(q["input"](x, observe=False), q["weight"](weight, observe=False), bias)
        return W8A8LinearFunction.apply(x, weight, bias, self)

    def reset(self) -> None:
        """Reset every role's observer (history and skipped count)."""
        for quantizer in self.quantizers.values():
            quantizer.observer.reset()


class W8A8LinearFunction(torch.autograd.Function):
    """``y = Q_x(x) Q_w(W)^T + b``; ``dx = Q_g(g) Q_w(W)``, ``dW = Q_g(g)^T Q_x(x)``, ``db = sum g``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                layer: W8A8Layer) -> torch.Tensor:
        qx = layer.quantizers["input"](x)
        qw = layer.quantizers["weight"](weight)
        ctx.save_for_backward(qx, qw)
        ctx.layer = layer
        ctx.bias_dtype = None if bias is None else bias.dtype
        return F.linear(qx, qw, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        qx, qw = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = dw = db = None
        if need_x or need_w:
            qg = ctx.layer.quantizers["grad_output"](grad).to(qw.dtype)
            if need_x:
                dx = (qg @ qw).to(qx.dtype)
            if need_w:
                dw = qg.reshape(-1, qg.shape[-1]).t() @ qx.reshape(-1, qx.shape[-1]).to(qw.dtype)
        if need_b and ctx.bias_dtype is not None:
            db = grad.reshape(-1, grad.shape[-1]).sum(0).to(ctx.bias_dtype)
        return dx, dw, db, None


def w8a8_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, layer: W8A8Layer) -> torch.Tensor:
    """The quantized linear of ``layer`` as a function (``layer.linear``)."""
    return layer.linear(x, weight, bias)


def w8a8_selection(model: nn.Module, include: str = DEFAULT_INCLUDE,
                   skip_proportion: tuple[float, float] = PAPER_SKIP_PROPORTION) -> list[str]:
    """The paper's selection: MLP gate/up/down only, the first 3 and last 2 of 26 blocks skipped, as a proportion
    of the model's depth (``common.ptq.select_linears``: 1 and 1 of 8 blocks, 1 and 0 of 6)."""
    return select_linears(model, include=include, skip_proportion=skip_proportion)


def _quantized_forward(module: nn.Linear, layer: W8A8Layer, input: torch.Tensor) -> torch.Tensor:
    return layer.linear(input, module.weight, module.bias)


class W8A8Handle:
    """What :func:`attach_w8a8` changed: the layers' switches, observers, telemetry; ``remove()`` undoes it."""

    def __init__(self, modules: dict[str, nn.Linear], layers: dict[str, W8A8Layer], telemetry: Telemetry) -> None:
        self.names = list(modules)
        self.layers = layers
        self.telemetry = telemetry
        self._modules = modules

    @property
    def enabled(self) -> bool:
        return all(layer.enabled for layer in self.layers.values())

    def enable(self, reset: bool = True) -> None:
        """Switch quantization on; ``reset`` (default) empties every observer's history first (fact sheet: after
        the BF16 warmup the amax history is reset)."""
        for layer in self.layers.values():
            if reset:
                layer.reset()
            layer.enabled = True

    def disable(self) -> None:
        """Plain ``nn.Linear`` layers (BF16 warmup): no quantization, no observer updates."""
        for layer in self.layers.values():
            layer.enabled = False

    def step(self, step: int) -> None:
        """Set the step stamped on the telemetry rows from now on."""
        self.telemetry.step = int(step)

    def telemetry_rows(self) -> list[dict[str, Any]]:
        return list(self.telemetry.rows)

    def write_telemetry(self, path: str | os.PathLike[str]) -> None:
        """Every telemetry row so far, as CSV, atomically (``common.io.atomic_path``)."""
        self.telemetry.write(path)

    def clear_telemetry(self) -> None:
        self.telemetry.rows.clear()

    def observer(self, name: str, role: str) -> Observer:
        return self.layers[name].quantizers[role].observer

    def state_dict(self) -> dict[str, Any]:
        """Switches, step, telemetry rows and every observer's state (a resumable training checkpoint: a resumed run
        ends with the telemetry of every step)."""
        return {"enabled": {name: layer.enabled for name, layer in self.layers.items()}, "step": self.telemetry.step,
                "telemetry": [dict(row) for row in self.telemetry.rows],
                "observers": {f"{name}::{role}": q.observer.state_dict()
                              for name, layer in self.layers.items() for role, q in layer.quantizers.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, layer in self.layers.items():
            layer.enabled = bool(state["enabled"][name])
            for role, quantizer in layer.quantizers.items():
                quantizer.observer.load_state_dict(state["observers"][f"{name}::{role}"])
        self.telemetry.step = int(state["step"])
        self.telemetry.rows = [dict(row) for row in state["telemetry"]]

    def remove(self) -> None:
        """Give every module back its class's forward (idempotent); parameters were never touched."""
        for module in self._modules.values():
            module.__dict__.pop("forward", None)
        self._modules = {}

    def __enter__(self) -> W8A8Handle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.remove()


def attach_w8a8(model: nn.Module, names: Sequence[str], fmt: str | Format = "hif8", observer: str = "max_window",
                observer_options: dict[str, Any] | None = None, max_val: float = HIF8_MAX_VAL) -> W8A8Handle:
    """Make the Linear modules ``names`` of ``model`` compute :class:`W8A8LinearFunction` (module docstring).

    Each module's ``forward`` is overridden on the instance (no wrapper module, no new parameters: parameter
    names, ``state_dict`` keys and optimizer state are unchanged); the layers start enabled with empty observers.
    ValueError for a name that is not an ``nn.Linear``, an unknown format, observer or option, a bad ``max_val``,
    or a module whose forward is already overridden.
    """
    modules = linear_modules(model, names)
    for name, module in modules.items():
        if "forward" in module.__dict__:
            raise ValueError(f"module {name!r} already has an instance forward (W8A8 attached twice?)")
    telemetry = Telemetry()
    layers = {name: W8A8Layer(name, fmt, observer, observer_options, max_val, telemetry) for name in modules}
    for name, module in modules.items():
        module.forward = functools.partial(_quantized_forward, module, layers[name])
    return W8A8Handle(modules, layers, telemetry)
