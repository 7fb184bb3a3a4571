"""A synthetic observer study: amax traces replayed through the delayed-scaling observers (``papers/maxwindow_hif8``,
issue 6).

* :func:`amax_trace` is one tensor role's per-step amax ``a_0 .. a_{T-1}`` (float64, positive), a seeded synthetic
  shape (:data:`TRACE_KINDS`); :func:`spike_steps` is where its spikes are.
* :func:`run_observer` replays a trace through ``common.observers.make_observer(name, **options)`` exactly as the
  QAT layer (``common.quantizers.w8a8.RoleQuantizer``) does::

      p = observer.predict(current=a_t)      # history a_0 .. a_{t-1}; None: cold start
      prediction_t = a_t if p is None else p # the amax the scale comes from
      observer.update(a_t)                   # AFTER

  so on a cold start (step 0 of a fresh observer) the prediction is the step's own amax, and for ``current`` every
  prediction is the step's own amax.
* :func:`saturation_metrics` scores a prediction against the trace (definitions there): saturation events
  (``a_t > prediction_t``, the layer's ``overflow``), the worst overshoot, the headroom lost to over-conservatism,
  and the saturations at recurring spikes.
* :func:`observer_study` is one row per (trace kind, observer).

The claims it checks (fact sheet): ``most_recent`` saturates at every spike (the one-step lag: its prediction is
the step before the spike); ``max_window`` has no scale-induced saturation at a spike whose equal predecessor is
within its window (only the first spike, or one after a gap longer than the window, saturates) and pays for it in
headroom after the spike; ``exp_smooth`` lags on non-monotone dynamics; ``current`` never saturates and loses no
headroom.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from common.observers import make_observer
from common.registry import lookup

# Per kind: the options of amax_trace and their defaults (None: derived from ``steps``, see amax_trace).
TRACE_OPTIONS: dict[str, dict[str, Any]] = {
    "steady": {"level": 1.0, "noise": 0.05},
    "spikes": {"level": 1.0, "noise": 0.05, "factor": 10.0, "period": 20, "offset": None},
    "random_spikes": {"level": 1.0, "noise": 0.05, "factor": 10.0, "period": 20},
    "drift": {"level": 1.0, "noise": 0.0, "rate": 0.005},
    "oscillation": {"level": 1.0, "noise": 0.0, "amplitude": 0.5, "period": 100},
    "step_change": {"level": 1.0, "noise": 0.0, "factor": 4.0, "start": None, "stop": None},
}
TRACE_KINDS: tuple[str, ...] = tuple(TRACE_OPTIONS)
SPIKE_KINDS: tuple[str, ...] = ("spikes", "random_spikes")
DEFAULT_OBSERVERS: tuple[str, ...] = ("most_recent", "exp_smooth", "max_window", "current")
METRICS: tuple[str, ...] = ("saturation_events", "saturation_rate", "worst_overshoot", "headroom_lost_bits",
                            "spike_count", "spike_saturations", "recurring_spike_saturations")


def amax_trace(kind: str, steps: int, *, seed: int = 0, **options: Any) -> np.ndarray:
    """The synthetic amax trace ``a_t``, ``t = 0 .. steps - 1`` (float64, every value finite and > 0).

    Every kind draws ``z_t`` standard normal, then ``u_t`` uniform on [0, 1), ``steps`` of each, from
    ``np.random.default_rng(seed)`` (always both, in that order), and is ``a_t = base_t * exp(noise * z_t)``
    (multiplicative noise; ``noise = 0`` gives ``base_t`` exactly) except at spike steps. ``level > 0`` (default
    1), ``noise >= 0`` (default 0.05 for ``steady`` and the spike kinds, 0 for the deterministic shapes):

    * ``steady``: ``base_t = level``.
    * ``spikes``: steady, and at the spike steps ``t = offset + k * period`` (``k = 0, 1, ...``; ``period`` an
      integer >= 1, default 20, below ``max_window``'s default window 64 so spikes recur within it; ``offset`` an
      integer >= 0, default ``period // 2``) ``a_t = factor * level`` exactly (``factor > 1``, default 10): every
      spike has the same height, so a spike is an amax the observer may already have seen.
    * ``random_spikes``: the same with spike steps ``{t : u_t < 1 / period}`` (independent, mean gap ``period``,
      a number >= 1).
    * ``drift``: ``base_t = level * (1 + rate)^t`` (``rate > -1``, default 0.005: slow geometric growth, monotone
      when ``noise = 0``).
    * ``oscillation``: ``base_t = level * (1 + amplitude * sin(2 pi t / period))`` (``0 <= amplitude < 1``,
      default 0.5; ``period > 0``, default 100): a non-monotone level.
    * ``step_change``: ``base_t = factor * level`` for ``start <= t < stop`` and ``level`` otherwise (``factor >
      0``, default 4; integers ``0 <= start <= stop <= steps``, defaults ``steps // 3`` and ``2 * steps // 3``):
      the level jumps up, then back down.

    ValueError naming an unknown kind, a ``steps`` that is not an integer >= 1, a ``seed`` that is not an integer
    >= 0, an unknown option or a bad option value.
    """
    return _trace(kind, steps, seed, options)[0]


def spike_steps(kind: str, steps: int, *, seed: int = 0, **options: Any) -> np.ndarray:
    """The spike steps of :func:`amax_trace` with the same arguments, ascending (int64; empty for a kind without
    spikes, i.e. not in :data:`SPIKE_KINDS`)."""
    return np.flatnonzero(_trace(kind, steps, seed, options)[1]).astype(np.int64)


def run_observer(trace: Sequence[float] | np.ndarray, name: str, *, spikes: Iterable[int] | None = None,
                 **options: Any) -> dict[str, Any]:
    """Replay ``trace`` through a fresh ``make_observer(name, **options)`` with delayed semantics (module
    docstring): ``prediction_t`` is the observer's prediction from ``a_0 .. a_{t-1}``, or ``a_t`` on a cold start
    (``predict`` returns None: step 0 of the history observers, every step of ``current`` is ``a_t`` anyway).

    Returns ``prediction`` (float64 array), ``saturated`` (bool array, ``a_t > prediction_t``) and the
    :func:`saturation_metrics` of ``prediction`` with ``spikes`` (step indices, e.g. :func:`spike_steps`).
    ``trace`` is 1-D, non-empty, finite and > 0; ValueError naming a bad trace, an unknown observer or option.
    """
    amaxes = _check_trace(trace)
    observer = make_observer(name, **options)
    prediction = np.empty_like(amaxes)
    for t, amax in enumerate(amaxes.tolist()):
        predicted = observer.predict(current=amax)
        prediction[t] = amax if predicted is None else predicted
        observer.update(amax)
    metrics = saturation_metrics(amaxes, prediction, spikes)
    return {"prediction": prediction, "saturated": amaxes > prediction, **metrics}


def saturation_metrics(trace: Sequence[float] | np.ndarray, prediction: Sequence[float] | np.ndarray,
                       spikes: Iterable[int] | None = None) -> dict[str, Any]:
    """Saturation and over-conservatism of ``prediction`` (the amax each step's scale came from) on ``trace``.

    A step saturates when ``a_t > prediction_t`` (the QAT layer's ``overflow``: the scale maps ``prediction_t``
    onto ``max_val``, so values above it leave the range a clamp at the predicted amax keeps: scale-induced
    saturation). Over all ``T`` steps:

    * ``saturation_events``: the number of saturated steps; ``saturation_rate = saturation_events / T``.
    * ``worst_overshoot = max_t a_t / prediction_t`` (1.0 when the prediction never falls short and meets the
      amax once, as on a cold start).
    * ``headroom_lost_bits``: the mean of ``log2(prediction_t / a_t)`` over the steps with ``prediction_t >=
      a_t`` (the unsaturated ones): the bits of the format's range above the step's amax, wasted by an
      over-conservative prediction (0 when ``prediction_t = a_t``; 1 when it is twice the amax).
    * with ``spikes`` (step indices, deduplicated and sorted here): ``spike_count``, ``spike_saturations`` (the
      saturated spike steps) and ``recurring_spike_saturations`` (the saturated spike steps after the first
      spike); all three None without ``spikes``.

    ``trace`` and ``prediction`` 1-D, the same non-zero length, finite and > 0; spikes in ``[0, T)``: ValueError
    naming the bad value.
    """
    amaxes = _check_trace(trace)
    predicted = _check_trace(prediction, "prediction")
    if predicted.shape != amaxes.shape:
        raise ValueError(f"prediction has {predicted.size} steps, the trace {amaxes.size}")
    saturated = amaxes > predicted
    kept = ~saturated
    events = int(saturated.sum())
    metrics: dict[str, Any] = {
        "saturation_events": events,
        "saturation_rate": events / amaxes.size,
        "worst_overshoot": float(np.max(amaxes / predicted)),
        "headroom_lost_bits": float(np.mean(np.log2(predicted[kept] / amaxes[kept]))) if kept.any() else 0.0,
        "spike_count": None, "spike_saturations": None, "recurring_spike_saturations": None,
    }
    if spikes is not None:
        at = _check_spikes(spikes, amaxes.size)
        metrics["spike_count"] = int(at.size)
        metrics["spike_saturations"] = int(saturated[at].sum())
        metrics["recurring_spike_saturations"] = int(saturated[at[1:]].sum())
    return metrics


def observer_study(kinds: Iterable[str] = TRACE_KINDS, observers: Iterable[str] = DEFAULT_OBSERVERS,
                   steps: int = 500, seed: int = 0,
                   observer_options: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per (kind, observer), kinds outer: ``kind``, ``observer``, ``steps``, ``seed`` and the
    :func:`saturation_metrics` (:data:`METRICS`) of :func:`run_observer` on ``amax_trace(kind, steps, seed=seed)``
    (every trace with its default options) through ``make_observer(observer, **observer_options.get(observer,
    {}))`` (without options, the defaults of ``common.observers``: ``window=64``, ``alpha=0.1``). The spike metrics
    are filled for :data:`SPIKE_KINDS` and None otherwise. ValueError naming a bad kind, observer, option, ``steps``
    or ``seed`` (before any replay).
    """
    kinds, observers, options = list(kinds), list(observers), dict(observer_options or {})
    traces = {kind: _trace(kind, steps, seed, {}) for kind in kinds}
    for name in observers:
        make_observer(name, **options.get(name, {}))
    rows = []
    for kind, (trace, spike_mask) in traces.items():
        spikes = np.flatnonzero(spike_mask) if kind in SPIKE_KINDS else None
        for name in observers:
            result = run_observer(trace, name, spikes=spikes, **options.get(name, {}))
            rows.append({"kind": kind, "observer": name, "steps": steps, "seed": seed,
                         **{metric: result[metric] for metric in METRICS}})
    return rows


def _trace(kind: str, steps: int, seed: int, options: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(trace, spike mask)`` of :func:`amax_trace` (its docstring has the formulas and the checks)."""
    defaults = lookup(TRACE_OPTIONS, kind, "trace kind")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} for trace kind {kind!r}; valid options: "
                         f"{', '.join(defaults)}")
    o = {**defaults, **options}
    level = _number(o["level"], "level", low=0.0)
    noise = _number(o["noise"], "noise", low=0.0, inclusive=True)
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(steps)
    u = rng.random(steps)
    t = np.arange(steps, dtype=np.float64)
    spike = np.zeros(steps, dtype=bool)
    height = 0.0  # the spike amax (spike kinds)
    if kind == "steady":
        base = np.full(steps, level)
    elif kind in SPIKE_KINDS:
        height = _number(o["factor"], "factor", low=1.0) * level
        base = np.full(steps, level)
        if kind == "spikes":
            period = _integer(o["period"], "period", 1)
            offset = _integer(period // 2 if o["offset"] is None else o["offset"], "offset", 0)
            spike[offset::period] = True
        else:
            period = _number(o["period"], "period", low=1.0, inclusive=True)
            spike = u < 1.0 / period
    elif kind == "drift":
        rate = _number(o["rate"], "rate", low=-1.0)
        with np.errstate(over="ignore"):  # an Inf is caught below
            base = level * np.power(1.0 + rate, t)
    elif kind == "oscillation":
        amplitude = _number(o["amplitude"], "amplitude", low=0.0, inclusive=True)
        if amplitude >= 1:
            raise ValueError(f"amplitude must be < 1 (a positive level), got {amplitude!r}")
        period = _number(o["period"], "period", low=0.0)
        base = level * (1.0 + amplitude * np.sin(2.0 * np.pi * t / period))
    else:  # step_change
        factor = _number(o["factor"], "factor", low=0.0)
        start = _integer(steps // 3 if o["start"] is None else o["start"], "start", 0)
        stop = _integer(2 * steps // 3 if o["stop"] is None else o["stop"], "stop", 0)
        if not start <= stop <= steps:
            raise ValueError(f"need start <= stop <= steps, got start={start}, stop={stop}, steps={steps}")
        base = np.full(steps, level)
        base[start:stop] = factor * level
    trace = base * np.exp(noise * z)
    trace[spike] = height
    if not (np.all(np.isfinite(trace)) and np.all(trace > 0)):
        raise ValueError(f"trace {kind!r} with options {options!r} is not finite and positive (overflow?)")
    return trace, spike


def _number(value: Any, name: str, low: float, inclusive: bool = False) -> float:
    """``value`` as a finite float ``> low`` (``>= low`` if ``inclusive``), else ValueError naming it."""
    ok = (not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
          and (value >= low if inclusive else value > low))
    if not ok:
        raise ValueError(f"{name} must be a finite number {'>=' if inclusive else '>'} {low:g}, got {value!r}")
    return float(value)


def _integer(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _check_trace(values: Sequence[float] | np.ndarray, what: str = "trace") -> np.ndarray:
    """``values`` as a 1-D float64 array, non-empty, finite and > 0, else ValueError naming the bad value."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D sequence of amaxes, got shape {array.shape}")
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what} values must be finite and > 0, got {float(array[index])!r} at step {index}")
    return array


def _check_spikes(spikes: Iterable[int], steps: int) -> np.ndarray:
    """Spike step indices as a sorted unique int64 array within ``[0, steps)``, else ValueError naming one."""
    at = np.asarray(list(spikes))
    if at.size == 0:
        return np.zeros(0, dtype=np.int64)
    if at.ndim != 1 or not np.issubdtype(at.dtype, np.integer):
        raise ValueError(f"spikes must be integer step indices, got {at.tolist()!r}")
    outside = at[(at < 0) | (at >= steps)]
    if outside.size:
        raise ValueError(f"spike step {int(outside[0])} is outside the trace's steps 0..{steps - 1}")
    return np.unique(at).astype(np.int64)
