"""The study config: schema and semantic checks per profile, the setting x method grid, run settings and learning-rate
groups."""

from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from common.config import active_profile
from papers.winq.settings import (
    KEY,
    compared_methods,
    hessian_cells,
    interpolation_every,
    learning_rate_group,
    profile_config,
    run_config,
    run_names,
    run_seeds,
    run_settings,
    run_steps,
    train_config,
    training_cells,
)

ROOT = Path(__file__).resolve().parents[3] / "papers" / "winq"
SCHEMA = str(ROOT / "config.schema.yaml")
METHODS = ["baseline", "winq", "interpolation", "noise"]


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((ROOT / "config.yaml").read_text())[KEY]


@pytest.mark.parametrize(("profile", "cells", "hessians"), [("smoke", 8, 6), ("default", 30, 21), ("full", 40, 36)])
def test_every_profile_validates(raw, profile, cells, hessians):
    validate(dict(raw), SCHEMA)
    active = profile_config(raw, profile)
    validate(active, SCHEMA)
    assert len(training_cells(active)) == cells
    assert len(hessian_cells(active)) == hessians


def test_the_runs_in_order(raw):
    assert run_names(profile_config(raw, "full")) == [
        *(f"w1-{m}" for m in METHODS), "w1.58-baseline", "w1.58-winq", *(f"w2-{m}" for m in METHODS),
        "w3-baseline", "w3-winq", "w4-baseline", "w4-winq", "w2a8-baseline", "w2a8-winq"]
    assert run_names(profile_config(raw, "default")) == [  # the compared runs of 1-3 bits only (the budget)
        *(f"w1-{m}" for m in METHODS), *(f"w2-{m}" for m in METHODS), "w3-baseline", "w3-winq"]
    assert run_names(profile_config(raw, "smoke")) == [f"w1-{m}" for m in METHODS]


def test_seeds_of_compared_and_figure_runs(raw):
    full = profile_config(raw, "full")
    for run in ("w1-noise", "w2-interpolation", "w1.58-baseline", "w3-winq", "w4-baseline"):
        assert run_seeds(full, run) == [0, 1, 2], run
    for run in ("w1.58-winq", "w4-winq", "w2a8-baseline", "w2a8-winq"):
        assert run_seeds(full, run) == [0], run
    smoke = profile_config(raw, "smoke")
    assert training_cells(smoke)[:3] == ["w1-baseline/seed0", "w1-baseline/seed1", "w1-winq/seed0"]
    assert hessian_cells(smoke) == [f"w1-{m}/seed{k}" for m in ("baseline", "interpolation", "noise") for k in (0, 1)]
    assert compared_methods(smoke, "w1") == list(METHODS)
    assert compared_methods(smoke, "w2") == []  # outside the smoke study


def test_run_settings_exactly(raw):
    active = profile_config(raw, "default")
    assert run_settings(active, "w2-winq") == {
        "setting": "w2", "bits": 2, "activation_bits": None, "method": "winq", "lr": 4.0e-3, "max_steps": 1760,
        "interpolation": {"every": 440, "strength": 0.8}, "noise_sigma": 1.0e-3, "hadamard": False,
        "diagnostics_every": 440}
    full = profile_config(raw, "full")  # W1.58 trains in the full profile only
    assert run_settings(full, "w1.58-baseline") == {  # the diagnostics at its group's K, as the interpolating runs
        "setting": "w1.58", "bits": 1.58, "activation_bits": None, "method": "baseline", "lr": 4.0e-3,
        "max_steps": 1760, "interpolation": None, "noise_sigma": 0.0, "hadamard": False, "diagnostics_every": 440}
    assert run_settings(active, "w3-baseline")["diagnostics_every"] == 320  # a half
    assert run_settings(full, "w2a8-winq")["lr"] == 4.0e-3
    assert run_settings(full, "w2a8-winq")["interpolation"] == {"every": 440, "strength": 0.8}  # a quarter
    assert run_settings(active, "w3-winq")["interpolation"] == {"every": 320, "strength": 0.8}  # a half
    assert run_settings(profile_config(raw, "smoke"), "w1-winq")["interpolation"] == {"every": 3, "strength": 0.8}
    hadamard = profile_config({**raw, "study_settings": ["w2h"], "compared": {}}, "full")
    assert run_settings(hadamard, "w2h-winq")["hadamard"] is True


def test_interpolation_periods_are_whole_fractions_of_the_run(raw):
    active = profile_config(raw, "default")
    assert [interpolation_every(active, g) for g in ("low_bit", "a8", "high_bit")] == [440, 440, 320]
    bad = {**raw, "interpolation": {**raw["interpolation"], "fraction": {**raw["interpolation"]["fraction"],
                                                                       "high_bit": 0.333}}}
    with pytest.raises(ValueError, match=r"winq\.interpolation\.fraction\.high_bit 0\.333 x train\.max_steps 640 = "
                                         r"213\.12 is not an integer >= 1"):
        profile_config(bad, "default")
    with pytest.raises(ValueError, match=r"fraction\.high_bit 0\.5 x train\.max_steps 11 = 5\.5 is not an integer"):
        profile_config({**raw, "train": {**raw["train"], "max_steps": 11}}, "default")
    with pytest.raises(ValueError, match=r"fraction\.low_bit 0\.25 x train_steps\.low_bit 1762 = 440\.5 is not an"):
        profile_config({**raw, "train_steps": {**raw["train_steps"], "low_bit": 1762}}, "default")


