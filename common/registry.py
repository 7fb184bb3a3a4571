"""Name lookup shared by every registry (formats, scale rules, recipes, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def lookup(registry: Mapping[str, T], name: object, what: str, key: str | None = None) -> T:
    """``registry[name]``, or a ``ValueError`` naming the unknown value, every valid choice, and the config
    ``key`` the value came from when given."""
    try:
        return registry[name]  # type: ignore[index]
    except (KeyError, TypeError):
        where = f"{key}: " if key else ""
        raise ValueError(f"{where}unknown {what} {name!r}; valid {what}s: {', '.join(registry)}") from None
