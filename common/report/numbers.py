"""How a report writes a number in its tables and claim details (an estimate with its interval:
:meth:`common.uncertainty.Estimate.format`)."""

from __future__ import annotations


def signed_percent(value: float | None, decimals: int = 2) -> str:
    """A fraction as a signed percentage with ``decimals`` decimals, ``0.01234`` -> ``+1.23%``; ``""`` for None (a
    table cell without a value)."""
    return "" if value is None else f"{value:+.{decimals}%}"
