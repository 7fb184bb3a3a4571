"""W8A8 QAT with quantized gradients and delayed per-tensor scaling (HiF8 by default): ``papers/maxwindow_hif8``.

For a selected ``nn.Linear`` with weight ``W`` (out x in), input ``x``, output gradient ``g`` (Cheng et al. 2026,
after the authors' code)::

    forward   y  = Q_x(x) Q_w(W)^T + b
    backward  dx = Q_g(g) Q_w(W)          dW = Q_g(g)^T Q_x(x)          db = sum of g over tokens (unquantized)

``Q_r(t) = fmt(t s_r) / s_r`` (:func:`common.quantizers.scaled.scaled_qdq`: saturating, the format's default rounding,
TA for HiF8) with one per-tensor scale per role ``r`` in :data:`common.recipes.ROLES` of each layer, each role with
its own observer (:mod:`common.observers`). A *call* of a role: ``input`` and ``weight`` are called once per
forward of the layer under autograd, ``grad_output`` once per backward through it; under gradient accumulation every
micro-batch is one forward and one backward, so each role is called ``grad_accum`` times per optimizer step (a
forward that activation checkpointing recomputes is one more call). Delayed scaling, at every call::

    a = max |t|                                       # one reduction, reused below
    p = observer.predict(current=a)                   # the history so far (below); None: cold start
    s = float32(max_val / ((a if p is None else p) + 1e-12))   # delayed_scale; 1.0 if that amax is not finite
    Q(t) = fmt(t s) / s
    then a goes into the history                      # AFTER: zero / non-finite amaxes are skipped

What one history entry is (``history_unit``, :data:`common.recipes.HISTORY_UNITS`):

* ``"call"`` (default; the authors' code): one entry per call, its amax ``a``. ``p`` comes from the calls before
  this one, of earlier steps and of this step's earlier micro-batches; a ``max_window`` of 64 entries spans
  ``64 / grad_accum`` optimizer steps (8 at 8 accumulation steps). The weight role sees the same ``W`` at every
  micro-batch of a step, so its entries repeat ``grad_accum`` times.
* ``"step"``: one entry per optimizer step, ``max`` of the amaxes of that step's calls (zero / non-finite ones are
  passed to the observer at once, which skips and counts them; a step without a usable amax adds no entry). The
  step's maximum is pending while the step runs and committed when the handle's step counter changes
  (:meth:`W8A8Handle.step`, which :meth:`common.qat.warmup.BF16Warmup.before_step` calls every step), so every
  call of step ``t`` predicts from steps ``< t`` and a window of 64 spans 64 optimizer steps whatever
  ``grad_accum``. A whole first step after a reset is a cold start (each call uses its own amax). A layer used
  without a handle commits with :meth:`W8A8Layer.end_step`.

With ``grad_accum = 1`` the two units agree exactly. The state (:meth:`W8A8Handle.state_dict`) holds the pending
per-step maxima, so a run resumed between steps continues identically.

The straight-through estimator is implicit: the backward uses the quantized operands as written above and no
clipping mask, so gradients pass "as if nothing happened" to values the forward clipped. The forward's ``Q_x(x)``
and ``Q_w(W)`` are saved for the backward (not re-quantized). The matmuls of the backward run in the weight's dtype
(float32 under bf16 autocast); ``dx`` comes back in ``x``'s dtype.

Telemetry, one row per role per call (:data:`TELEMETRY_FIELDS`; ``grad_accum`` rows per layer, role and step):

* ``step`` (the handle's step counter), ``layer``, ``role``, ``amax``: this rank's own amax ``max |t|`` (with
  ``amax_reduction="data_parallel"`` too: every statistic of a row describes the rank's own tensor);
* ``predicted_amax``: the amax the scale came from, ``p`` (or ``a`` on a cold start: the reduced amax with
  ``"data_parallel"``, at least the row's ``amax``); ``scale``: ``s`` (with ``"data_parallel"`` both are the same on
  every rank);
* ``clipped_fraction``: fraction of values with ``|t s| > fmt.max`` in float32 (clipped by the format);
* ``over_range_fraction``: fraction of values with ``|t| > predicted_amax`` in float32 (outside the range the scale
  maps onto ``[-max_val, max_val]``);
* ``overflow``: ``amax > predicted_amax``, a saturation event of the delayed scale on this rank's tensor (never on a
  cold start); ``cold_start``;
* ``rel_error``: ``||Q(t) - t||_2 / ||t||_2`` of this call's tensor and the ``Q(t)`` the matmuls use (in ``t``'s
  dtype), float32 row sums of squares accumulated over the rows in float64 (:func:`relative_error`: ~1e-7
  relative accuracy); 0 for an all-zero tensor;
* ``mantissa_bits_lost``: over the over-range values (``|t| > predicted_amax``) of the call, the mean of
  ``bits(|t| s_exact) - bits(|t| s)``, where ``s_exact = float32(max_val / (a + 1e-12))`` is the scale of the call's
  own amax (no saturation), ``bits`` :func:`common.formats.mantissa_bits` (HiF8: 3 fraction bits for binade
  exponents ``|e| <= 3``, 2 for 4..7, 1 for 8..15; a value clipped by the format counts with the bits at the
  maximum) and the products ``|t| s`` float32 as in ``Q``; 0 when no value is over range; NaN when some are and the
  format has no mantissa bits (integers).

With ``max_val = 15`` HiF8 (maximum 2^15) only clips values above ``2^15 / 15 ~ 2185`` times the prediction; a
smaller spike above the prediction lands in HiF8's coarse tiers (``over_range_fraction``, ``mantissa_bits_lost``)
and is clipped only where ``max_val`` is the format's maximum. The over-range statistics cost a pass only when
``a`` exceeds the prediction, the clipped fraction only when ``a s`` exceeds ``fmt.max``; ``rel_error`` costs
float32 passes at every call (about one qdq). :func:`saturation_summary` aggregates the rows per role. The rows are
stored by column (:class:`Telemetry`: about 90 bytes a row; appending is O(1), reading, writing and the state
O(rows)).

Data parallelism (``amax_reduction``, :data:`common.recipes.AMAX_REDUCTIONS`; the recipe field documents it and its
TransformerEngine analogue): under DDP each rank keeps its own observers. With ``"none"`` (default; per rank, as the
authors' code) a rank observes the amaxes of its own micro-batches. With ``"data_parallel"`` every training call
replaces ``a`` above by :func:`all_reduce_amax` of it, ``a = max over the ranks r of max |t_r|`` (MAX over the
default process group or ``amax_group``), before the prediction (so also on a cold start and for ``current``) and
before it enters the history: every rank holds the same history and pending step maximum and quantizes with the same
scale. That costs one blocking all-reduce (two float64 numbers) per quantized tensor per training call, not batched;
every rank must make the same calls in the same order, as DDP's identical graphs do. Evaluation calls never
communicate (their amax stays local). Without an initialised process group, or with a group of one rank, nothing is
reduced and the numerics are ``"none"``'s, bit for bit. The weight role's amax is the same on every rank under DDP
(the replicas stay identical), so its reduction changes nothing but still costs its all-reduce. Resuming:
:func:`common.train.train` checkpoints rank 0's state only, which with ``"data_parallel"`` is every rank's (a
resumed DDP run continues exactly) and with ``"none"`` is restored on every rank (TransformerEngine's caveat for
``reduce_amax=False``). The observers and the telemetry hold Python floats, so every role costs a few device
synchronisations per call on GPUs.

Evaluation (calls under ``torch.no_grad()``) quantizes with the current prediction (its own amax on a cold start)
and leaves the observers and the telemetry alone. A disabled layer (``enabled = False``, the BF16 warmup of
:class:`common.qat.warmup.BF16Warmup`) is exactly ``nn.Linear``: no quantization, no observer updates.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from array import array
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from common.formats import Family, Format, get_format, mantissa_bits
from common.io import atomic_path
from common.observers import Observer, delayed_scale, make_observer
from common.recipes import DelayedScalingRecipe, check_recipe
from common.select import DEFAULT_INCLUDE, linear_modules, select_linears

from .scaled import float32, scaled_qdq

TELEMETRY_FIELDS = ("step", "layer", "role", "amax", "predicted_amax", "scale", "clipped_fraction",
                    "over_range_fraction", "overflow", "cold_start", "rel_error", "mantissa_bits_lost")
PAPER_SKIP_PROPORTION = (3 / 26, 2 / 26)  # first 3 and last 2 of OpenPangu-Embedded-1B's 26 blocks stay BF16
_LABELS = ("layer", "role")  # telemetry fields stored as int32 codes of names
_FLAGS = ("overflow", "cold_start")  # stored as int8 0 / 1
# the array typecode of each telemetry column: "q" int64, "d" float64, "i" int32, "b" int8 (numpy reads them alike)
_TYPECODES = {**dict.fromkeys(TELEMETRY_FIELDS, "d"), "step": "q", **dict.fromkeys(_LABELS, "i"),
              **dict.fromkeys(_FLAGS, "b")}


def tensor_amax(t: torch.Tensor) -> float:
    """``max |t|`` as a float (NaN if ``t`` has a NaN, 0 for an empty tensor); ``aminmax`` is one fused pass."""
    if t.numel() == 0:
        return 0.0
    low, high = (float(v) for v in torch.aminmax(t.detach()))
    return math.nan if math.isnan(low) or math.isnan(high) else max(-low, high)


def all_reduce_amax(amax: float, device: torch.device, group: dist.ProcessGroup | None = None) -> float:
    """``max`` of ``amax`` over the ranks of ``group`` (None: the default process group), NaN if any rank's is NaN;
    ``amax`` itself without an initialised process group or with a group of one rank (module docstring).

    One blocking all-reduce (MAX) of ``[amax, isnan(amax)]`` as float64 on ``device`` (the quantized tensor's: nccl
    reduces GPU tensors only); exact, since the maximum is one of the ranks' amaxes, each a float32 / bf16 value.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) <= 1:
        return amax
    nan = math.isnan(amax)
    values = torch.tensor([0.0 if nan else amax, float(nan)], dtype=torch.float64, device=device)
    dist.all_reduce(values, op=dist.ReduceOp.MAX, group=group)
    reduced, any_nan = values.tolist()
    return math.nan if any_nan else reduced


