"""Claims tables: each claim of a paper, the paper's number, ours, and a verdict computed by a stated rule.

A verdict is never typed: a paper module computes :class:`Claim` rows from its artifacts with :func:`verdict`,
which maps the checks it ran to one of :data:`VERDICTS`:

* ``reproduced`` -- every check of the claim holds;
* ``partly`` -- some checks hold, not all;
* ``not reproduced`` -- none holds;
* ``not testable at this scale`` -- the data needed is not available at this model/data size (no checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

VERDICTS = ("reproduced", "partly", "not reproduced", "not testable at this scale")


def verdict(checks: Sequence[bool]) -> str:
    """The verdict of a claim from the outcomes of its checks (the rule of the module docstring)."""
    if not checks:
        return VERDICTS[3]
    held = sum(bool(c) for c in checks)
    return VERDICTS[0] if held == len(checks) else VERDICTS[2] if held == 0 else VERDICTS[1]


def checked_claim(cid: str, statement: str, paper: str, measured: str, checks: Sequence[bool], rule: str,
                  evidence: Sequence[str]) -> Claim:
    """A :class:`Claim` whose verdict is :func:`verdict` of ``checks`` (the checks ``rule`` describes)."""
    return Claim(cid, statement, paper, measured, verdict(checks), rule, tuple(evidence))


@dataclass(frozen=True)
class Claim:
    """One row. ``paper`` and ``measured`` are display strings (``measured`` formatted from an artifact);
    ``rule`` states how the verdict follows from the data; ``evidence`` names the artifacts used."""

    id: str
    statement: str
    paper: str
    measured: str
    verdict: str
    rule: str
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id!r}: verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "evidence": list(self.evidence)}
