"""A report table setting two numerics conventions side by side (:mod:`common.scaling.conventions`).

:func:`conventions_table` gives the ``tables`` entry of a report context (``{"caption", "columns", "rows"}``, as
:mod:`common.report.render` sets it): one row per aspect of
:class:`~common.scaling.conventions.NumericsConvention` with this run's value, the authors' value, where the
authors' code does it (their convention's ``where``) and whether the two agree. Conventions may be given by name;
the module imports :mod:`common.scaling` (and with it torch) only to look a name up.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from common.scaling.conventions import NumericsConvention

COLUMNS = ("aspect", "this run", "the authors'", "where the authors do it", "same or different")


def conventions_table(ours: str | NumericsConvention, authors: str | NumericsConvention = "finer_is_better_authors",
                      *, caption: str | None = None) -> dict[str, Any]:
    """``{"caption", "columns", "rows"}``: one row per compared aspect, ``[aspect, this run, the authors', where
    the authors do it, "same" | "different"]``, values in words (numbers with ``:g``), a missing location as
    "-". The default caption names both conventions and the authors' source."""
    ours, authors = _convention(ours), _convention(authors)
    where = dict(authors.where)
    rows = []
    for f in fields(authors):
        if "aspect" not in f.metadata:
            continue
        mine, theirs = getattr(ours, f.name), getattr(authors, f.name)
        rows.append([f.metadata["aspect"], _describe(mine, f.metadata["values"]),
                     _describe(theirs, f.metadata["values"]), where.get(f.name, "-"),
                     "same" if mine == theirs else "different"])
    if caption is None:
        caption = (f"Numerics conventions of this run ({ours.name}) and of the authors ({authors.name}"
                   f"{'; ' + authors.source if authors.source else ''}).")
    return {"caption": caption, "columns": list(COLUMNS), "rows": rows}


def _convention(convention: str | NumericsConvention) -> NumericsConvention:
    """A convention object as given, or the registered one of that name (imported here: it needs torch)."""
    if not isinstance(convention, str):
        return convention
    from common.scaling.conventions import get_convention

    return get_convention(convention)


def _describe(value: Any, values: dict[str, str]) -> str:
    """A field value in words: its description, a number by ``:g``, else ``str``."""
    if isinstance(value, str):
        return values.get(value, value)
    return f"{value:g}" if isinstance(value, int | float) else str(value)
