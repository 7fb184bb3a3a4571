"""common.config.merged: nested mappings merge key by key, everything else is replaced, inputs stay intact."""

import copy

import pytest

from common.config import merged, profile_dirs

BASE = {
    "element": "e2m1",
    "numerical": {"sigma": {"low": 1e-5, "high": 1.0, "points": 41}, "block_sizes": [4, 8, 16], "seed": 0},
    "model": {"window": 256, "cells": {"ue4m3": ["absmax", "prevent_zero"], "ue5m3": ["absmax"]}},
}


def test_nested_merge_and_replacement():
    override = {"numerical": {"sigma": {"points": 5}, "block_sizes": [4]},
                "model": {"cells": {"ue4m3": ["four_over_six"]}, "stride": 128},
                "new": {"a": 1}}
    assert merged(BASE, override) == {
        "element": "e2m1",
        "numerical": {"sigma": {"low": 1e-5, "high": 1.0, "points": 5}, "block_sizes": [4], "seed": 0},
        "model": {"window": 256, "cells": {"ue4m3": ["four_over_six"], "ue5m3": ["absmax"]}, "stride": 128},
        "new": {"a": 1},
    }


def test_lists_are_replaced_not_concatenated():
    out = merged({"blocks": [4, 8, 16]}, {"blocks": [32]})
    assert out == {"blocks": [32]}


def test_a_mapping_replaces_a_scalar_and_a_scalar_replaces_a_mapping():
    assert merged({"a": 1, "b": {"c": 2}}, {"a": {"x": 1}, "b": None}) == {"a": {"x": 1}, "b": None}


def test_empty_override_is_a_copy():
    out = merged(BASE, {})
    assert out == BASE
    assert out is not BASE


def test_inputs_are_not_mutated():
    base, override = copy.deepcopy(BASE), {"numerical": {"sigma": {"low": 1e-3}}, "model": {"window": 64}}
    kept = copy.deepcopy(override)
    out = merged(base, override)
    assert base == BASE
    assert override == kept
    assert out["numerical"]["sigma"]["low"] == 1e-3
    assert base["numerical"]["sigma"]["low"] == 1e-5
    out["numerical"]["sigma"]["points"] = 3  # a merged level is a new dict
    assert base["numerical"]["sigma"]["points"] == 41


def test_lookup_names_the_config_key():
    from common.registry import lookup

    assert lookup({"a": 1}, "a", "thing", "section.field") == 1
    with pytest.raises(ValueError, match=r"^section\.field: unknown thing 'b'; valid things: a$"):
        lookup({"a": 1}, "b", "thing", "section.field")
    with pytest.raises(ValueError, match=r"^unknown thing 'b'; valid things: a$"):
        lookup({"a": 1}, "b", "thing")


def test_profile_dirs_keep_the_default_short_and_separate_the_rest():
    assert profile_dirs("default") == ("results", "reports", "logs")
    assert profile_dirs("smoke") == ("results/smoke", "reports/smoke", "logs/smoke")
    assert profile_dirs("paper") == ("results/paper", "reports/paper", "logs/paper")
    for bad in ("", "a/b", ".."):
        with pytest.raises(ValueError, match=f"profile must name one folder, got {bad!r}"):
            profile_dirs(bad)
