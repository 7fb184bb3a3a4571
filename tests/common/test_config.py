"""common.config: merged (nested mappings merge key by key, everything else is replaced, inputs stay intact), profile
overrides with `extends`, the per-profile folders."""

import copy

import pytest

from common.config import active_profile, merged, profile_dirs, profile_overrides

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


PROFILES = {
    "smoke": {"eval": {"window": 128, "stride": 64}, "seeds": [0, 1]},
    "paper": {"eval": {"window": 2048}, "base_model": "llama32_1b", "seeds": [0, 1, 2]},
    "standin": {"extends": ["paper", "smoke"], "seeds": [0]},
    "chained": {"extends": "standin", "eval": {"stride": 32}},
}


def test_extends_merges_the_parents_in_order_then_the_profile_itself():
    # smoke (listed last) wins over paper on eval.window, the profile's own seeds win over both
    assert profile_overrides(PROFILES, "standin", "x") == {
        "eval": {"window": 128, "stride": 64}, "base_model": "llama32_1b", "seeds": [0]}
    assert profile_overrides(PROFILES, "chained", "x") == {
        "eval": {"window": 128, "stride": 32}, "base_model": "llama32_1b", "seeds": [0]}
    assert profile_overrides({"a": {"extends": "b", "k": 1}, "b": {"k": 2, "j": 3}}, "a", "x") == {"k": 1, "j": 3}
    assert profile_overrides({"empty": None}, "empty", "x") == {}
    assert "extends" in PROFILES["standin"]  # the input is left as it was


def test_active_profile_applies_the_resolved_overrides_and_drops_profiles():
    section = {"eval": {"window": 256, "stride": 128, "batch_size": 8}, "seeds": [0], "profiles": PROFILES}
    assert active_profile(section, "standin", "x") == {
        "eval": {"window": 128, "stride": 64, "batch_size": 8}, "seeds": [0], "base_model": "llama32_1b"}


def test_unknown_and_cyclic_profiles_are_named():
    with pytest.raises(ValueError, match=r"^x: unknown profile 'huge'; configured: smoke, paper, standin, chained$"):
        profile_overrides(PROFILES, "huge", "x")
    with pytest.raises(ValueError, match=r"^x: unknown profile 'gone'; configured: a$"):
        profile_overrides({"a": {"extends": ["gone"]}}, "a", "x")
    cycle = {"a": {"extends": "b"}, "b": {"extends": ["c"]}, "c": {"extends": "a"}}
    with pytest.raises(ValueError, match=r"^x: profile 'a' extends itself: a -> b -> c -> a$"):
        profile_overrides(cycle, "a", "x")
