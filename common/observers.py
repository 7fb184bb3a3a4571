"""amax observers for delayed tensor scaling: predict this step's amax from the amaxes of earlier steps.

Delayed scaling (``papers/maxwindow_hif8``, Cheng et al. 2026, after the authors' code; also NVIDIA Transformer
Engine's delayed-scaling recipe): for step ``t`` of one tensor role, the scale comes from the history up to step
``t - 1`` FIRST, and this step's amax ``a_t = max |x_t|`` is appended AFTER::

    p_t = observer.predict()         # from a_0 .. a_{t-1}; None before any history (cold start)
    s_t = delayed_scale(p_t)         # = max_val / (p_t + 1e-12); on a cold start the caller uses a_t instead
    observer.update(a_t)

so even ``most_recent`` lags one step. The observers (``make_observer(name, **options)``):

* ``most_recent``: ``p_t = a_{t-1}``.
* ``max_window`` (``window=64``): ``p_t = max(a_{t-window}, ..., a_{t-1})``, the last ``window`` amaxes (fewer
  while the history is shorter). No step whose amax was seen within the window can saturate the scale.
* ``exp_smooth`` (``alpha=0.1``): the textbook exponential moving average ``p_1 = a_0`` and
  ``p_t = alpha a_{t-1} + (1 - alpha) p_{t-1}`` (the authors' code uses a damped-trend ensemble instead; the
  fact sheet names the EMA as the textbook version). Computed in float64.
* ``current`` (current tensor scaling, CTS): ``p_t = a_t``, the step's own amax, which the caller passes as
  ``predict(current=a_t)``: it costs an extra pass over the tensor before quantizing it (the amax reduction), where
  the delayed observers reuse the amax they need anyway for ``update`` after the fact. ``predict()`` without
  ``current`` is None. ``update`` only counts skipped amaxes.

The history observers ignore ``predict``'s ``current`` argument.

Skipped amaxes: ``update(a)`` with ``a`` zero or non-finite (NaN, +-Inf) leaves the history, and so the next
prediction, unchanged and increments ``observer.skipped`` (an all-zero tensor, e.g. a gradient at the first step,
or an overflowed one says nothing about the range). A negative amax is a caller error: ``ValueError``.
``reset()`` empties the history and zeroes ``skipped`` (the state of a new observer).
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from typing import Any

from common.registry import lookup

EPSILON = 1e-12
HIF8_MAX_VAL = 15.0


def delayed_scale(amax_pred: float, max_val: float = HIF8_MAX_VAL) -> float:
    """The per-tensor scale ``s = max_val / (amax_pred + 1e-12)`` (authors' qdq: ``x' = Q(x s) / s``).

    ``max_val = 15`` (fact sheet) maps the predicted amax onto 15 = 2^3 x 1.875, the largest HiF8 value of the
    3-mantissa-bit tiers (HiF8's own maximum is 2^15: values above 15 lose precision but are not clipped until
    2^15). ``amax_pred`` must be finite and >= 0, ``max_val`` finite and > 0 (ValueError naming the value).
    """
    if not (math.isfinite(amax_pred) and amax_pred >= 0):
        raise ValueError(f"amax_pred must be finite and >= 0, got {amax_pred!r}")
    if not (math.isfinite(max_val) and max_val > 0):
        raise ValueError(f"max_val must be finite and > 0, got {max_val!r}")
    return max_val / (amax_pred + EPSILON)


class Observer:
    """Base class: ``update`` validates and skips (module docstring), subclasses keep the history. ``delayed``: the
    prediction comes from the history alone, so the first call after a reset has none (a cold start); current
    scaling is not delayed (it predicts from the call's own amax and never has a cold start)."""

    name = ""
    delayed = True

    def __init__(self) -> None:
        self.skipped = 0
        self.reset()

    def predict(self, current: float | None = None) -> float | None:
        """The predicted amax of this step, None on a cold start (no history yet)."""
        raise NotImplementedError

    def update(self, amax: float) -> None:
        """Append this step's amax (after :meth:`predict`); zero or non-finite: skipped and counted."""
        amax = float(amax)
        if amax < 0:
            raise ValueError(f"amax must be >= 0 (a maximum of absolute values), got {amax!r}")
        if amax == 0 or not math.isfinite(amax):
            self.skipped += 1
            return
        self._observe(amax)

    def reset(self) -> None:
        """Forget the history and the skipped count."""
        self.skipped = 0
        self._clear()

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "history": self._history()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reset()
        for amax in state["history"]:
            self._observe(float(amax))
        self.skipped = int(state["skipped"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prediction={self.predict()!r}, skipped={self.skipped})"

    def _observe(self, amax: float) -> None:
        raise NotImplementedError

    def _clear(self) -> None:
        raise NotImplementedError

    def _history(self) -> list[float]:
        """What :meth:`load_state_dict` replays through ``_observe`` to rebuild the state."""
        raise NotImplementedError


class MostRecent(Observer):
    """``p_t = a_{t-1}``."""

    name = "most_recent"

    def predict(self, current: float | None = None) -> float | None:
        return self._last

    def _observe(self, amax: float) -> None:
        self._last = amax

    def _clear(self) -> None:
        self._last: float | None = None

    def _history(self) -> list[float]:
        return [] if self._last is None else [self._last]


class MaxWindow(Observer):
    """``p_t = max`` of the last ``window`` amaxes."""

    name = "max_window"

    def __init__(self, window: int = 64) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        self.window = window
        super().__init__()

    def predict(self, current: float | None = None) -> float | None:
        return max(self._amaxes) if self._amaxes else None

    def _observe(self, amax: float) -> None:
        self._amaxes.append(amax)

    def _clear(self) -> None:
        self._amaxes: deque[float] = deque(maxlen=self.window)

    def _history(self) -> list[float]:
        return list(self._amaxes)


class ExpSmooth(Observer):
    """``p_1 = a_0``, ``p_t = alpha a_{t-1} + (1 - alpha) p_{t-1}`` (float64)."""

    name = "exp_smooth"

    def __init__(self, alpha: float = 0.1) -> None:
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 1:
            raise ValueError(f"alpha must be a number in (0, 1], got {alpha!r}")
        self.alpha = float(alpha)
        super().__init__()

    def predict(self, current: float | None = None) -> float | None:
        return self._value

    def _observe(self, amax: float) -> None:
        self._value = amax if self._value is None else self.alpha * amax + (1 - self.alpha) * self._value

    def _clear(self) -> None:
        self._value: float | None = None

    def _history(self) -> list[float]:
        return [] if self._value is None else [self._value]  # replaying the EMA value restores it exactly


class Current(Observer):
    """Current tensor scaling: ``p_t = a_t``, passed in as ``predict(current=a_t)`` (an extra amax pass)."""

    name = "current"
    delayed = False

    def predict(self, current: float | None = None) -> float | None:
        return None if current is None else float(current)

    def _observe(self, amax: float) -> None:
        pass

    def _clear(self) -> None:
        pass

    def _history(self) -> list[float]:
        return []


OBSERVERS: dict[str, type[Observer]] = {cls.name: cls for cls in (MostRecent, MaxWindow, ExpSmooth, Current)}
OBSERVER_NAMES: tuple[str, ...] = tuple(OBSERVERS)


def make_observer(name: str, **options: Any) -> Observer:
    """A fresh observer ``name`` (``most_recent``, ``max_window``, ``exp_smooth``, ``current``) with ``options``
    (``window`` for max_window, ``alpha`` for exp_smooth); ValueError naming an unknown name or option."""
    cls = lookup(OBSERVERS, name, "observer")
    valid = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} for observer {name!r}; valid options: "
                         f"{', '.join(valid) or 'none'}")
    return cls(**options)
