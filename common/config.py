"""Configuration helpers shared by the workflow and the paper pipelines."""

from __future__ import annotations

import copy
import json
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


def json_object(text: str, flag: str = "--config-json") -> dict[str, Any]:
    """Parse a command-line JSON object (ValueError naming ``flag`` and the start of the text otherwise)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{flag} is not valid JSON ({err.msg}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be a JSON object, got {text[:80]!r}")
    return value


def active_profile(section: Mapping[str, Any], profile: str, name: str) -> dict[str, Any]:
    """A paper's config section with its ``profiles[profile]`` overrides merged in (and ``profiles`` dropped);
    ValueError naming an unknown profile."""
    profiles = section.get("profiles", {})
    if profile not in profiles:
        raise ValueError(f"{name}: unknown profile {profile!r}; configured: {', '.join(profiles)}")
    return merged({k: v for k, v in section.items() if k != "profiles"}, profiles[profile] or {})


SHORT_PATHS_PROFILE = "default"  # the profile whose files keep the short paths results/, reports/, logs/


def profile_dirs(profile: str) -> tuple[str, str, str]:
    """``(results, reports, logs)``: the folders of profile ``profile``'s files, ``results/<profile>``,
    ``reports/<profile>`` and ``logs/<profile>``, or ``results``, ``reports`` and ``logs`` for the default
    profile, so that the files of several profiles coexist. ValueError for a name that is not one path part."""
    if not profile or "/" in profile or profile in (".", ".."):
        raise ValueError(f"profile must name one folder, got {profile!r}")
    if profile == SHORT_PATHS_PROFILE:
        return "results", "reports", "logs"
    return f"results/{profile}", f"reports/{profile}", f"logs/{profile}"