def scale_for(amax: float, max_val: float) -> float:
    """``float32(delayed_scale(amax, max_val))``; 1.0 for an amax that is not finite (a cold start on Inf/NaN)."""
    return float32(delayed_scale(amax, max_val)) if math.isfinite(amax) else 1.0


def relative_error(quantized: torch.Tensor, t: torch.Tensor) -> float:
    """``||quantized - t||_2 / ||t||_2`` (0 if ``t`` is all zero or empty).

    The differences and squares are float32 (a difference is exact where ``quantized`` is zero or within a factor 2
    of ``t`` (Sterbenz), so everywhere but values clipped below half their size, off by at most 2^-24 relative
    there), the sum of each row (the last dimension) is a float32 reduction (cascade sums on CPU, a tree on GPU)
    and the sum over the rows accumulates in float64: about 1e-7 relative accuracy for the cost of float32 passes
    (float64 copies of both tensors cost ~3x one qdq on CPU).
    """
    if t.numel() == 0:
        return 0.0
    x = t.detach().float()
    rows = x.reshape(-1, x.shape[-1]) if x.dim() else x.reshape(1, 1)
    error = float((quantized.detach().float().reshape(rows.shape) - rows).square_().sum(-1).sum(dtype=torch.float64))
    norm = float(rows.square().sum(-1).sum(dtype=torch.float64))
    return 0.0 if norm == 0 else math.sqrt(error) / math.sqrt(norm)


