"""Name lookup shared by every registry (formats, scale rules, recipes, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def lookup(registry: Mapping[str, T], name: object, what: str) -> T:
    """``registry[name]``, or a ``ValueError`` naming the unknown value and every valid choice."""
    try:
        return registry[name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValueError(f"unknown {what} {name!r}; valid {what}s: {', '.join(registry)}") from None
