"""Paper config: profiles merged and checked, the schema, variants as quantize_blocks options, cell names."""

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate
from snakemake_interface_common.exceptions import WorkflowError

from common.ptq import QuantSpec
from papers.finer_is_better.authors import load_results
from papers.finer_is_better.settings import (
    cell_name,
    cells,
    check_config,
    model_options,
    parse_cell,
    profile_config,
    quant_spec,
    variant_options,
)

PAPER = Path(__file__).resolve().parents[3] / "papers" / "finer_is_better"
SCHEMA = str(PAPER / "config.schema.yaml")
PROFILES = ("smoke", "default", "full", "paper", "standin")


@pytest.fixture
def raw():
    return yaml.safe_load((PAPER / "config.yaml").read_text())["finer_is_better"]


def test_profiles_are_the_configured_ones(raw):
    assert tuple(raw["profiles"]) == PROFILES


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_passes_the_checks_and_the_schema(raw, profile):
    validate(copy.deepcopy(raw), SCHEMA)
    config = profile_config(raw, profile)
    assert "profiles" not in config
    validate(copy.deepcopy(config), SCHEMA)
    assert "profiles" in raw  # the raw config is left intact


def test_profile_overrides_merge_into_the_rest(raw):
    kept = copy.deepcopy(raw)
    smoke = profile_config(raw, "smoke")
    assert smoke["numerical"]["block_sizes"] == [4, 8, 16, 32]
    assert (raw["numerical"]["samples"], smoke["numerical"]["samples"]) == (1048576, 262144)
    assert smoke["numerical"]["sigma"] == {"low": 1.0e-5, "high": 1.0, "points": 41}  # not overridden: from the base
    assert (smoke["model"]["window"], smoke["model"]["stride"], smoke["model"]["max_tokens"]) == (128, 128, 4096)
    assert smoke["model"]["cells"] == raw["model"]["cells"]  # not overridden: the claims need every cell
    assert smoke["claims"] == raw["claims"]
    full = profile_config(raw, "full")
    assert (full["model"]["external"], full["model"]["window"], full["model"]["batch_size"]) == (["smollm2"], 2048, 1)
    assert full["numerical"] == raw["numerical"]
    default = profile_config(raw, "default")
    assert default == {k: v for k, v in raw.items() if k != "profiles"}
    assert raw == kept


def test_cells_in_config_order(raw):
    smoke = profile_config(raw, "smoke")
    numerical = cells(smoke, "numerical")
    assert len(numerical) == 7 * 4
    assert numerical[:5] == ["e2m1-ue4m3-b4-absmax", "e2m1-ue4m3-b8-absmax", "e2m1-ue4m3-b16-absmax",
                             "e2m1-ue4m3-b32-absmax", "e2m1-ue4m3-b4-prevent_zero"]
    assert numerical[-1] == "e2m1-ue5m3-b32-four_over_six"
    assert len(cells(profile_config(raw, "default"), "model")) == 7 * 4  # seven scale rules, blocks 4, 8, 16, 32


def test_unknown_profile(raw):
    with pytest.raises(ValueError, match=r"finer_is_better: unknown profile 'huge'; configured: smoke, default, full"):
        profile_config(raw, "huge")


def test_unknown_variant_in_cells_is_named(raw):
    raw["model"]["cells"]["ue4m3"].append("best_scale")
    with pytest.raises(ValueError, match=r"finer_is_better\.model\.cells\.ue4m3: unknown variant 'best_scale'; "
                                         r"defined variants: absmax, prevent_zero"):
        profile_config(raw, "default")
    with pytest.raises(ValueError, match=r"unknown variant 'best_scale'"):
        profile_config(raw, "smoke")  # the smoke profile keeps the model cells


