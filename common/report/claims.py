"""Claims tables as evidence: a prediction written before the data, an estimate with its 95% interval, and a
verdict by one fixed rule; identities and invariants apart, as implementation checks.

A claim row (:class:`Claim`) holds the paper's statement and number, our :class:`Prediction` (the statistic,
the direction, the threshold and where the threshold comes from) read from the paper's ``config.yaml`` under
``claims:`` (:func:`claim_specs`), the :class:`common.uncertainty.Estimate` computed from the artifacts, and
the verdict. The rule (:meth:`Prediction.verdict`), for an interval ``[low, high]`` and threshold ``t``:

* ``reproduced`` -- the interval lies entirely on the predicted side of ``t``: ``low > t`` for ``above``,
  ``high < t`` for ``below``; for ``within`` (an equivalence test with margin ``t``), ``-t < low`` and
  ``high < t``;
* ``contradicted`` -- it lies entirely on the other side: ``high < t`` (above), ``low > t`` (below),
  ``high < -t`` or ``low > t`` (within);
* ``inconclusive`` -- it straddles (or touches) the threshold;
* ``not testable at this scale`` -- no estimate could be made, or a quantity of the regime card that the claim
  ``requires`` lies outside its bounds (:mod:`common.report.regime`: the row keeps its estimate and interval and names
  the quantity with both numbers); the row states why.

A claim with several parts is several rows under one ``group`` heading. A theorem, identity or code invariant
is a :class:`Check`: it runs with the claims, a failed check fails the build (:func:`claims_document`), and it
never counts as a reproduction.

Every paper computes its table with one entry point of one shape (:data:`PaperClaims`),
``papers.<paper>.claims.claims(specs, study, evidence) -> ClaimsResult(rows, checks)``: the config's specs, the
paper's ``Study`` (the artifacts its claims read, loaded by its claims step) and the workflow's evidence settings.
Every paper's claims step (``python -m papers.<paper> claims``) ends in :func:`write_claims`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from common.io import write_json
from common.uncertainty import Estimate, Evidence

from .regime import RegimeRow, outside_regime

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable at this scale")
DIRECTIONS = ("above", "below", "within")
SPEC_FIELDS = ("group", "statement", "paper", "statistic", "direction", "threshold", "source")
OPTIONAL_SPEC_FIELDS = ("requires",)
RULE = ("reproduced: the 95% interval lies entirely on the predicted side of the threshold; contradicted: "
        "entirely on the other side; inconclusive: it straddles the threshold (for 'within', an equivalence test: "
        "reproduced iff the interval lies inside (-margin, margin), contradicted iff wholly outside); not "
        "testable at this scale: no estimate, or a regime quantity the claim requires lies outside its bounds "
        "(the estimate still shown), with the reason stated")


class ImplementationCheckFailed(RuntimeError):  # noqa: N818 (names the event: a check failed)
    """An identity, theorem or invariant of the implementation does not hold: the build stops."""


@dataclass(frozen=True)
class Prediction:
    """What we predict before the data: ``statistic`` (in words, with units) lies ``direction`` of
    ``threshold`` (``within``: its absolute value is below the margin ``threshold``); ``source`` says where the
    threshold comes from (the paper, or a stated reason)."""

    statistic: str
    direction: str
    threshold: float
    source: str

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"prediction direction {self.direction!r} is not one of {', '.join(DIRECTIONS)}")
        if self.direction == "within" and not self.threshold > 0:
            raise ValueError(f"an equivalence margin must be positive, got {self.threshold}")

    def describe(self) -> str:
        """The prediction as one line, e.g. ``statistic > 0`` or ``statistic within $\\pm 0.01$`` (an
        equivalence margin)."""
        t = f"{self.threshold:g}"
        if self.direction == "within":
            return f"{self.statistic} within $\\pm {t}$"
        return f"{self.statistic} {'>' if self.direction == 'above' else '<'} {t}"

    def verdict(self, estimate: Estimate | None) -> str:
        """The fixed rule of the module docstring."""
        if estimate is None:
            return VERDICTS[3]
        low, high, t = estimate.low, estimate.high, self.threshold
        if self.direction == "above":
            supported, refuted = low > t, high < t
        elif self.direction == "below":
            supported, refuted = high < t, low > t
        else:
            supported, refuted = -t < low and high < t, high < -t or low > t
        return VERDICTS[0] if supported else VERDICTS[1] if refuted else VERDICTS[2]


@dataclass(frozen=True)
class ClaimSpec:
    """A claim as the config states it, before any data: the paper's words and number, our prediction, and the
    regime quantities its mechanism ``requires`` (row id -> reason; :mod:`common.report.regime`)."""

    id: str
    group: str
    statement: str
    paper: str
    prediction: Prediction
    requires: Mapping[str, str] = field(default_factory=dict)


def claim_specs(entries: Mapping[str, Mapping[str, Any]], where: str = "claims") -> dict[str, ClaimSpec]:
    """The :class:`ClaimSpec` of every entry of a config's ``claims:`` mapping (ValueError naming a missing or
    unknown field, or a bad direction, with its key)."""
    specs = {}
    for cid, entry in entries.items():
        missing = [f for f in SPEC_FIELDS if f not in entry]
        unknown = [f for f in entry if f not in SPEC_FIELDS + OPTIONAL_SPEC_FIELDS]
        if missing or unknown:
            raise ValueError(f"{where}.{cid}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        requires = entry.get("requires", {})
        if not isinstance(requires, Mapping) or not all(isinstance(r, str) and r for r in requires.values()):
            raise ValueError(f"{where}.{cid}.requires must map regime quantities to the reason each is needed, "
                             f"got {requires!r}")
        try:
            prediction = Prediction(str(entry["statistic"]), str(entry["direction"]), float(entry["threshold"]),
                                    str(entry["source"]))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}.{cid}: {err}") from err
        specs[cid] = ClaimSpec(cid, str(entry["group"]), str(entry["statement"]), str(entry["paper"]), prediction,
                               dict(requires))
    return specs


@dataclass(frozen=True)
class Claim:
    """One row: the spec's text, our prediction, the estimate (None when not testable, with ``reason``), the
    verdict (checked against the rule), ``detail`` (the numbers behind the estimate, formatted from artifacts),
    ``evidence`` (the artifacts used), the regime quantities the claim ``requires`` and, when one of them is
    outside its bounds, ``outside_regime`` (why; :func:`apply_regime` sets it): then the verdict is not testable
    whatever the estimate."""

    id: str
    group: str
    statement: str
    paper: str
    prediction: Prediction
    estimate: Estimate | None
    verdict: str
    detail: str = ""
    reason: str = ""
    evidence: tuple[str, ...] = field(default_factory=tuple)
    requires: Mapping[str, str] = field(default_factory=dict)
    outside_regime: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id!r}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        expected = VERDICTS[3] if self.outside_regime else self.prediction.verdict(self.estimate)
        if self.verdict != expected:
            raise ValueError(f"claim {self.id!r}: verdict {self.verdict!r} does not follow from the estimate "
                             f"by the rule ({expected!r})")
        if self.estimate is None and not self.reason:
            raise ValueError(f"claim {self.id!r}: a claim without an estimate must state why it is not testable")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "group": self.group, "statement": self.statement, "paper": self.paper,
                "prediction": {**self.prediction.__dict__, "text": self.prediction.describe()},
                "estimate": None if self.estimate is None else self.estimate.to_dict(),
                "estimate_text": "" if self.estimate is None else self.estimate.format(),
                "verdict": self.verdict, "detail": self.detail, "reason": self.reason,
                "evidence": list(self.evidence), "requires": dict(self.requires),
                "outside_regime": self.outside_regime}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Claim:
        """The row back from :meth:`to_dict` (re-validated: a typed verdict that does not follow is refused)."""
        p = data["prediction"]
        prediction = Prediction(p["statistic"], p["direction"], float(p["threshold"]), p["source"])
        estimate = None if data["estimate"] is None else Estimate.from_dict(data["estimate"])
        return cls(data["id"], data["group"], data["statement"], data["paper"], prediction, estimate,
                   data["verdict"], data.get("detail", ""), data.get("reason", ""), tuple(data.get("evidence", ())),
                   dict(data.get("requires", {})), data.get("outside_regime", ""))


def judge(spec: ClaimSpec, estimate: Estimate | None, *, detail: str = "", reason: str = "",
          evidence: Iterable[str] = ()) -> Claim:
    """The row of ``spec`` with its verdict made by the rule from ``estimate`` (None: not testable, ``reason``
    required)."""
    return Claim(spec.id, spec.group, spec.statement, spec.paper, spec.prediction, estimate,
                 spec.prediction.verdict(estimate), detail, reason, tuple(evidence), dict(spec.requires))


def apply_regime(claims: Sequence[Claim], regime: Sequence[RegimeRow]) -> list[Claim]:
    """Each claim with its ``outside_regime`` and verdict made from the regime card: not testable at this scale
    when a row it requires is outside its bounds or not measured, else the rule's verdict from its estimate
    (:func:`common.report.regime.outside_regime`; ValueError naming a required row the card lacks)."""
    out = []
    for claim in claims:
        why = outside_regime(claim.requires, regime, claim.id)
        out.append(replace(claim, outside_regime=why,
                           verdict=VERDICTS[3] if why else claim.prediction.verdict(claim.estimate)))
    return out


@dataclass(frozen=True)
class Check:
    """An implementation check: an identity, theorem or invariant that must hold whatever the data (it is not
    evidence for the paper). ``measured`` shows the numbers it was checked on."""

    id: str
    statement: str
    measured: str
    passed: bool
    evidence: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "statement": self.statement, "measured": self.measured, "passed": bool(self.passed),
                "evidence": list(self.evidence)}


def claims_document(claims: Sequence[Claim], checks: Sequence[Check],
                    regime: Sequence[RegimeRow] = ()) -> dict[str, Any]:
    """``{"rule", "claims", "checks", "counts", "outside_regime", "regime"}`` for ``claims.json``: the claims
    judged against the regime card (:func:`apply_regime`), ``outside_regime`` how many of the not-testable rows are
    so because of it. Raises :class:`ImplementationCheckFailed` naming every failed check (so nothing is
    written)."""
    failed = [c for c in checks if not c.passed]
    if failed:
        raise ImplementationCheckFailed("implementation checks failed: " + "; ".join(
            f"{c.id} ({c.statement}: {c.measured})" for c in failed))
    ids = [c.id for c in [*claims, *checks]]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate claim or check ids: {', '.join(duplicates)}")
    claims = apply_regime(claims, regime)
    return {"rule": RULE, "claims": [c.to_dict() for c in claims], "checks": [c.to_dict() for c in checks],
            "counts": verdict_counts(c.verdict for c in claims),
            "outside_regime": sum(bool(c.outside_regime) for c in claims),
            "regime": [row.to_dict() for row in regime]}


def verdict_counts(verdicts: Iterable[str]) -> dict[str, int]:
    """How many rows have each verdict, in :data:`VERDICTS` order (zeros included)."""
    counts = Counter(verdicts)
    unknown = set(counts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdicts {sorted(unknown)}; expected {', '.join(VERDICTS)}")
    return {v: counts[v] for v in VERDICTS}


class ClaimsResult(NamedTuple):
    """What a paper's claims entry point (:data:`PaperClaims`) returns: the ``rows`` in the report's order and the
    implementation ``checks``."""

    rows: list[Claim]
    checks: list[Check]


PaperClaims = Callable[[Mapping[str, ClaimSpec], Any, Evidence], ClaimsResult]
"""``papers.<paper>.claims.claims(specs, study, evidence)``: the rows of ``specs`` (the config's ``claims:``,
:func:`claim_specs`) computed from the paper's ``study`` with the interval settings ``evidence``, and its checks."""


def write_claims(out: str | os.PathLike[str], claims: PaperClaims, entries: Mapping[str, Mapping[str, Any]],
                 study: Any, evidence: Evidence, regime: Sequence[RegimeRow], paper: str) -> dict[str, Any]:
    """The claims step of every paper: the specs of the config's ``claims:`` ``entries`` (:func:`claim_specs`,
    errors naming ``<paper>.claims``), the paper's rows and checks on ``study``, and ``claims.json`` at ``out``
    (:func:`claims_document`, the rows judged against the ``regime`` card), written atomically; a failed check
    raises :class:`ImplementationCheckFailed` and writes nothing. Returns the document."""
    result = claims(claim_specs(entries, f"{paper}.claims"), study, evidence)
    document = claims_document(result.rows, result.checks, regime)
    write_json(out, document)
    return document
