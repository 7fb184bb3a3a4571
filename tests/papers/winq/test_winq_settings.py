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
    hessian_runs,
    learning_rate_group,
    profile_config,
    run_config,
    run_names,
    run_settings,
    train_config,
)

ROOT = Path(__file__).resolve().parents[3] / "papers" / "winq"
SCHEMA = str(ROOT / "config.schema.yaml")
SETTINGS = ["w1", "w1.58", "w2", "w3", "w4", "w2a8"]
METHODS = ["baseline", "winq", "interpolation", "noise"]


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((ROOT / "config.yaml").read_text())[KEY]


@pytest.mark.parametrize(("profile", "runs"), [("smoke", 8), ("default", 24), ("full", 24)])
def test_every_profile_validates(raw, profile, runs):
    validate(dict(raw), SCHEMA)
    active = profile_config(raw, profile)
    validate(active, SCHEMA)
    assert len(run_names(active)) == runs


def test_the_grid_in_order(raw):
    assert run_names(profile_config(raw, "default")) == [f"{s}-{m}" for s in SETTINGS for m in METHODS]
    assert run_names(profile_config(raw, "smoke")) == ["w2-baseline", "w2-winq", "w2-interpolation", "w2-noise",
                                                       "w4-baseline", "w4-winq", "w4-interpolation", "w4-noise"]


def test_run_settings_exactly(raw):
    active = profile_config(raw, "default")
    assert run_settings(active, "w2-winq") == {
        "setting": "w2", "bits": 2, "activation_bits": None, "method": "winq", "lr": 2.0e-4,
        "interpolation": {"every": 40, "strength": 0.8}, "noise_sigma": 1.0e-3, "noise_seed": 0, "hadamard": False}
    assert run_settings(active, "w1.58-baseline") == {
        "setting": "w1.58", "bits": 1.58, "activation_bits": None, "method": "baseline", "lr": 2.0e-4,
        "interpolation": None, "noise_sigma": 0.0, "noise_seed": 0, "hadamard": False}
    assert run_settings(active, "w2a8-noise") == {
        "setting": "w2a8", "bits": 2, "activation_bits": 8, "method": "noise", "lr": 4.0e-4,
        "interpolation": None, "noise_sigma": 1.0e-3, "noise_seed": 0, "hadamard": False}
    assert run_settings(active, "w4-interpolation") == {
        "setting": "w4", "bits": 4, "activation_bits": None, "method": "interpolation", "lr": 1.0e-4,
        "interpolation": {"every": 40, "strength": 0.8}, "noise_sigma": 0.0, "noise_seed": 0, "hadamard": False}
    assert run_settings(profile_config(raw, "smoke"), "w2-winq")["interpolation"] == {"every": 4, "strength": 0.8}


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
    config = train_config(smoke, "w4-winq", seed=3)
    assert (config.max_steps, config.seq_len, config.micro_batch_size, config.lr, config.seed) == (12, 64, 4, 1.0e-4, 3)
    assert (config.weight_decay, config.eval_every, config.checkpoint_every, config.progress) == (0.0, 4, 6, False)
    assert train_config(profile_config(raw, "default"), "w2a8-baseline").lr == 4.0e-4


def test_bad_run_names_are_named(raw):
    active = profile_config(raw, "default")
    with pytest.raises(ValueError, match=r"run name 'w2winq' is not <setting>-<method>"):
        run_settings(active, "w2winq")
    with pytest.raises(ValueError, match=r"run 'w8-winq': 'w8' is not a study setting; valid: w1, w1\.58, w2"):
        run_settings(active, "w8-winq")
    with pytest.raises(ValueError, match=r"run 'w2-winqq': unknown method 'winqq'; valid: baseline, winq"):
        run_settings(active, "w2-winqq")
    with pytest.raises(ValueError, match=r"run 'w1-winq': 'w1' is not a study setting; valid: w2, w4"):
        run_settings(profile_config(raw, "smoke"), "w1-winq")


def test_a_wrong_key_is_named(raw):
    with pytest.raises(WorkflowError, match="max_stpes"):
        validate({**raw, "train": {**raw["train"], "max_stpes": 3}}, SCHEMA)
    with pytest.raises(WorkflowError, match="sigmaa"):
        validate({**raw, "profiles": {**raw["profiles"], "smoke": {"noise": {"sigmaa": 1.0}}}}, SCHEMA)


def test_bad_values_are_named(raw):
    with pytest.raises(ValueError, match=r"winq\.study_settings: unknown setting 'w5'; valid settings: w1, w1\.58"):
        profile_config({**raw, "study_settings": ["w2", "w5"]}, "default")
    with pytest.raises(ValueError, match=r"winq\.settings\.w5\.bits: unknown weight bit width '5'"):
        profile_config({**raw, "settings": {**raw["settings"], "w5": {"bits": 5, "activation_bits": None}}},
                       "default")
    with pytest.raises(ValueError, match=r"winq\.methods: unknown method 'sam'; valid methods: baseline, winq"):
        profile_config({**raw, "methods": ["baseline", "sam"]}, "default")
    with pytest.raises(ValueError, match=r"winq\.interpolation\.every 12 must be below train\.max_steps 12"):
        profile_config({**raw, "profiles": {"smoke": {**raw["profiles"]["smoke"], "interpolation": {"every": 12}}}},
                       "smoke")
    with pytest.raises(ValueError, match=r"unknown training option 'max_stpes'"):
        profile_config({**raw, "train": {**raw["train"], "max_stpes": 3}}, "default")
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
        "learning_rates": {"low_bit": 2.0e-4}, "hadamard": False, "noise": {"seed": 0}, "train": active["train"]}
    assert run_config(active, "w4-winq")["interpolation"] == {"every": 40, "strength": 0.8}
    assert run_config(active, "w4-winq")["noise"] == {"sigma": 1.0e-3, "seed": 0}


def test_hessian_runs_and_methods(raw):
    active = profile_config(raw, "smoke")
    assert hessian_runs(active) == ["w2-baseline", "w2-winq", "w4-baseline", "w4-winq"]
    bad = {**raw, "hessian": {**raw["hessian"], "methods": ["noise"]}, "methods": ["baseline", "winq"]}
    message = r"winq\.hessian\.methods: 'noise' is not a study method; valid: baseline, winq"
    with pytest.raises(ValueError, match=message):
        profile_config(bad, "smoke")
