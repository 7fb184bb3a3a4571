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


def profile_overrides(profiles: Mapping[str, Any], profile: str, name: str) -> dict[str, Any]:
    """The overrides of ``profile`` in ``profiles``: the entries it ``extends`` (a profile name or a list of them,
    each resolved the same way and merged in order), then its own keys, so that e.g. ``standin: {extends: [paper,
    smoke]}`` is the paper profile at the smoke profile's sizes. ValueError naming an unknown profile or a cycle
    (``name``: whose profiles, for the message)."""
    def resolve(current: str, chain: tuple[str, ...]) -> dict[str, Any]:
        if current in chain:
            raise ValueError(f"{name}: profile {current!r} extends itself: {' -> '.join((*chain, current))}")
        if current not in profiles:
            raise ValueError(f"{name}: unknown profile {current!r}; configured: {', '.join(profiles)}")
        entry = dict(profiles[current] or {})
        parents = entry.pop("extends", None) or []
        out: dict[str, Any] = {}
        for parent in [parents] if isinstance(parents, str) else parents:
            out = merged(out, resolve(parent, (*chain, current)))
        return merged(out, entry)

    return resolve(profile, ())


def active_profile(section: Mapping[str, Any], profile: str, name: str) -> dict[str, Any]:
    """A paper's config section with its ``profiles[profile]`` overrides (:func:`profile_overrides`) merged in (and
    ``profiles`` dropped); ValueError naming an unknown profile."""
    overrides = profile_overrides(section.get("profiles", {}), profile, name)
    return merged({k: v for k, v in section.items() if k != "profiles"}, overrides)


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
