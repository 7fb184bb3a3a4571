"""Paper config: the schema on the raw config and every merged profile, the checks it cannot state, variants."""

import copy
from pathlib import Path

import pytest
import torch
import yaml
from msl_testing import PROFILES, SCHEMA, raw_config, tiny_config
from snakemake.utils import validate
from snakemake_interface_common.exceptions import WorkflowError

from common.ptq import QuantSpec
from common.scaling import quantize_blocks
from papers.microscaling_limits.settings import VARIANTS, profile_config, variant_spec


@pytest.fixture
def raw():
    return raw_config()


def test_profiles_are_the_configured_ones(raw):
    assert tuple(raw["profiles"]) == PROFILES


def test_raw_config_passes_the_schema(raw):
    validate(copy.deepcopy(raw), SCHEMA)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_merged_profile_passes_the_checks_and_the_schema(raw, profile):
    kept = copy.deepcopy(raw)
    config = profile_config(raw, profile)
    assert "profiles" not in config
    validate(copy.deepcopy(config), SCHEMA)
    assert raw == kept  # the raw config is left intact


def test_tiny_test_config_passes_the_schema():
    validate(tiny_config(), SCHEMA)


def test_profile_overrides_merge_into_the_rest(raw):
    smoke = profile_config(raw, "smoke")
    assert smoke["theory"] == {"sigma": {"low": 1.0e-6, "high": 10.0, "points": 81}, "block_sizes": [4, 8, 16, 32],
                               "distributions": ["normal"]}
    assert smoke["simulation"]["block_sizes"] == [4, 8, 16, 32]
    assert smoke["simulation"]["samples"] == 1048576  # not overridden: from the base
    assert smoke["tensors"] == {"models": ["base", "minilm"], "block_sizes": [8, 16, 32]}
    assert smoke["paper_model"] == {"scales": ["ue4m3"], "block_sizes": [4, 8, 16, 32], "samples": 1048576,
                                    "seed": 0, "figure_blocks": [8, 16, 32]}
    assert raw["paper_model"]["block_sizes"] == [2, 4, 8, 16, 32, 64, 128, 256]  # the authors' script's
    assert (smoke["model"]["window"], smoke["model"]["stride"], smoke["model"]["max_tokens"]) == (128, 128, 8192)
    assert smoke["model"]["variants"] == ["ue4m3", "ue4m3s", "ue5m3"]
    assert smoke["sweep"] == {"model": None, "points": None, "block_size": 16, "figure_blocks": [],
                              "zero_shot_points": 1, "max_tokens": 8192}
    assert smoke["claims"] == raw["claims"]  # predictions do not depend on the profile
    full = profile_config(raw, "full")
    assert full["tensors"]["models"] == ["base", "minilm", "smollm2"]
    assert (full["model"]["external"], full["model"]["window"], full["model"]["batch_size"]) == (["smollm2"], 2048, 1)
    assert full["theory"] == raw["theory"]
    assert profile_config(raw, "default") == {k: v for k, v in raw.items() if k != "profiles"}
    paper = profile_config(raw, "paper")  # the paper's models only, the sweep on Llama-3.1-8B
    assert (paper["model"]["base"], paper["model"]["external"]) == (False, ["granite33_8b", "llama2_7b", "llama31_8b"])
    assert (paper["sweep"]["model"], paper["sweep"]["block_size"]) == ("llama31_8b", 16)


def test_unknown_profile_is_named(raw):
    with pytest.raises(ValueError, match=r"microscaling_limits: unknown profile 'huge'; configured: smoke, default, "
                                         r"full"):
        profile_config(raw, "huge")


@pytest.mark.parametrize("where", ["raw", "profile", "merged"])
def test_schema_names_a_misspelt_key(raw, where):
    if where == "raw":
        raw["simulation"]["sampels"] = 4096
        data = raw
    elif where == "profile":
        raw["profiles"]["smoke"]["simulation"]["sampels"] = 4096
        data = raw
    else:
        data = profile_config(raw, "smoke")
        data["simulation"]["sampels"] = 4096
    with pytest.raises(WorkflowError, match=r"'sampels' was unexpected"):
        validate(data, SCHEMA)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c["model"].update(variants=["ue4m3", "ue6m2"]), r"'ue6m2' is not one of"),
    (lambda c: c["simulation"].update(samples=5000), r"5000 is not a multiple of 4096"),
    (lambda c: c["theory"].update(block_sizes=[4, 12]), r"12 is not one of"),
    (lambda c: c["theory"].update(distributions=["cauchy"]), r"'cauchy' is not one of"),
    (lambda c: c.update(rules=["four_over_six"]), r"'four_over_six' is not one of"),
    (lambda c: c["claims"]["sweep_inversion_onset"].pop("threshold"), r"'threshold' is a required property"),
    (lambda c: c["claims"]["sweep_inversion_onset"].update(direction="beyond"), r"'beyond' is not one of"),
    (lambda c: c["sweep"].update(points=1), r"1 is less than the minimum of 2"),
    (lambda c: c.pop("regime"), r"'regime' is a required property"),
    (lambda c: c["regime"]["narrowest_sigma"].pop("bound_source"), r"'bound_source' is a required property"),
    (lambda c: c.pop("paper_setup"), r"'paper_setup' is a required property"),
    (lambda c: c["paper_setup"].update(Models=""), r"'' should be non-empty"),
    (lambda c: c["profiles"]["smoke"].update(regime={}), r"'regime' was unexpected"),
    (lambda c: c["sweep"].update(block_size=12), r"12 is not one of"),
    (lambda c: c["profiles"].update(huge={}), r"'huge' is not one of"),
    (lambda c: c["paper_model"].update(scales=["e8m0"]), r"'e8m0' is not one of"),
    (lambda c: c["paper_model"].pop("figure_blocks"), r"'figure_blocks' is a required property"),
])
def test_schema_refuses_bad_values_naming_them(raw, edit, message):
    edit(raw)
    with pytest.raises(WorkflowError, match=message):
        validate(raw, SCHEMA)