def test_learning_rate_groups():
    assert [learning_rate_group(b, None) for b in (1, 1.58, 2, 3, 4)] == ["low_bit"] * 3 + ["high_bit"] * 2
    assert learning_rate_group(1, 8) == "a8"
    assert learning_rate_group(4, 8) == "a8"
    with pytest.raises(ValueError, match=r"unknown weight bit width '8'; valid weight bit widths: 1, 1\.58, 2, 3, 4"):
        learning_rate_group(8, None)
    with pytest.raises(ValueError, match=r"unknown activation bit width 4; valid: None \(A16\), 8"):
        learning_rate_group(2, 4)


def test_train_config_per_run(raw):
    smoke = profile_config(raw, "smoke")
    config = train_config(smoke, "w1-winq", seed=3)
    assert (config.max_steps, config.seq_len, config.micro_batch_size, config.lr, config.seed) == (12, 64, 4, 4.0e-3, 3)
    assert (config.weight_decay, config.eval_every, config.checkpoint_every, config.progress) == (0.0, 2, 6, False)
    assert config.min_lr_ratio == 0.0
    assert train_config(profile_config(raw, "full"), "w2a8-baseline").lr == 4.0e-3


def test_bad_run_names_are_named(raw):
    active = profile_config(raw, "full")
    with pytest.raises(ValueError, match=r"run name 'w2winq' is not <setting>-<method>"):
        run_settings(active, "w2winq")
    with pytest.raises(ValueError, match=r"run 'w8-winq': 'w8' is not a study setting; valid: w1, w1\.58, w2"):
        run_settings(active, "w8-winq")
    with pytest.raises(ValueError, match=r"run 'w2-winqq': unknown method 'winqq'; valid: baseline, winq"):
        run_settings(active, "w2-winqq")
    with pytest.raises(ValueError, match=r"run 'w4-noise': setting 'w4' runs baseline, winq"):
        run_settings(active, "w4-noise")
    with pytest.raises(ValueError, match=r"run 'w3-winq': 'w3' is not a study setting; valid: w1"):
        run_settings(profile_config(raw, "smoke"), "w3-winq")


def test_a_wrong_key_is_named(raw):
    with pytest.raises(WorkflowError, match="max_stpes"):
        validate({**raw, "train": {**raw["train"], "max_stpes": 3}}, SCHEMA)
    with pytest.raises(WorkflowError, match="sigmaa"):
        validate({**raw, "profiles": {**raw["profiles"], "smoke": {"noise": {"sigmaa": 1.0}}}}, SCHEMA)
    with pytest.raises(WorkflowError, match="seed"):  # the noise follows the cell's seed: no noise.seed
        validate({**raw, "noise": {"sigma": 1e-3, "seed": 0}}, SCHEMA)
    with pytest.raises(WorkflowError, match="stagnation_seed"):
        validate({**raw, "diagnostics": {"stagnation_batches": 20}}, SCHEMA)
    with pytest.raises(WorkflowError, match="0 is less than the minimum of 1"):
        validate({**raw, "diagnostics": {"stagnation_batches": 0, "stagnation_seed": 1000}}, SCHEMA)
    with pytest.raises(WorkflowError, match="batches"):
        validate({**raw, "profiles": {**raw["profiles"], "smoke": {"diagnostics": {"batches": 2}}}}, SCHEMA)


def test_bad_values_are_named(raw):
    with pytest.raises(ValueError, match=r"winq\.study_settings: unknown setting 'w5'; valid settings: w1, w1\.58"):
        profile_config({**raw, "study_settings": ["w2", "w5"]}, "full")
    with pytest.raises(ValueError, match=r"winq\.settings\.w5\.bits: unknown weight bit width '5'"):
        profile_config({**raw, "settings": {**raw["settings"], "w5": {"bits": 5, "activation_bits": None}}},
                       "full")
    with pytest.raises(ValueError, match=r"winq\.methods: unknown method 'sam'; valid methods: baseline, winq"):
        profile_config({**raw, "methods": ["baseline", "sam"]}, "full")
    with pytest.raises(ValueError, match=r"winq\.compared\.w2: the claims compare every method with the baseline"):
        profile_config({**raw, "compared": {**raw["compared"], "w2": ["winq"]}}, "full")
    with pytest.raises(ValueError, match=r"winq\.figure_seeds \[5\] are not among the seeds \[0, 1, 2\]"):
        profile_config({**raw, "figure_seeds": [5]}, "full")
    with pytest.raises(ValueError, match=r"winq: setting 'w2a8' has no baseline run"):
        profile_config({**raw, "figure_methods": ["winq"]}, "full")
    with pytest.raises(ValueError, match=r"unknown training option 'max_stpes'"):
        profile_config({**raw, "train": {**raw["train"], "max_stpes": 3}}, "full")
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        active_profile(raw, "huge", KEY)