def mantissa_bits_lost(over_range: torch.Tensor, scale: float, exact_scale: float, fmt: Format) -> float:
    """Mean of ``bits(v s_exact) - bits(v s)`` over the magnitudes ``v`` in ``over_range`` (float32 products;
    ``bits`` :func:`common.formats.mantissa_bits`); 0 for no value, NaN for a format without mantissa bits."""
    if over_range.numel() == 0:
        return 0.0
    if fmt.family not in (Family.FLOAT, Family.TAPERED):
        return math.nan
    lost = mantissa_bits(over_range * exact_scale, fmt) - mantissa_bits(over_range * scale, fmt)
    return float(lost.double().mean())


class Telemetry:
    """The in-memory saturation log of a handle: rows of :data:`TELEMETRY_FIELDS` stamped with ``step``.

    Stored by column, one ``array`` per field (``columns``): int64 ``step``, float64 numbers, int8 flags, int32 codes
    of ``layer`` and ``role`` into ``labels`` (name -> code, in order of first use). About 90 bytes a row; ``append``
    is O(1), :meth:`rows`, :meth:`write` and the state O(rows); the state holds one tensor a column (fast to save).
    """

    def __init__(self) -> None:
        self.step = 0
        self.columns: dict[str, array[Any]] = {}
        self.labels: dict[str, dict[str, int]] = {}
        self.clear()

    def __len__(self) -> int:
        return len(self.columns["step"])

    def clear(self) -> None:
        """Drop every row (the step stays)."""
        self.columns = {field: array(code) for field, code in _TYPECODES.items()}
        self.labels = {field: {} for field in _LABELS}

    def append(self, row: Mapping[str, Any]) -> None:
        """Add one row (a mapping with every field of :data:`TELEMETRY_FIELDS`)."""
        for field in TELEMETRY_FIELDS:
            value = row[field]
            if field in self.labels:
                value = self.labels[field].setdefault(value, len(self.labels[field]))
            self.columns[field].append(value)

    def _values(self) -> list[Iterable[Any]]:
        """One iterable of Python values per field, in :data:`TELEMETRY_FIELDS` order (codes and flags decoded)."""
        out: list[Iterable[Any]] = []
        for field, column in self.columns.items():
            if field in self.labels:
                out.append(map(list(self.labels[field]).__getitem__, column))
            else:
                out.append(map(bool, column) if field in _FLAGS else column)
        return out

    def rows(self) -> list[dict[str, Any]]:
        """Every row as a new dict, in order."""
        return [dict(zip(TELEMETRY_FIELDS, values, strict=True)) for values in zip(*self._values(), strict=True)]

    def record(self, layer: str, role: str, t: torch.Tensor, quantized: torch.Tensor, amax: float, predicted: float,
               scale: float, cold_start: bool, fmt: Format, max_val: float) -> None:
        """Append the row of one call (module docstring): ``t`` the tensor, ``quantized`` its ``Q(t)``,
        ``predicted`` the amax the scale ``scale`` came from."""
        n = max(t.numel(), 1)
        over = clipped = bits_lost = 0.0
        if amax > predicted:
            magnitude = t.detach().float().abs()
            outside = magnitude[magnitude > predicted]
            over = outside.numel() / n
            bits_lost = mantissa_bits_lost(outside, scale, scale_for(amax, max_val), fmt)
        if amax * scale > fmt.max:  # float64 bound: below it no float32 product |t s| exceeds fmt.max
            clipped = int(torch.count_nonzero((t.detach().float() * scale).abs() > fmt.max)) / n
        self.append({"step": self.step, "layer": layer, "role": role, "amax": amax, "predicted_amax": predicted,
                     "scale": scale, "clipped_fraction": clipped, "over_range_fraction": over,
                     "overflow": (not cold_start) and amax > predicted, "cold_start": cold_start,
                     "rel_error": relative_error(quantized, t), "mantissa_bits_lost": bits_lost})

    def write(self, path: str | os.PathLike[str]) -> None:
        """All rows so far as CSV (numbers as ``str()``, flags ``True`` / ``False``), atomically (the file appears
        whole or not at all)."""
        with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(TELEMETRY_FIELDS)
            writer.writerows(zip(*self._values(), strict=True))

    def state_dict(self) -> dict[str, Any]:
        """``step``, ``labels`` (the names of each code field, by code) and ``columns`` (one CPU tensor per field, a
        copy): loadable with ``torch.load(weights_only=True)``."""
        return {"step": self.step, "labels": {field: list(names) for field, names in self.labels.items()},
                "columns": {field: torch.from_numpy(np.frombuffer(column, dtype=column.typecode).copy())
                            for field, column in self.columns.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.step = int(state["step"])
        self.labels = {field: {name: code for code, name in enumerate(state["labels"][field])} for field in _LABELS}
        self.columns = {field: array(code, state["columns"][field].cpu().numpy().astype(code).tobytes())
                        for field, code in _TYPECODES.items()}


def saturation_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Per tensor role (sorted), over its telemetry rows with a delayed scale (cold starts excluded everywhere):

    * ``calls``: the number of those rows (one per layer and call);
    * ``overflow_rows``: how many overflow (``amax > predicted_amax``: a saturation event);
    * ``overflow_rate``: ``overflow_rows / calls``;
    * ``mean_over_range``, ``max_over_range``: mean and max of ``over_range_fraction`` (values above the
      prediction);
    * ``mean_clipped``: mean ``clipped_fraction`` (values clipped by the format's range);
    * ``rel_error_overflow``, ``rel_error_no_overflow``: mean ``rel_error`` over the overflow rows and over the
      others;
    * ``mean_mantissa_bits_lost``: mean ``mantissa_bits_lost`` over the overflow rows.

    Means over no row: 0.0 for ``overflow_rate``, ``mean_over_range``, ``max_over_range`` and ``mean_clipped`` (no
    call, no saturation), None for the three conditional means. Rows may come from :meth:`W8A8Handle.telemetry_rows`
    or a typed read of the CSV (``overflow`` and ``cold_start`` bools, numbers floats). One pass over the rows.
    """
    sums: dict[str, dict[str, Any]] = {}
    for row in rows:
        acc = sums.setdefault(row["role"], {"calls": 0, "overflow_rows": 0, "over_range": 0, "max_over_range": 0.0,
                                            "clipped": 0, "error_overflow": 0, "error_no_overflow": 0, "bits": 0})
        if row["cold_start"]:
            continue
        acc["calls"] += 1
        acc["over_range"] += row["over_range_fraction"]
        acc["max_over_range"] = max(acc["max_over_range"], row["over_range_fraction"])
        acc["clipped"] += row["clipped_fraction"]
        if row["overflow"]:
            acc["overflow_rows"] += 1
            acc["error_overflow"] += row["rel_error"]
            acc["bits"] += row["mantissa_bits_lost"]
        else:
            acc["error_no_overflow"] += row["rel_error"]
    out: dict[str, dict[str, float | int | None]] = {}
    for role in sorted(sums):
        acc = sums[role]
        n, k = acc["calls"], acc["overflow_rows"]
        out[role] = {"calls": n, "overflow_rate": k / n if n else 0.0,
                     "mean_over_range": acc["over_range"] / n if n else 0.0, "max_over_range": acc["max_over_range"],
                     "mean_clipped": acc["clipped"] / n if n else 0.0, "overflow_rows": k,
                     "rel_error_overflow": acc["error_overflow"] / k if k else None,
                     "rel_error_no_overflow": acc["error_no_overflow"] / (n - k) if n > k else None,
                     "mean_mantissa_bits_lost": acc["bits"] / k if k else None}
    return out


class RoleQuantizer:
    """Delayed-scaling fake quantizer of one tensor role of one layer (module docstring) with the format, observer,
    ``max_val``, history unit and amax reduction of ``recipe``; ``pending`` is the maximum of this step's amaxes not
    yet in the history (``history_unit="step"``; always None for ``"call"``); ``amax_group``: the process group of
    ``amax_reduction="data_parallel"`` (None: the default one; module docstring, data parallelism)."""

    def __init__(self, layer: str, role: str, recipe: DelayedScalingRecipe, telemetry: Telemetry | None,
                 amax_group: dist.ProcessGroup | None = None) -> None:
        self.layer, self.role, self.fmt = layer, role, get_format(recipe.format)
        self.observer = make_observer(recipe.observer, **dict(recipe.observer_options))
        self.max_val, self.telemetry = recipe.max_val, telemetry
        self.history_unit, self.amax_reduction, self.amax_group = recipe.history_unit, recipe.amax_reduction, amax_group
        self.pending: float | None = None

    def __call__(self, t: torch.Tensor, observe: bool = True) -> torch.Tensor:
        """``Q(t)`` in ``t``'s dtype; ``observe=False`` leaves the observer and the telemetry alone (and, with
        ``amax_reduction="data_parallel"``, uses the local amax: no communication)."""
        local = tensor_amax(t)
        amax = local
        if observe and self.amax_reduction == "data_parallel":
            amax = all_reduce_amax(local, t.device, self.amax_group)
        predicted = self.observer.predict(current=amax)
        cold_start = predicted is None
        used = amax if cold_start else predicted
        scale = scale_for(used, self.max_val)
        quantized = scaled_qdq(t.detach(), scale, self.fmt)
        if observe:
            if self.telemetry is not None:
                self.telemetry.record(self.layer, self.role, t, quantized, local, used, scale, cold_start, self.fmt,
                                      self.max_val)
            self.observe(amax)
        return quantized

    def observe(self, amax: float) -> None:
        """Put this call's amax into the history (``"call"``) or into the step's pending maximum (``"step"``; zero
        and non-finite amaxes go to the observer at once, which skips and counts them)."""
        if self.history_unit == "step" and amax > 0 and math.isfinite(amax):
            self.pending = amax if self.pending is None else max(self.pending, amax)
        else:
            self.observer.update(amax)

    def end_step(self) -> None:
        """Commit the pending per-step maximum as one history entry (nothing pending: nothing happens)."""
        if self.pending is not None:
            self.observer.update(self.pending)
            self.pending = None

    def reset(self) -> None:
        """Empty the observer (history and skipped count) and drop the pending maximum."""
        self.observer.reset()
        self.pending = None


class W8A8Layer:
    """The role quantizers of one Linear (every role of ``recipe.roles``: the others pass through unquantized) and
    its ``enabled`` switch; ``linear`` is its forward. ``telemetry`` collects the rows of its training calls;
    ``amax_group``: as :func:`attach_w8a8`. ValueError for a recipe that is not a
    :class:`common.recipes.DelayedScalingRecipe`."""

    def __init__(self, name: str, recipe: DelayedScalingRecipe, telemetry: Telemetry | None = None,
                 amax_group: dist.ProcessGroup | None = None) -> None:
        self.recipe = check_recipe(recipe, DelayedScalingRecipe)
        self.name, self.enabled, self.history_unit = name, True, recipe.history_unit
        self.quantizers = {role: RoleQuantizer(name, role, recipe, telemetry, amax_group) for role in recipe.roles}

    def quantize_operand(self, role: str, t: torch.Tensor, observe: bool = True) -> torch.Tensor:
        """``Q_role(t)`` (:class:`RoleQuantizer`), or ``t`` itself for a role this layer does not quantize."""
        quantizer = self.quantizers.get(role)
        return t if quantizer is None else quantizer(t, observe=observe)

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``F.linear`` when disabled; otherwise quantized (module docstring)."""
        if not self.enabled:
            return F.linear(x, weight, bias)
        if not torch.is_grad_enabled():
            return F.linear(self.quantize_operand("input", x, observe=False),
                            self.quantize_operand("weight", weight, observe=False),
                            bias)
        return W8A8LinearFunction.apply(x, weight, bias, self)

    def end_step(self) -> None:
        """Commit every role's pending per-step maximum (``history_unit="step"``; :meth:`W8A8Handle.step` does this
        when the step changes)."""
        for quantizer in self.quantizers.values():
            quantizer.end_step()

    def reset(self) -> None:
        """Reset every role's observer (history and skipped count) and pending maximum."""
        for quantizer in self.quantizers.values():
            quantizer.reset()


class W8A8LinearFunction(torch.autograd.Function):
    """``y = Q_x(x) Q_w(W)^T + b``; ``dx = Q_g(g) Q_w(W)``, ``dW = Q_g(g)^T Q_x(x)``, ``db = sum g``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                layer: W8A8Layer) -> torch.Tensor:
        qx = layer.quantize_operand("input", x)
        qw = layer.quantize_operand("weight", weight)
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
            qg = ctx.layer.quantize_operand("grad_output", grad).to(qw.dtype)
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
    of the model's depth (``common.select.select_linears``: 1 and 1 of 8 blocks, 1 and 0 of 6)."""
    return select_linears(model, include=include, skip_proportion=skip_proportion)


def _quantized_forward(module: nn.Linear, layer: W8A8Layer, input: torch.Tensor) -> torch.Tensor:
    return layer.linear(input, module.weight, module.bias)


class W8A8Handle:
    """What :func:`attach_w8a8` changed: the layers' switches, observers, telemetry; ``remove()`` undoes it."""

    def __init__(self, modules: dict[str, nn.Linear], layers: dict[str, W8A8Layer], telemetry: Telemetry,
                 recipe: DelayedScalingRecipe) -> None:
        self.names = list(modules)
        self.layers = layers
        self.telemetry = telemetry
        self.recipe, self.history_unit = recipe, recipe.history_unit
        self._modules = modules

    @property
    def enabled(self) -> bool:
        return all(layer.enabled for layer in self.layers.values())

    def enable(self, reset: bool = True) -> None:
        """Switch quantization on; ``reset`` (default) empties every observer's history and pending per-step maximum
        first (fact sheet: after the BF16 warmup the amax history is reset)."""
        for layer in self.layers.values():
            if reset:
                layer.reset()
            layer.enabled = True

    def disable(self) -> None:
        """Plain ``nn.Linear`` layers (BF16 warmup): no quantization, no observer updates."""
        for layer in self.layers.values():
            layer.enabled = False

    def step(self, step: int) -> None:
        """Set the step stamped on the telemetry rows from now on; a step other than the current one first commits
        every pending per-step maximum (``history_unit="step"``: the previous step's history entry)."""
        step = int(step)
        if step != self.telemetry.step:
            for layer in self.layers.values():
                layer.end_step()
        self.telemetry.step = step

    def telemetry_rows(self) -> list[dict[str, Any]]:
        """Every telemetry row so far as a dict (:data:`TELEMETRY_FIELDS`), in call order."""
        return self.telemetry.rows()

    def write_telemetry(self, path: str | os.PathLike[str]) -> None:
        """Every telemetry row so far, as CSV, atomically (``common.io.atomic_path``)."""
        self.telemetry.write(path)

    def clear_telemetry(self) -> None:
        self.telemetry.clear()

    def observer(self, name: str, role: str) -> Observer:
        return self.layers[name].quantizers[role].observer

    def state_dict(self) -> dict[str, Any]:
        """Switches, history unit, step, telemetry rows (by column) and every role's observer state and pending
        per-step maximum (a resumable training checkpoint: a resumed run continues identically and ends with the
        telemetry of every step). Plain Python values; O(rows)."""
        quantizers = {f"{name}::{role}": q for name, layer in self.layers.items()
                      for role, q in layer.quantizers.items()}
        return {"enabled": {name: layer.enabled for name, layer in self.layers.items()},
                "history_unit": self.history_unit, "telemetry": self.telemetry.state_dict(),
                "observers": {key: q.observer.state_dict() for key, q in quantizers.items()},
                "pending": {key: q.pending for key, q in quantizers.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; ValueError for a state of another history unit."""
        if state["history_unit"] != self.history_unit:
            raise ValueError(f"state of history_unit {state['history_unit']!r} loaded into a handle of history_unit "
                             f"{self.history_unit!r}")
        for name, layer in self.layers.items():
            layer.enabled = bool(state["enabled"][name])
            for role, quantizer in layer.quantizers.items():
                quantizer.observer.load_state_dict(state["observers"][f"{name}::{role}"])
                quantizer.pending = state["pending"][f"{name}::{role}"]
        self.telemetry.load_state_dict(state["telemetry"])

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


def attach_w8a8(model: nn.Module, names: Sequence[str], recipe: DelayedScalingRecipe,
                amax_group: dist.ProcessGroup | None = None) -> W8A8Handle:
    """Make the Linear modules ``names`` of ``model`` compute :class:`W8A8LinearFunction` (module docstring) with the
    numerics of ``recipe`` (:class:`common.recipes.DelayedScalingRecipe`, validated on construction): its format,
    ``max_val`` and observer, one history entry per call or per optimizer step (``history_unit``), the operands
    ``roles`` quantized (the others pass through in full precision), each training call observing its rank's own
    amax (``amax_reduction="none"``) or the maximum over the ranks of ``amax_group`` (``"data_parallel"``; None: the
    default process group, looked up at each call, so the group may be initialised after attaching, as
    :func:`common.train.train` does). The front door is :func:`common.quantization.prepare`.

    Each module's ``forward`` is overridden on the instance (no wrapper module, no new parameters: parameter
    names, ``state_dict`` keys and optimizer state are unchanged); the layers start enabled with empty observers.
    ValueError for a recipe of another type, a name that is not an ``nn.Linear``, or a module whose forward is
    already overridden.
    """
    check_recipe(recipe, DelayedScalingRecipe)
    modules = linear_modules(model, names)
    for name, module in modules.items():
        if "forward" in module.__dict__:
            raise ValueError(f"module {name!r} already has an instance forward (W8A8 attached twice?)")
    telemetry = Telemetry()
    layers = {name: W8A8Layer(name, recipe, telemetry, amax_group) for name in modules}
    for name, module in modules.items():
        module.forward = functools.partial(_quantized_forward, module, layers[name])
    return W8A8Handle(modules, layers, telemetry, recipe)
