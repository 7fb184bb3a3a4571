"""A paper's coverage table: every claim the paper makes, from its text, mapped to the rows that test it or to why
none does at this scale (schema ``workflow/schemas/coverage.schema.yaml``).

An entry of the config's ``<paper>: coverage:`` list is ``{claim, where, rows}`` (the ids of paper rows of
``claims:``) or ``{claim, where, not_tested}`` (the reason: the model, the data, the scale, a GPU), with an
optional ``profile`` that does test it (e.g. ``paper``). Every paper row of ``claims:`` is listed under some entry,
so the table accounts for the whole tally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

FIELDS = ("claim", "where", "rows", "not_tested", "profile")


def coverage_rows(entries: Sequence[Mapping[str, Any]], kinds: Mapping[str, str],
                  where: str = "coverage") -> list[dict[str, Any]]:
    """The coverage table of ``entries`` checked against the claims table's rows (``kinds``: row id -> kind):
    ``[{"claim", "where", "rows", "not_tested", "profile"}]``. ValueError naming the entry for a missing or unknown
    field, both or neither of ``rows`` and ``not_tested``, a row that is not a paper row, and naming every paper row
    that no entry lists."""
    table = []
    for index, entry in enumerate(entries):
        name = f"{where}[{index}]"
        unknown = [f for f in entry if f not in FIELDS]
        missing = [f for f in ("claim", "where") if not str(entry.get(f, "")).strip()]
        if unknown or missing:
            raise ValueError(f"{name}: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        rows, not_tested = list(entry.get("rows") or []), str(entry.get("not_tested", "")).strip()
        if bool(rows) == bool(not_tested):
            raise ValueError(f"{name} ({entry['claim'][:60]!r}) needs either rows or not_tested, not "
                             f"{'both' if rows else 'neither'}")
        wrong = [row for row in rows if kinds.get(row) != "paper"]
        if wrong:
            raise ValueError(f"{name} lists rows that are not paper rows of the claims table: {wrong}")
        table.append({"claim": str(entry["claim"]), "where": str(entry["where"]), "rows": rows,
                      "not_tested": not_tested, "profile": str(entry.get("profile", ""))})
    listed = {row for entry in table for row in entry["rows"]}
    unlisted = sorted(cid for cid, kind in kinds.items() if kind == "paper" and cid not in listed)
    if unlisted:
        raise ValueError(f"{where} lists no claim for the paper rows {', '.join(unlisted)}")
    return table


def coverage_counts(table: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{"claims", "tested", "not_tested", "elsewhere"}``: the paper's claims listed, those with rows here, those
    without, and of those how many a named profile tests."""
    tested = sum(bool(entry["rows"]) for entry in table)
    return {"claims": len(table), "tested": tested, "not_tested": len(table) - tested,
            "elsewhere": sum(bool(entry.get("profile")) and not entry["rows"] for entry in table)}


def computed_rows(table: Sequence[Mapping[str, Any]], kinds: Mapping[str, str],
                  where: str = "coverage") -> list[dict[str, Any]]:
    """The coverage ``table`` with each config row id replaced by the paper rows computed from it (``kinds``: the
    computed rows' ids -> kind): the row of that id, or the rows ``<id>_<part>`` a paper derives from one config row
    (one per operand set or variant), in their order. ValueError naming a listed id that yields no paper row."""
    out = []
    for entry in table:
        rows = []
        for cid in entry["rows"]:
            derived = [cid] if kinds.get(cid) == "paper" else [
                row for row, kind in kinds.items() if kind == "paper" and row.startswith(f"{cid}_")]
            if not derived:
                raise ValueError(f"{where}: the claim {entry['claim'][:60]!r} lists {cid!r}, which no paper row "
                                 f"of the claims table comes from")
            rows += derived
        out.append({**entry, "rows": rows})
    return out
