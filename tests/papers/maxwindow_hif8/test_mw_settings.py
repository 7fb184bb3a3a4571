"""The study config: schema and semantic checks per profile, the study's runs (9 with every observer, the cells
``<run>/seed<k>``), their names and settings, and the training config per rate and seed."""

from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from common.config import active_profile
from papers.maxwindow_hif8.settings import (
    STUDY_RUNS,
    control_run,
    profile_config,
    recipe,
    run_name,
    run_names,
    run_settings,
    train_config,
)

ROOT = Path(__file__).resolve().parents[3] / "papers" / "maxwindow_hif8"
SCHEMA = str(ROOT / "config.schema.yaml")
DEFAULT_RUNS = ["bf16-lrlow", "bf16-lrhigh", "max_window-lrlow-w40", "most_recent-lrlow-w40", "max_window-lrlow-w0",
                "max_window-lrhigh-w40", "current-lrlow-w40", "current-lrhigh-w40", "exp_smooth-lrlow-w40",
                "max_window-lrlow-w40-coarse_scale"]


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((ROOT / "config.yaml").read_text())["maxwindow_hif8"]


@pytest.mark.parametrize(("profile", "runs", "seeds", "accumulation"),
                         [("smoke", 7, [0, 1], 2), ("default", 10, [0, 1, 2], 8), ("full", 10, [0, 1, 2], 8)])
def test_every_profile_validates(raw, profile, runs, seeds, accumulation):
    validate(dict(raw), SCHEMA)
    active = profile_config(raw, profile)
    validate(active, SCHEMA)
    assert len(run_names(active)) == runs  # smoke: most_recent and max_window only, and the control
    assert active["seeds"] == seeds
    assert active["train"]["grad_accum"] == accumulation
    assert active["history_unit"] == "call"
    assert active["amax_reduction"] == "none"  # per rank, as the authors' code
    rates = active["learning_rates"]
    assert rates["high"] == pytest.approx(10 * rates["low"], rel=1e-12)  # the paper's ratio


def test_a_wrong_key_is_named(raw):
    with pytest.raises(WorkflowError, match="max_stpes"):
        validate({**raw, "train": {**raw["train"], "max_stpes": 3}}, SCHEMA)
    with pytest.raises(WorkflowError, match="'minute' is not one of"):
        validate({**raw, "history_unit": "minute"}, SCHEMA)
    with pytest.raises(WorkflowError, match="'all_ranks' is not one of"):
        validate({**raw, "amax_reduction": "all_ranks"}, SCHEMA)
    with pytest.raises(WorkflowError, match="has non-unique elements"):
        validate({**raw, "seeds": [0, 0]}, SCHEMA)


def test_the_runs_and_the_recipe(raw):
    active = profile_config(raw, "default")
    assert run_names(active) == DEFAULT_RUNS
    assert len(STUDY_RUNS) == 9
    assert recipe(active) == "max_window-lrlow-w40"
    assert run_name(None, "high", 0) == "bf16-lrhigh"
    assert run_name("exp_smooth", "low", 7) == "exp_smooth-lrlow-w7"
    assert run_settings(active, "max_window-lrlow-w40") == {"observer": "max_window", "rate": "low", "lr": 1.5e-5,
                                                            "warmup_steps": 40, "observer_options": {"window": 64},
                                                            "variant": None, "max_val": 15.0}
    assert run_settings(active, "bf16-lrhigh") == {"observer": None, "rate": "high", "lr": 1.5e-4,
                                                   "warmup_steps": 0, "observer_options": {}, "variant": None,
                                                   "max_val": 15.0}
    assert run_settings(active, "current-lrhigh-w40")["observer_options"] == {}
    # a run name outside the study is still a valid name (a user's own cell)
    assert run_settings(active, "exp_smooth-lrhigh-w3")["observer_options"] == {"alpha": 0.1}


def test_the_runs_of_fewer_observers(raw):
    active = {**profile_config(raw, "default"), "observers": ["max_window", "current"]}
    assert run_names(active) == ["bf16-lrlow", "bf16-lrhigh", "max_window-lrlow-w40", "max_window-lrlow-w0",
                                 "max_window-lrhigh-w40", "current-lrlow-w40", "current-lrhigh-w40",
                                 "max_window-lrlow-w40-coarse_scale"]
    assert "max_window-lrlow-w40-coarse_scale" not in run_names({**active, "variants": {}})  # no variant, no control


def test_the_negative_control_run(raw):
    active = profile_config(raw, "default")
    name = control_run(active, "coarse_scale")
    assert name == "max_window-lrlow-w40-coarse_scale" == run_names(active)[-1]
    settings = run_settings(active, name)
    assert (settings["observer"], settings["rate"], settings["warmup_steps"]) == ("max_window", "low", 40)
    assert (settings["variant"], settings["max_val"]) == ("coarse_scale", 2.0**-14)  # the recipe but its scale
    with pytest.raises(ValueError, match="variant 'other' is not among"):
        run_settings(active, "max_window-lrlow-w40-other")
    with pytest.raises(ValueError, match="no control run of variant"):
        control_run(active, "other")
    assert run_names({**active, "bf16_warmup_steps": 8})[2] == recipe({"bf16_warmup_steps": 8})


def test_train_config_per_rate_and_seed(raw):
    smoke = profile_config(raw, "smoke")
    config = train_config(smoke, "high", seed=3)
    assert (config.max_steps, config.seq_len, config.lr, config.seed, config.grad_accum) == (12, 64, 1.5e-4, 3, 2)
    assert not config.progress
    low = train_config(smoke, "low")
    assert (low.lr, low.seed) == (1.5e-5, 0)
    assert {k: v for k, v in vars(low).items() if k not in ("lr",)} == {
        k: v for k, v in vars(train_config(smoke, "high", 0)).items() if k not in ("lr",)}


def test_bad_values_are_named(raw):
    active = profile_config(raw, "default")
    with pytest.raises(ValueError, match="run name 'maxwindow-lr-w3' is not"):
        run_settings(active, "maxwindow-lr-w3")
    with pytest.raises(ValueError, match="unknown observer 'max_windows'"):
        run_settings(active, "max_windows-lrlow-w40")
    with pytest.raises(ValueError, match=r"bf16_warmup_steps 200 must be below train\.max_steps 160"):
        profile_config({**raw, "bf16_warmup_steps": 200}, "default")
    with pytest.raises(ValueError, match=r"maxwindow_hif8\.format: unknown format 'hif9'; valid formats: e4m3"):
        profile_config({**raw, "format": "hif9"}, "default")
    with pytest.raises(ValueError, match=r"learning_rates: high 1e-05 must be above low 1\.5e-05"):
        profile_config({**raw, "learning_rates": {"high": 1e-5, "low": 1.5e-5}}, "default")
    with pytest.raises(ValueError, match=r"observers must include max_window \(the recipe\)"):
        profile_config({**raw, "observers": ["most_recent", "current"]}, "default")
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        active_profile(raw, "huge", "maxwindow_hif8")