def test_run_config_is_the_runs_own_part(raw):
    active = profile_config(raw, "default")
    for name in run_names(active):
        part = run_config(active, name)
        assert run_settings(part, name) == run_settings(active, name)
        assert train_config(part, name, 7) == train_config(active, name, 7)
    assert run_config(active, "w2-baseline") == {
        "settings": {"w2": {"bits": 2, "activation_bits": None}}, "study_settings": ["w2"], "methods": ["baseline"],
        "compared": {"w2": ["baseline"]}, "figure_methods": [], "seeds": [0], "figure_seeds": [0],
        "learning_rates": {"low_bit": 4.0e-3}, "interpolation": {"fraction": {"low_bit": 0.25}}, "noise": {},
        "diagnostics": {"stagnation_batches": 4, "stagnation_seed": 1000},
        "train": {**active["train"], "max_steps": 1760}}  # the group's run length (train_steps.low_bit)
    assert run_config(active, "w3-winq")["interpolation"] == {"strength": 0.8, "fraction": {"high_bit": 0.5}}
    assert run_config(active, "w3-winq")["noise"] == {"sigma": 1.0e-3}
    # another seed list, another group's fraction, another setting's bits: the same part
    other = profile_config({**raw, "seeds": [0, 1, 2, 3], "interpolation": {**raw["interpolation"], "fraction": {
        **raw["interpolation"]["fraction"], "high_bit": 0.25}}}, "default")
    assert run_config(other, "w2-winq") == run_config(active, "w2-winq")
    # the claims, the regime card and the paper's setup are no run's; the diagnostics settings are every run's
    report = profile_config({**raw, "claims": {}, "regime": {}, "paper_setup": {"Model": "another"}}, "default")
    more = profile_config({**raw, "profiles": {**raw["profiles"], "default": {
        **raw["profiles"]["default"], "diagnostics": {"stagnation_batches": 8}}}}, "default")
    for name in run_names(active):
        assert run_config(report, name) == run_config(active, name), name
        assert run_config(more, name)["diagnostics"] == {"stagnation_batches": 8, "stagnation_seed": 1000}, name


def test_the_diagnostics_per_profile(raw):
    """The authors' 20 batches of the stagnation statistic in the paper profile; 4 in the default profile (20 would
    double its training compute), 2 in smoke."""
    batches = {profile: profile_config(raw, profile)["diagnostics"]["stagnation_batches"]
               for profile in ("smoke", "default", "full", "paper", "standin")}
    assert batches == {"smoke": 2, "default": 4, "full": 4, "paper": 20, "standin": 2}
    assert {profile_config(raw, p)["diagnostics"]["stagnation_seed"] for p in batches} == {1000}



def test_run_lengths_per_learning_rate_group(raw):
    """The paper profile's run lengths: 240k steps for 1-2 bits and W1A8 (K = 60k, a quarter), 80k for >= 3 bits
    (K = 40k, a half); a run's own part carries its length, so another group's length never reruns it."""
    paper = profile_config(raw, "paper")
    assert [run_steps(paper, g) for g in ("low_bit", "a8", "high_bit")] == [240000, 240000, 80000]
    assert [interpolation_every(paper, g) for g in ("low_bit", "a8", "high_bit")] == [60000, 60000, 40000]
    for name, steps, every in (("w1-winq", 240000, 60000), ("w1a8-winq", 240000, 60000), ("w3-winq", 80000, 40000),
                               ("w4-baseline", 80000, None)):
        settings = run_settings(paper, name)
        assert (settings["max_steps"], (settings["interpolation"] or {}).get("every")) == (steps, every), name
        assert train_config(paper, name).max_steps == steps
        part = run_config(paper, name)
        assert "train_steps" not in part
        assert part["train"]["max_steps"] == steps
        assert run_settings(part, name) == settings
    longer = profile_config({**raw, "profiles": {**raw["profiles"], "paper": {
        **raw["profiles"]["paper"], "train_steps": {"low_bit": 240000, "a8": 240000, "high_bit": 160000}}}}, "paper")
    assert run_config(longer, "w2-winq") == run_config(paper, "w2-winq")
    assert run_config(longer, "w3-winq") != run_config(paper, "w3-winq")
    # a group without its own length runs train.max_steps; a length the fraction does not divide is named
    assert run_steps(profile_config(raw, "default"), "low_bit") == 1760
    assert run_steps(profile_config(raw, "default"), "high_bit") == 640
    odd = {**raw, "train_steps": {"high_bit": 641}}
    with pytest.raises(ValueError, match=r"^winq\.interpolation\.fraction\.high_bit 0\.5 x train_steps\.high_bit 641 "
                                         r"= 320\.5 is not an integer >= 1"):
        profile_config(odd, "default")