def test_unknown_variant_in_a_profile_is_named(raw):
    raw["profiles"]["smoke"]["numerical"]["cells"]["ue5m3"] = ["four_over_ten"]
    with pytest.raises(ValueError, match=r"numerical\.cells\.ue5m3: unknown variant 'four_over_ten'"):
        profile_config(raw, "smoke")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c.update(element="e9m9"), r"finer_is_better\.element: unknown format 'e9m9'"),
    (lambda c: c["numerical"]["cells"].update(ue9m9=["absmax"]),
     r"finer_is_better\.numerical\.cells: unknown format 'ue9m9'"),
    (lambda c: c["numerical"]["sigma"].update(low=2.0),
     r"finer_is_better\.numerical\.sigma: low 2\.0 must be below high 1\.0"),
    (lambda c: c["model"].update(stride=512), r"finer_is_better\.model\.stride 512 exceeds window 256"),
    (lambda c: c["numerical"].update(block_sizes=[4, 16]),
     r"finer_is_better\.numerical\.block_sizes \[4, 16\] lacks 8: the claims compare blocks 4 and 8"),
    (lambda c: c["model"].update(block_sizes=[8, 32]),
     r"finer_is_better\.model\.block_sizes \[8, 32\] lacks 4, 16: the claims compare blocks 4 and 16"),
    (lambda c: c.update(numerics="theirs"), r"finer_is_better\.numerics: unknown numerics convention 'theirs'"),
    (lambda c: c["paper_gaps"].update(model="llama2_7b"),
     r"finer_is_better\.paper_gaps\.model: unknown model of the authors' table 'llama2_7b'"),
    (lambda c: c["paper_gaps"].update(variants=["absmax", "oracle"]),
     r"finer_is_better\.paper_gaps\.variants: unknown variant 'oracle'"),
    (lambda c: c["paper_gaps"].update(variants=["brute_force"]),
     r"finer_is_better\.paper_gaps: the authors' table has no llama31_8b ue4m3 brute_force block 4"),
    (lambda c: c["paper_gaps"].update(block_size=512),
     r"finer_is_better\.paper_gaps: the authors' table has no llama31_8b ue4m3 absmax block 512"),
])
def test_check_config_names_the_offending_value(raw, edit, message):
    config = {k: v for k, v in raw.items() if k != "profiles"}
    edit(config)
    with pytest.raises(ValueError, match=message):
        check_config(config)


def test_a_profile_that_breaks_a_check_is_refused(raw):
    raw["profiles"]["smoke"]["model"]["window"] = 64  # stride stays 128
    with pytest.raises(ValueError, match=r"model\.stride 128 exceeds window 64"):
        profile_config(raw, "smoke")


@pytest.mark.parametrize("where", ["raw", "profile", "merged"])
def test_schema_names_a_misspelt_key(raw, where):
    if where == "raw":
        raw["numerical"]["sampels"] = 4096
        data = raw
    elif where == "profile":
        raw["profiles"]["smoke"]["numerical"]["sampels"] = 4096
        data = raw
    else:
        data = profile_config(raw, "smoke")
        data["numerical"]["sampels"] = 4096
    with pytest.raises(WorkflowError, match=r"'sampels' was unexpected"):
        validate(data, SCHEMA)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c["numerical"].update(samples=5000), r"5000 is not a multiple of 4096"),
    (lambda c: c["variants"].update(best={"rule": "oracle"}), r"'oracle' is not one of"),
    (lambda c: c["claims"]["absmax_reversal"].pop("source"), r"'source' is a required property"),
    (lambda c: c["claims"]["absmax_reversal"].update(direction="up"), r"'up' is not one of"),
    (lambda c: c["regions"].pop("underflow_fraction"), r"'underflow_fraction' is a required property"),
    (lambda c: c.pop("regime"), r"'regime' is a required property"),
    (lambda c: c["regime"]["widest_sigma"].update(bounds=[1.0]), r"\[1.0\] is too short"),
    (lambda c: c.pop("paper_setup"), r"'paper_setup' is a required property"),
    (lambda c: c["paper_setup"].update(Models=" "), r"' ' does not match"),
    (lambda c: c["profiles"]["smoke"].update(paper_setup={"Models": "x"}), r"'paper_setup' was unexpected"),
])
def test_schema_refuses_bad_values(raw, edit, message):
    edit(raw)
    with pytest.raises(WorkflowError, match=message):
        validate(raw, SCHEMA)


@pytest.mark.parametrize(("cell", "parts"), [
    ("e2m1-ue4m3-b4-four_over_six", {"element": "e2m1", "scale": "ue4m3", "block_size": 4,
                                     "variant": "four_over_six"}),
    ("e2m1-ue5m3-b256-absmax", {"element": "e2m1", "scale": "ue5m3", "block_size": 256, "variant": "absmax"}),
    ("int4-e8m0-b32-hierarchical_four_over_six", {"element": "int4", "scale": "e8m0", "block_size": 32,
                                                  "variant": "hierarchical_four_over_six"}),
])
def test_parse_cell_and_cell_name_round_trip(cell, parts):
    assert parse_cell(cell) == parts
    assert cell_name(parts["element"], parts["scale"], parts["block_size"], parts["variant"]) == cell


@pytest.mark.parametrize("name", [
    "e2m1-ue4m3-4-absmax", "e2m1-ue4m3-b4", "E2M1-ue4m3-b4-absmax", "e2m1-ue4m3-b4-abs-max", "e2m1_ue4m3-b4-absmax",
    "e2m1-ue4m3-bx-absmax", "", "unquantized", " e2m1-ue4m3-b4-absmax",
])
def test_malformed_cell_names(name):
    with pytest.raises(ValueError, match=rf"cell name {name!r} is not <element>-<scale>-b<block>-<variant>"):
        parse_cell(name)


