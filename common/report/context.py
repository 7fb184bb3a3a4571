"""Assembling a report context (the dict :mod:`common.report.render` renders) from a paper's parts: figures
from their PNG paths and captions, how to rerun the report and example cells, the claims document re-validated
(rows, implementation checks, counts and the verdict rule), and the list of cited artifacts that ``SHA256SUMS``
covers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from common.config import SHORT_PATHS_PROFILE, profile_dirs

from .claims import RULE, Check, Claim, claims_document
from .coverage import coverage_counts
from .regime import RegimeRow


def figure_entries(pngs: Sequence[str], caption: Callable[[str], str]) -> list[dict[str, str]]:
    """``{"id", "caption", "png", "pdf"}`` per PNG (id = file stem; the PDF lies beside the PNG)."""
    return [{"id": Path(png).stem, "caption": caption(Path(png).stem), "png": png,
             "pdf": str(Path(png).with_suffix(".pdf"))} for png in pngs]


def rerun_entries(key: str, profile: str, examples: Sequence[str]) -> list[dict[str, str]]:
    """Commands, run from the repository root, that rebuild the report, each example cell alone, recompute the
    paper's cells and compare them with their records (``make verify``, workflow/verify.py), and verify the
    artifacts: ``snakemake <target>`` for the default profile (Snakemake's workflow profile ``profiles/default``
    gives the cores, ``workflow/config/default.yaml`` the profile), ``snakemake --profile workflow/profiles/<name>
    <target>`` for any other, with the report where that profile writes it (:func:`common.config.profile_dirs`)."""
    default = profile == SHORT_PATHS_PROFILE
    snake = "snakemake" if default else f"snakemake --profile workflow/profiles/{profile}"
    reports = profile_dirs(profile)[1]
    entries = [{"cell": "the whole report", "command": f"{snake} {reports}/{key}.html"}]
    entries += [{"cell": target.rsplit("/", 1)[-1], "command": f"{snake} {target}"} for target in examples]
    entries.append({"cell": "recompute every cell and compare",
                    "command": f"make verify PAPER={key}" + ("" if default else f" PROFILE={profile}")})
    sums = f"{reports}/{key}.SHA256SUMS"
    entries.append({"cell": "verify the artifacts", "command": f"sha256sum -c {sums}", "sums": sums})
    return entries


def assemble(*, paper: Mapping[str, str], figures: Sequence[Mapping[str, str]], tables: Sequence[Mapping[str, Any]],
             claims: Mapping[str, Any], provenance: Mapping[str, Any], rerun: Sequence[Mapping[str, str]],
             artifacts: Sequence[str], setup: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """The context of one report.

    ``setup``: the paper's setup beside ours (:func:`common.report.setup.setup_rows`: model and size, data, tokens,
    steps, learning rates, seeds, layers quantized, evaluation), the table that opens "Question and method".

    ``claims`` is the paper's whole claims document (its ``claims.json``,
    :func:`common.report.claims.claims_document`: ``{"rule", "claims", "checks", "counts"}``). Every row is
    re-validated with :meth:`Claim.from_dict` (a verdict that does not follow from its estimate by the rule is
    refused, ValueError), every check too (a failed one raises
    :class:`common.report.claims.ImplementationCheckFailed`), and the document's rule and counts must be those
    of its rows. The context keeps ``claims`` (the rows of every kind), ``checks``, ``counts`` (the paper's
    tally), ``counts_by_kind``, ``not_counted``, ``coverage`` with its ``coverage_counts``, ``outside_regime``,
    ``regime`` (the regime card's rows) and ``rule``, and ``sums``, the checksum file the rerun entries verify
    (:func:`rerun_entries`; None without one); every figure's PNG and PDF join the cited artifacts."""
    document = validated_claims(claims)
    cited = {*artifacts, *(f["png"] for f in figures), *(f["pdf"] for f in figures)}
    return {"paper": dict(paper), "setup": [dict(row) for row in setup], "figures": [dict(f) for f in figures],
            "tables": list(tables), "claims": document["claims"], "checks": document["checks"],
            "counts": document["counts"], "counts_by_kind": document["counts_by_kind"],
            "not_counted": document["not_counted"], "coverage": document["coverage"],
            "coverage_counts": coverage_counts(document["coverage"]),
            "outside_regime": document["outside_regime"], "regime": document["regime"],
            "rule": document["rule"], "provenance": dict(provenance), "rerun": list(rerun),
            "sums": next((entry["sums"] for entry in rerun if "sums" in entry), None),
            "artifacts": sorted(cited)}


def validated_claims(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` (a claims document) rebuilt from its rows and checks by
    :func:`common.report.claims.claims_document`; ValueError naming what is missing, stale or does not follow."""
    if not isinstance(document, Mapping):
        raise ValueError(f"claims must be a claims document {{rule, claims, checks, counts}} "
                         f"(common.report.claims.claims_document), got {type(document).__name__}")
    missing = [key for key in ("rule", "claims", "checks", "counts", "coverage") if key not in document]
    if missing:
        raise ValueError(f"the claims document has no {', '.join(map(repr, missing))}")
    rows = []
    for row in document["claims"]:
        try:
            rows.append(Claim.from_dict(row))
        except KeyError as err:
            raise ValueError(f"claim row {row.get('id')!r} has no {err}") from err
    checks = []
    for check in document["checks"]:
        try:
            checks.append(Check(check["id"], check["statement"], check["measured"], bool(check["passed"]),
                                tuple(check.get("evidence", ()))))
        except KeyError as err:
            raise ValueError(f"check {check.get('id')!r} has no {err}") from err
    try:
        regime = [RegimeRow.from_dict(row) for row in document.get("regime", [])]
    except KeyError as err:
        raise ValueError(f"a regime row of the claims document has no {err}") from err
    rebuilt = claims_document(rows, checks, regime, document["coverage"])
    for row, new in zip(document["claims"], rebuilt["claims"], strict=True):
        if row.get("outside_regime", "") != new["outside_regime"]:
            raise ValueError(f"claim {row['id']!r} states {row.get('outside_regime', '')!r} outside the regime, "
                             f"but the document's regime card gives {new['outside_regime']!r}: rebuild claims.json")
    if document["rule"] != RULE:
        raise ValueError(f"the claims document states the rule {document['rule']!r}, not the rule its verdicts "
                         f"are checked by ({RULE!r}): rebuild claims.json")
    if dict(document["counts"]) != rebuilt["counts"]:
        raise ValueError(f"the claims document counts {dict(document['counts'])} but its rows give "
                         f"{rebuilt['counts']}: rebuild claims.json")
    return rebuilt

