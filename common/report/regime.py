"""The regime card: the quantities that govern a paper's effects, the paper's value beside ours, and the bounds
inside which a claim that depends on a quantity can be tested at all.

A quantity (:class:`RegimeSpec`) is written in the paper's ``config.yaml`` under ``regime:`` before any run
(schema ``workflow/schemas/regime.schema.yaml``): its name, its definition, the paper's value (a number, or
``[low, high]`` where the paper's value rests on an estimate, with the assumption in ``paper_source``; ``null`` where
the paper reports nothing it could be computed from, with what it does say in ``paper_source``), where the
value comes from, and ``bounds: [low, high]`` (``null``: open) with ``bound_source``, the reason for the bounds.
Bounds come from the paper's value and the mechanism, never from our results.

Our value is measured by the paper's pipeline from its own artifacts (:func:`regime_rows`); ``None`` when it could
not be measured, with a note saying why. A row (:class:`RegimeRow`) is *inside* iff ``low <= ours <= high``; the
ratio is ours over the paper's value (over each end of a range).

A claim names the rows it ``requires`` in the config (``claims.<id>.requires: {row: reason}``): the quantities
its mechanism depends on. :func:`apply_regime` makes a claim whose required row is outside its bounds, or not
measured, **not testable at this scale** whatever its interval; the row keeps its estimate and interval and says
which quantity failed with both numbers (:meth:`RegimeRow.outside`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SPEC_FIELDS = ("quantity", "definition", "paper", "paper_source", "bounds", "bound_source")


def _number(value: float) -> str:
    """Three significant digits, an integer below 10^7 in full (2048, not 2.05e+03)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e7 else f"{value:.3g}"


@dataclass(frozen=True)
class RegimeSpec:
    """One governing quantity as the config states it, before any run (module docstring)."""

    id: str
    quantity: str
    definition: str
    paper: tuple[float, float] | None
    paper_source: str
    bounds: tuple[float | None, float | None]
    bound_source: str

    def __post_init__(self) -> None:
        low, high = self.paper or (0.0, 0.0)
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(f"regime.{self.id}: the paper's value must be a finite number, [low, high] with "
                             f"low <= high or null (not reported), got {list(self.paper or ())}")
        bound_low, bound_high = self.bounds
        if bound_low is None and bound_high is None:
            raise ValueError(f"regime.{self.id}: bounds [null, null] bound nothing")
        if bound_low is not None and bound_high is not None and not bound_low < bound_high:
            raise ValueError(f"regime.{self.id}: bounds must have low < high, got {list(self.bounds)}")

    def paper_text(self) -> str:
        """The paper's value: ``30``, ``10-50`` (a range) or "not reported"."""
        if self.paper is None:
            return "not reported"
        low, high = self.paper
        return _number(low) if low == high else f"{_number(low)}–{_number(high)}"

    def bounds_text(self) -> str:
        """The bounds as an interval: ``[3, 300]``, ``>= 3``, ``<= 0.5``."""
        low, high = self.bounds
        if low is None:
            return f"$\\le$ {_number(high)}"
        if high is None:
            return f"$\\ge$ {_number(low)}"
        return f"[{_number(low)}, {_number(high)}]"


def regime_specs(entries: Mapping[str, Mapping[str, Any]], where: str = "regime") -> dict[str, RegimeSpec]:
    """The :class:`RegimeSpec` of every entry of a config's ``regime:`` mapping (ValueError naming a missing or
    unknown field or a bad value, with its key)."""
    specs = {}
    for rid, entry in entries.items():
        missing = [f for f in SPEC_FIELDS if f not in entry]
        unknown = [f for f in entry if f not in SPEC_FIELDS]
        if missing or unknown:
            raise ValueError(f"{where}.{rid}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        paper, bounds = entry["paper"], entry["bounds"]
        try:
            pair = (None if paper is None else (float(paper), float(paper)) if isinstance(paper, int | float)
                    else tuple(map(float, paper)))
            if (pair is not None and len(pair) != 2) or len(bounds) != 2:
                raise ValueError(f"paper and bounds must be a number or a pair, got {paper!r} and {bounds!r}")
            specs[rid] = RegimeSpec(rid, str(entry["quantity"]), str(entry["definition"]), pair,
                                    str(entry["paper_source"]),
                                    tuple(None if b is None else float(b) for b in bounds), str(entry["bound_source"]))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}.{rid}: {err}") from err
    return specs