def test_trailing_newline_is_malformed():
    with pytest.raises(ValueError, match=r"is not <element>"):
        parse_cell("e2m1-ue4m3-b4-absmax\n")


def test_variant_options(raw):
    config = profile_config(raw, "default")
    assert variant_options(config, "hierarchical") == {"rule": "absmax", "prevent_zero": False,
                                                       "global_scale": "row", "global_target": 448.0}
    assert variant_options(config, "hierarchical_four_over_six")["rule"] == "four_over_six"
    assert variant_options(config, "four_over_six_pz") == {"rule": "four_over_six", "prevent_zero": True}
    assert variant_options(config, "absmax") == {"rule": "absmax", "prevent_zero": False}
    config["hierarchical_target"] = 6 * 448
    assert variant_options(config, "hierarchical")["global_target"] == 2688.0
    with pytest.raises(ValueError, match=r"unknown variant 'oracle'; defined variants: absmax, prevent_zero"):
        variant_options(config, "oracle")


def test_quant_spec(raw):
    config = profile_config(raw, "default")
    assert quant_spec(config, "e2m1-ue4m3-b8-hierarchical_four_over_six") == QuantSpec(
        "e2m1", "ue4m3", 8, "four_over_six", False, "row", (), 448.0)
    assert quant_spec(config, "e2m1-ue5m3-b4-prevent_zero") == QuantSpec("e2m1", "ue5m3", 4, "absmax", True)
    with pytest.raises(ValueError, match=r"unknown variant 'oracle'"):
        quant_spec(config, "e2m1-ue4m3-b4-oracle")
    with pytest.raises(ValueError, match=r"unknown format 'ue9m9'"):
        quant_spec(config, "e2m1-ue9m9-b4-absmax")
    with pytest.raises(ValueError, match=r"cell name 'e2m1-ue4m3-b4' is not"):
        quant_spec(config, "e2m1-ue4m3-b4")


def test_numerics_per_profile(raw):
    numerics = {p: profile_config(raw, p)["numerics"] for p in PROFILES}
    assert numerics == {"smoke": "lowbit", "default": "lowbit", "full": "lowbit", "paper": "finer_is_better_authors",
                        "standin": "finer_is_better_authors"}


def test_unknown_numerics_is_named(raw):
    raw["profiles"]["paper"]["numerics"] = "theirs"
    with pytest.raises(ValueError, match=r"finer_is_better\.numerics: unknown numerics convention 'theirs'; valid "
                                         r"numerics conventions: lowbit, finer_is_better_authors"):
        profile_config(raw, "paper")


def test_the_paper_profile_runs_every_variant_of_the_authors_table(raw):
    paper = profile_config(raw, "paper")
    table = load_results()
    for scale in ("ue4m3", "ue5m3"):
        theirs = set(table[table["scale"] == scale]["variant"])
        assert set(paper["model"]["cells"][scale]) - {"brute_force"} == theirs  # brute force: our extension
    assert "brute_force" not in set(table["variant"])
    assert paper["model"]["block_sizes"] == sorted(table["block_size"].unique())
    standin = profile_config(raw, "standin")["model"]["cells"]
    assert standin == {"ue4m3": ["absmax", "prevent_zero", "four_over_six", "hierarchical"],
                       "ue5m3": ["four_over_six", "hierarchical"]}


def test_model_options_under_our_numerics_are_todays(raw):
    config = profile_config(raw, "default")
    for variant in config["variants"]:
        assert model_options(config, "ue5m3", variant) == variant_options(config, variant)
    assert quant_spec(config, "e2m1-ue5m3-b4-hierarchical_pz") == QuantSpec(
        "e2m1", "ue5m3", 4, "absmax", True, "row", (), 448.0)


def test_model_options_under_the_authors_numerics(raw):
    config = profile_config(raw, "paper")
    assert quant_spec(config, "e2m1-ue4m3-b4-hierarchical") == QuantSpec(
        "e2m1", "ue4m3", 4, "absmax", False, "slice", (), 448.0, ties="down", compute_dtype="bfloat16")
    assert quant_spec(config, "e2m1-ue5m3-b8-hierarchical_four_over_six_pz") == QuantSpec(
        "e2m1", "ue5m3", 8, "four_over_six", True, "slice", (), 61440.0, ties="down", compute_dtype="bfloat16")
    assert quant_spec(config, "e2m1-ue4m3-b16-four_over_six_pz") == QuantSpec(
        "e2m1", "ue4m3", 16, "four_over_six", True, ties="down", compute_dtype="bfloat16")
    config["hierarchical_target"] = 6 * 448  # ours only: the authors' targets come from their convention
    assert quant_spec(config, "e2m1-ue4m3-b4-hierarchical").global_target == 448.0
    assert variant_options(config, "hierarchical")["global_target"] == 2688.0  # the numerical study's (ours)