def test_schema_refuses_a_bad_value_in_the_merged_profile(raw):
    config = profile_config(raw, "smoke")
    config["model"]["variants"] = ["ue6m2"]
    with pytest.raises(WorkflowError, match=r"'ue6m2' is not one of"):
        validate(config, SCHEMA)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c["model"].update(variants=["ue4m3", "ue6m2"]),
     r"microscaling_limits\.model\.variants: unknown perplexity variant 'ue6m2'"),
    (lambda c: c.update(element="e9m9"), r"microscaling_limits\.element: unknown format 'e9m9'"),
    (lambda c: c.update(scales=["ue4m3", "ue9m9"]), r"microscaling_limits\.scales: unknown format 'ue9m9'"),
    (lambda c: c["theory"]["sigma"].update(low=20.0),
     r"microscaling_limits\.theory\.sigma: low 20\.0 must be below high 10\.0"),
    (lambda c: c["simulation"]["sigma"].update(high=1.0e-5),
     r"microscaling_limits\.simulation\.sigma: low 1e-05 must be below high 1e-05"),
    (lambda c: c["model"].update(stride=512), r"microscaling_limits\.model\.stride 512 exceeds window 256"),
    (lambda c: c["paper_model"].update(figure_blocks=[8, 12, 512]),
     r"microscaling_limits\.paper_model\.figure_blocks \[12, 512\] are not among its block_sizes \[2, 4"),
])
def test_profile_config_names_the_offending_value(raw, edit, message):
    edit(raw)
    with pytest.raises(ValueError, match=message):
        profile_config(raw, "default")


def test_a_profile_that_breaks_a_check_is_refused(raw):
    raw["profiles"]["smoke"]["model"]["window"] = 64  # stride stays 128
    with pytest.raises(ValueError, match=r"model\.stride 128 exceeds window 64"):
        profile_config(raw, "smoke")
    profile_config(raw, "default")  # the other profiles are unaffected


def test_variants_are_the_schema_enum(raw):
    schema = yaml.safe_load(Path(SCHEMA).read_text())
    assert schema["$defs"]["model"]["properties"]["variants"]["items"]["enum"] == list(VARIANTS)
    assert list(VARIANTS) == raw["model"]["variants"] == ["ue4m3", "ue4m3s", "ue5m3"]


@pytest.mark.parametrize(("variant", "spec"), [
    ("ue4m3", QuantSpec("e2m1", "ue4m3", 16, "absmax", False, None)),
    ("ue4m3s", QuantSpec("e2m1", "ue4m3", 16, "absmax", False, "tensor")),
    ("ue5m3", QuantSpec("e2m1", "ue5m3", 16, "absmax", False, None)),
])
def test_variant_spec(variant, spec):
    assert variant_spec("e2m1", variant, 16) == spec


def test_ue4m3s_is_a_per_tensor_scale_with_the_default_target():
    spec = variant_spec("e2m1", "ue4m3s", 8)
    assert (spec.global_scale, spec.global_target, spec.block_size) == ("tensor", None, 8)


def test_ue4m3s_divides_out_amax_over_6_times_448():
    """The paper's UE4M3-S: the per-tensor scale the spec produces in quantize_blocks is amax / (6 * 448)."""
    spec = variant_spec("e2m1", "ue4m3s", 8)
    x = torch.linspace(-3.0, 2.0, 64).reshape(4, 16)
    _, scales = quantize_blocks(x, spec.elem, spec.scale, spec.block_size, spec.rule, prevent_zero=spec.prevent_zero,
                                global_scale=spec.global_scale, global_target=spec.global_target, return_scales=True)
    assert float(scales.global_) == pytest.approx(3.0 / (6 * 448), rel=1e-7)
    _, plain = quantize_blocks(x, "e2m1", "ue4m3", 8, "absmax", return_scales=True)
    assert plain.global_ is None


def test_variant_spec_refuses_an_unknown_variant():
    with pytest.raises(ValueError, match=r"unknown perplexity variant 'ue6m2'; valid"):
        variant_spec("e2m1", "ue6m2", 16)
