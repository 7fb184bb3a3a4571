"""Configuration helpers shared by the workflow and the paper pipelines."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in: nested mappings are merged key by key, other values replaced
    (how a size profile's overrides apply to a configuration)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        nested = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merged(out[key], value) if nested else copy.deepcopy(value)
    return out