@dataclass(frozen=True)
class RegimeRow:
    """A quantity with our measured value (``ours``: None when not measured; ``note``: how it was measured, or why
    not)."""

    spec: RegimeSpec
    ours: float | None
    note: str = ""

    @property
    def inside(self) -> bool:
        """Our value lies within the bounds (a missing value is not inside)."""
        if self.ours is None or not math.isfinite(self.ours):
            return False
        low, high = self.spec.bounds
        return (low is None or self.ours >= low) and (high is None or self.ours <= high)

    def ratio(self) -> tuple[float, float] | None:
        """Ours over the paper's value (over each end of a range); None where it is undefined."""
        if self.ours is None or self.spec.paper is None or 0.0 in self.spec.paper:
            return None
        return (self.ours / self.spec.paper[0], self.ours / self.spec.paper[1])

    def ratio_text(self) -> str:
        """``0.5``, or ``0.0016 – 0.008`` against a range (spaced, so that a narrow column can break it); "—" when
        undefined."""
        ratio = self.ratio()
        if ratio is None:
            return "—"
        low, high = sorted(ratio)
        return _number(low) if low == high else f"{_number(low)} – {_number(high)}"

    def outside(self) -> str:
        """Why a claim that requires this row cannot be tested ("" when inside): the quantity, ours, the bounds and
        the paper's value."""
        if self.inside:
            return ""
        ours = "not measured" + (f" ({self.note})" if self.note else "") if self.ours is None else _number(self.ours)
        paper = "the paper gives no value" if self.spec.paper is None else f"the paper's {self.spec.paper_text()}"
        return f"{self.spec.quantity} is {ours}, outside {self.spec.bounds_text()} ({paper})"

    def to_dict(self) -> dict[str, Any]:
        s = self.spec
        return {"id": s.id, "quantity": s.quantity, "definition": s.definition,
                "paper": None if s.paper is None else list(s.paper),
                "paper_text": s.paper_text(), "paper_source": s.paper_source, "bounds": list(s.bounds),
                "bounds_text": s.bounds_text(), "bound_source": s.bound_source, "ours": self.ours,
                "ours_text": "—" if self.ours is None else _number(self.ours), "note": self.note,
                "ratio": None if self.ratio() is None else list(self.ratio()), "ratio_text": self.ratio_text(),
                "inside": self.inside}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegimeRow:
        """The row back from :meth:`to_dict` (the spec re-validated)."""
        spec = regime_specs({data["id"]: {f: data[f] for f in SPEC_FIELDS}})[data["id"]]
        return cls(spec, None if data["ours"] is None else float(data["ours"]), data.get("note", ""))


def regime_rows(specs: Mapping[str, RegimeSpec], measured: Mapping[str, float | None],
                notes: Mapping[str, str] | None = None) -> list[RegimeRow]:
    """One row per spec, in config order, with ``measured[id]`` as ours (ValueError naming a spec with no
    measurement, or a measurement of no spec: every quantity of the card is measured or explicitly None)."""
    notes = notes or {}
    missing, unknown = [i for i in specs if i not in measured], [i for i in measured if i not in specs]
    if missing or unknown:
        raise ValueError(f"regime measurements: missing {missing or 'nothing'}, unknown {unknown or 'nothing'} "
                         f"(the card has {', '.join(specs) or 'no quantity'})")
    stray = [i for i in notes if i not in specs]
    if stray:
        raise ValueError(f"regime notes for unknown quantities {stray}")
    return [RegimeRow(spec, None if measured[i] is None else float(measured[i]), notes.get(i, ""))
            for i, spec in specs.items()]


def outside_regime(requires: Mapping[str, str], rows: Sequence[RegimeRow], claim: str = "") -> str:
    """The text that makes a claim requiring ``requires`` (row id -> reason) not testable: one clause per required
    row outside its bounds, ``<why>: <reason>``; "" when every required row is inside. ValueError naming a required
    row that the card does not have."""
    by_id = {row.spec.id: row for row in rows}
    unknown = [r for r in requires if r not in by_id]
    if unknown:
        raise ValueError(f"claim {claim!r} requires regime quantities {unknown} that the regime card does not have "
                         f"({', '.join(by_id) or 'it is empty'})")
    return "; ".join(f"{by_id[r].outside()}: {reason}" for r, reason in requires.items() if not by_id[r].inside)
