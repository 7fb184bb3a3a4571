"""The study config: schema and semantic checks per profile, the 18-run grid and its run names."""

from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from common.config import active_profile
from papers.maxwindow_hif8.settings import profile_config, run_names, run_settings, train_config

ROOT = Path(__file__).resolve().parents[3] / "papers" / "maxwindow_hif8"
SCHEMA = str(ROOT / "config.schema.yaml")


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((ROOT / "config.yaml").read_text())["maxwindow_hif8"]


@pytest.mark.parametrize("profile", ["smoke", "default", "full"])
def test_every_profile_validates(raw, profile):
    validate(dict(raw), SCHEMA)
    active = profile_config(raw, profile)
    validate(active, SCHEMA)
    assert len(run_names(active)) == 2 + 4 * len(active["observers"])  # 18 with every observer, 10 in smoke


def test_a_wrong_key_is_named(raw):
    with pytest.raises(WorkflowError, match="max_stpes"):
        validate({**raw, "train": {**raw["train"], "max_stpes": 3}}, SCHEMA)


def test_the_grid_and_the_recipe(raw):
    active = profile_config(raw, "default")
    names = run_names(active)
    assert names[:2] == ["bf16-lrhigh", "bf16-lrlow"]
    assert names[2:6] == ["most_recent-lrhigh-w0", "most_recent-lrhigh-w40", "most_recent-lrlow-w0",
                          "most_recent-lrlow-w40"]
    assert "max_window-lrlow-w40" in names  # the paper's recipe
    assert run_settings(active, "max_window-lrlow-w40") == {"observer": "max_window", "rate": "low", "lr": 1.5e-5,
                                                            "warmup_steps": 40, "observer_options": {"window": 64}}
    assert run_settings(active, "bf16-lrhigh") == {"observer": None, "rate": "high", "lr": 3.0e-3,
                                                   "warmup_steps": 0, "observer_options": {}}


def test_train_config_per_rate(raw):
    smoke = profile_config(raw, "smoke")
    config = train_config(smoke, "high", seed=3)
    assert (config.max_steps, config.seq_len, config.lr, config.seed) == (12, 64, 3.0e-3, 3)


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
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        active_profile(raw, "huge", "maxwindow_hif8")
