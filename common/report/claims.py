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

A bound ("stays within / below ``t``") that names a negative ``control`` (a variant that should break it, run in
the same build) is reproduced only if its control broke the bound (the control row is reproduced); otherwise it is
inconclusive, "the bound is too loose to mean anything", whatever its own interval.

Rows are of four kinds (:data:`KINDS`), tallied apart: ``paper`` rows test a sentence of the paper (they quote it)
and are the only rows of the paper's tally (``counts``); ``finding`` rows are our own findings; ``check`` rows
follow from a definition or theorem whatever the data; ``control`` rows are negative controls. A paper row whose
prediction was revised after its results existed (:mod:`common.report.history`) counts under its earlier
prediction when the statistic is unchanged (the earlier threshold and direction judge today's interval), and not
at all when the statistic itself changed.

A claim with several parts is several rows under one ``group`` heading. A theorem, identity or code invariant
computed in code is a :class:`Check`: it runs with the claims, a failed check fails the build
(:func:`claims_document`), and it never counts as a reproduction.

Every paper computes its table with one entry point of one shape (:data:`PaperClaims`),
``papers.<paper>.claims.claims(specs, study, evidence) -> ClaimsResult(rows, checks)``: the config's specs, the
paper's ``Study`` (the artifacts its claims read, loaded by its claims step) and the workflow's evidence settings.
Every paper's claims step (``python -m papers.<paper> claims``) ends in :func:`write_claims`.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from common.io import write_json
from common.uncertainty import Estimate, Evidence

from .coverage import computed_rows, coverage_rows
from .history import prediction_record, row_histories, runs_date
from .provenance import git_state
from .regime import RegimeRow, outside_regime

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable at this scale")
DIRECTIONS = ("above", "below", "within")
KINDS = ("paper", "finding", "check", "control")
SPEC_FIELDS = ("kind", "group", "statement", "paper", "statistic", "direction", "threshold", "source")
OPTIONAL_SPEC_FIELDS = ("requires", "quote", "where", "control", "revised", "effect")
RULE = ("reproduced: the 95% interval lies entirely on the predicted side of the threshold; contradicted: "
        "entirely on the other side; inconclusive: it straddles the threshold (for 'within', an equivalence test: "
        "reproduced iff the interval lies inside (-margin, margin), contradicted iff wholly outside); a bound whose "
        "negative control did not break it is inconclusive at best; not testable at this scale: no estimate, or a "
        "regime quantity the claim requires lies outside its bounds (the estimate still shown), with the reason "
        "stated")


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
    """A row as the config states it, before any data: the paper's words and number, our prediction, the regime
    quantities its mechanism ``requires`` (row id -> reason; :mod:`common.report.regime`), its ``kind``
    (:data:`KINDS`), for a paper row the ``quote`` of the paper's sentence and ``where`` it stands, the id of its
    negative ``control`` (a bound's), ``revised`` (``{"commit", "why"}``: a revision after results known from
    review, :mod:`common.report.history`) and the paper's ``effect`` in the statistic's unit (the row's power,
    :func:`power_text`; None: not stated)."""

    id: str
    group: str
    statement: str
    paper: str
    prediction: Prediction
    requires: Mapping[str, str] = field(default_factory=dict)
    kind: str = "paper"
    quote: str = ""
    where: str = ""
    control: str = ""
    revised: Mapping[str, Any] = field(default_factory=dict)
    effect: float | None = None


def claim_specs(entries: Mapping[str, Mapping[str, Any]], where: str = "claims") -> dict[str, ClaimSpec]:
    """The :class:`ClaimSpec` of every entry of a config's ``claims:`` mapping (ValueError naming a missing or
    unknown field, a bad direction or kind, a paper row without its quote, or a ``control`` that is not a
    control row, with its key)."""
    specs = {}
    for cid, entry in entries.items():
        missing = [f for f in SPEC_FIELDS if f not in entry]
        if entry.get("kind") == "paper":
            missing += [f for f in ("quote", "where") if not str(entry.get(f, "")).strip()]
        unknown = [f for f in entry if f not in SPEC_FIELDS + OPTIONAL_SPEC_FIELDS]
        if missing or unknown:
            raise ValueError(f"{where}.{cid}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        if entry["kind"] not in KINDS:
            raise ValueError(f"{where}.{cid}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
        revised = dict(entry.get("revised", {}))
        stated = revised.get("earlier", {"statistic": "s", "direction": "above", "threshold": 0})
        if revised and ({"commit", "why"} - set(revised) or set(revised) - {"commit", "why", "earlier"}
                        or not all(str(revised[k]).strip() for k in ("commit", "why"))
                        or not isinstance(stated, Mapping)
                        or set(stated) - {"requires"} != {"statistic", "direction", "threshold"}):
            raise ValueError(f"{where}.{cid}.revised must be {{commit, why}} and optionally earlier: {{statistic, "
                             f"direction, threshold}}, got {revised!r}")
        requires = entry.get("requires", {})
        if not isinstance(requires, Mapping) or not all(isinstance(r, str) and r for r in requires.values()):
            raise ValueError(f"{where}.{cid}.requires must map regime quantities to the reason each is needed, "
                             f"got {requires!r}")
        try:
            prediction = Prediction(str(entry["statistic"]), str(entry["direction"]), float(entry["threshold"]),
                                    str(entry["source"]))
            effect = None if entry.get("effect") is None else float(entry["effect"])
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}.{cid}: {err}") from err
        if effect is not None and not (math.isfinite(effect) and effect > 0):
            raise ValueError(f"{where}.{cid}.effect must be a positive number (the paper's effect), got {effect!r}")
        specs[cid] = ClaimSpec(cid, str(entry["group"]), str(entry["statement"]), str(entry["paper"]), prediction,
                               dict(requires), str(entry["kind"]), str(entry.get("quote", "")),
                               str(entry.get("where", "")), str(entry.get("control", "")), revised, effect)
    for cid, spec in specs.items():
        if spec.control and specs.get(spec.control, spec).kind != "control":
            raise ValueError(f"{where}.{cid}.control names {spec.control!r}, which is not a control row of {where}")
    return specs


@dataclass(frozen=True)
class Claim:
    """One row: the spec's text, our prediction, the estimate (None when not testable, with ``reason``), the
    verdict (checked against the rule), ``detail`` (the numbers behind the estimate, formatted from artifacts),
    ``evidence`` (the artifacts used), the regime quantities the claim ``requires`` and, when one of them is
    outside its bounds, ``outside_regime`` (why; :func:`apply_regime` sets it): then the verdict is not testable
    whatever the estimate. ``kind``, ``quote``, ``where`` and ``control`` are the spec's; ``control_failed`` says
    why the negative control did not break the bound (:func:`apply_controls`): then the row is not reproduced.
    ``dates`` (``{"prediction": {...}, "runs": {...}}``) and ``revision`` (the earlier prediction, when this one was
    revised after results) come from git (:mod:`common.report.history`)."""

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
    kind: str = "paper"
    quote: str = ""
    where: str = ""
    control: str = ""
    control_failed: str = ""
    dates: Mapping[str, Any] = field(default_factory=dict)
    revision: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id!r}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        expected = rule_verdict(self.prediction, self.estimate, self.outside_regime, self.control_failed)
        if self.verdict != expected:
            raise ValueError(f"claim {self.id!r}: verdict {self.verdict!r} does not follow from the estimate "
                             f"by the rule ({expected!r})")
        if self.estimate is None and not self.reason:
            raise ValueError(f"claim {self.id!r}: a claim without an estimate must state why it is not testable")

    @property
    def tallied(self) -> str | None:
        """The verdict this row adds to its paper's tally: None unless a paper row; for a prediction revised after
        results, the earlier prediction's verdict on this estimate when the statistic is unchanged, else None."""
        if self.kind != "paper":
            return None
        if not self.revision:
            return self.verdict
        earlier = self.revision["earlier"]
        if earlier["statistic"] != " ".join(self.prediction.statistic.split()):
            return None
        return rule_verdict(Prediction(earlier["statistic"], earlier["direction"], float(earlier["threshold"]),
                                       self.prediction.source), self.estimate, self.outside_regime,
                            self.control_failed)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "group": self.group, "statement": self.statement,
                "quote": self.quote, "where": self.where, "paper": self.paper,
                "prediction": {**self.prediction.__dict__, "text": self.prediction.describe()},
                "estimate": None if self.estimate is None else self.estimate.to_dict(),
                "estimate_text": "" if self.estimate is None else self.estimate.format(),
                "verdict": self.verdict, "tallied": self.tallied, "detail": self.detail, "reason": self.reason,
                "evidence": list(self.evidence), "requires": dict(self.requires),
                "outside_regime": self.outside_regime, "control": self.control,
                "control_failed": self.control_failed, "dates": dict(self.dates),
                "revision": {**self.revision, "earlier_text": earlier_text(self.revision)} if self.revision else {}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Claim:
        """The row back from :meth:`to_dict` (re-validated: a typed verdict that does not follow is refused)."""
        p = data["prediction"]
        prediction = Prediction(p["statistic"], p["direction"], float(p["threshold"]), p["source"])
        estimate = None if data["estimate"] is None else Estimate.from_dict(data["estimate"])
        return cls(data["id"], data["group"], data["statement"], data["paper"], prediction, estimate,
                   data["verdict"], data.get("detail", ""), data.get("reason", ""), tuple(data.get("evidence", ())),
                   dict(data.get("requires", {})), data.get("outside_regime", ""), data.get("kind", "paper"),
                   data.get("quote", ""), data.get("where", ""), data.get("control", ""),
                   data.get("control_failed", ""), dict(data.get("dates", {})),
                   {k: v for k, v in data.get("revision", {}).items() if k != "earlier_text"})


def earlier_text(revision: Mapping[str, Any]) -> str:
    """The earlier prediction of a revision as one line (:meth:`Prediction.describe`)."""
    earlier = revision["earlier"]
    return Prediction(earlier["statistic"], earlier["direction"], float(earlier["threshold"]), "").describe()


def rule_verdict(prediction: Prediction, estimate: Estimate | None, outside_regime: str = "",
                 control_failed: str = "") -> str:
    """The verdict of the module docstring's rule: not testable outside the regime, the prediction's verdict on
    the interval otherwise, and inconclusive in place of reproduced when the negative control did not break the
    bound."""
    if outside_regime:
        return VERDICTS[3]
    verdict = prediction.verdict(estimate)
    return VERDICTS[2] if control_failed and verdict == VERDICTS[0] else verdict


def power_text(estimate: Estimate, effect: float) -> str:
    """What the interval can resolve: its half-width ``(high - low) / 2`` against half the paper's ``effect``. An
    interval narrower than that, centred on the paper's effect, excludes zero, and centred on zero excludes the
    paper's effect: it can tell the two apart (the sizing rule of the seeds, issue 37)."""
    half = (estimate.high - estimate.low) / 2
    verdict = ("narrow enough to tell the paper's effect from none" if half < effect / 2
               else "too wide to tell the paper's effect from none: an inconclusive verdict here says little")
    return (f"Power: the interval's half-width {half:.3g} against half the paper's effect {effect / 2:.3g} "
            f"({effect:g}): {verdict}.")


def judge(spec: ClaimSpec, estimate: Estimate | None, *, detail: str = "", reason: str = "",
          evidence: Iterable[str] = ()) -> Claim:
    """The row of ``spec`` with its verdict made by the rule from ``estimate`` (None: not testable, ``reason``
    required); with the paper's ``effect`` stated, the detail ends with the row's power (:func:`power_text`)."""
    if estimate is not None and spec.effect is not None:
        detail = f"{detail.rstrip('. ')}. {power_text(estimate, spec.effect)}" if detail else power_text(
            estimate, spec.effect)
    return Claim(spec.id, spec.group, spec.statement, spec.paper, spec.prediction, estimate,
                 spec.prediction.verdict(estimate), detail, reason, tuple(evidence), dict(spec.requires),
                 kind=spec.kind, quote=spec.quote, where=spec.where, control=spec.control)


def apply_regime(claims: Sequence[Claim], regime: Sequence[RegimeRow]) -> list[Claim]:
    """Each claim with its ``outside_regime`` and verdict made from the regime card: not testable at this scale
    when a row it requires is outside its bounds or not measured, else the rule's verdict from its estimate
    (:func:`common.report.regime.outside_regime`; ValueError naming a required row the card lacks)."""
    out = []
    for claim in claims:
        why = outside_regime(claim.requires, regime, claim.id)
        out.append(replace(claim, outside_regime=why,
                           verdict=rule_verdict(claim.prediction, claim.estimate, why, claim.control_failed)))
    return out


def apply_controls(claims: Sequence[Claim]) -> list[Claim]:
    """Each bound with its ``control_failed`` set from its negative control (a row of ``claims``): empty when the
    control broke the bound (the control row is reproduced), else why not (a control that is not a control row of
    ``claims`` did not run: the bound is not reproduced either); the verdict made again by the rule."""
    rows = {claim.id: claim for claim in claims}
    out = []
    for claim in claims:
        if not claim.control:
            out.append(claim)
            continue
        control = rows.get(claim.control)
        if control is None or control.kind != "control":
            failed = f"its negative control {claim.control} is not a control row of this table: it did not run"
        elif control.verdict != VERDICTS[0]:
            failed = (f"its negative control {control.id} did not break the bound ({control.verdict}: "
                      f"{control.estimate.format() if control.estimate else 'no estimate'}): the bound is too loose "
                      "to mean anything")
        else:
            failed = ""
        out.append(replace(claim, control_failed=failed, verdict=rule_verdict(claim.prediction, claim.estimate,
                                                                              claim.outside_regime, failed)))
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


def claims_document(claims: Sequence[Claim], checks: Sequence[Check], regime: Sequence[RegimeRow] = (),
                    coverage: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``{"rule", "claims", "checks", "counts", "counts_by_kind", "not_counted", "outside_regime", "regime",
    "coverage"}`` for ``claims.json``: the claims judged against the regime card (:func:`apply_regime`) and their
    negative controls (:func:`apply_controls`); ``counts`` the paper's tally (the verdicts its paper rows add,
    :attr:`Claim.tallied`), ``counts_by_kind`` every kind's own verdicts, ``not_counted`` the paper rows that add
    none (revised after results, with a new statistic), ``outside_regime`` how many of the not-testable rows are so
    because of the card, ``coverage`` the paper's claims mapped to rows (:func:`common.report.coverage.coverage_rows`
    makes it). Raises :class:`ImplementationCheckFailed` naming every failed check (so nothing is written)."""
    failed = [c for c in checks if not c.passed]
    if failed:
        raise ImplementationCheckFailed("implementation checks failed: " + "; ".join(
            f"{c.id} ({c.statement}: {c.measured})" for c in failed))
    ids = [c.id for c in [*claims, *checks]]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate claim or check ids: {', '.join(duplicates)}")
    claims = apply_controls(apply_regime(claims, regime))
    papers = [c for c in claims if c.kind == "paper"]
    return {"rule": RULE, "claims": [c.to_dict() for c in claims], "checks": [c.to_dict() for c in checks],
            "counts": verdict_counts(c.tallied for c in papers if c.tallied is not None),
            "counts_by_kind": {kind: verdict_counts(c.verdict for c in claims if c.kind == kind) for kind in KINDS},
            "not_counted": [c.id for c in papers if c.tallied is None],
            "outside_regime": sum(bool(c.outside_regime) for c in claims),
            "regime": [row.to_dict() for row in regime], "coverage": [dict(entry) for entry in coverage]}


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


def dated(rows: Sequence[Claim], specs: Mapping[str, ClaimSpec], paper: str,
          root: str | os.PathLike[str] = ".") -> list[Claim]:
    """``rows`` with their ``dates`` and ``revision`` from git (:func:`common.report.history.row_histories`; a row
    ``<id>_<part>`` that a paper derives from config row ``<id>`` takes that row's): when each prediction was last
    changed, the commit (and dirty flag) the runs were judged at with the date of the
    newest evidence file, and the earlier prediction of a row revised after its results."""
    predictions = {cid: prediction_record(spec.prediction.statistic, spec.prediction.direction,
                                          spec.prediction.threshold, spec.requires) for cid, spec in specs.items()}
    histories = row_histories(predictions, {cid: spec.revised for cid, spec in specs.items() if spec.revised},
                              paper, root)
    state = git_state(root)
    out = []
    for row in rows:
        source = row.id if row.id in histories else max(
            (cid for cid in histories if row.id.startswith(f"{cid}_")), key=len, default=row.id)  # a derived row's
        history = histories.get(source, {"prediction": {"note": "not in the config"}, "revision": {}})
        runs = {"commit": state["commit"], "dirty": state["dirty"], "date": runs_date(row.evidence, root)}
        out.append(replace(row, dates={"prediction": history["prediction"], "runs": runs},
                           revision=history["revision"]))
    return out


def write_claims(out: str | os.PathLike[str], claims: PaperClaims, config: Mapping[str, Any], study: Any,
                 evidence: Evidence, regime: Sequence[RegimeRow], paper: str,
                 root: str | os.PathLike[str] = ".") -> dict[str, Any]:
    """The claims step of every paper: the specs of the paper config's ``claims:`` (:func:`claim_specs`, errors
    naming ``<paper>.claims``), its ``coverage:`` table (:func:`common.report.coverage.coverage_rows`, each config
    row id then replaced by the rows computed from it, :func:`common.report.coverage.computed_rows`), the
    paper's rows and checks on ``study`` dated from the git checkout at ``root`` (:func:`dated`), and
    ``claims.json`` at ``out`` (:func:`claims_document`, the rows judged against the ``regime`` card), written
    atomically; a failed check raises :class:`ImplementationCheckFailed` and writes nothing. Returns the
    document."""
    missing = [key for key in ("claims", "coverage") if key not in config]
    if missing:
        raise ValueError(f"the {paper} config has no {' and no '.join(missing)}")
    specs = claim_specs(config["claims"], f"{paper}.claims")
    coverage = coverage_rows(config["coverage"], {cid: spec.kind for cid, spec in specs.items()}, f"{paper}.coverage")
    result = claims(specs, study, evidence)
    coverage = computed_rows(coverage, {row.id: row.kind for row in result.rows}, f"{paper}.coverage")
    document = claims_document(dated(result.rows, specs, paper, root), result.checks, regime, coverage)
    write_json(out, document)
    return document
