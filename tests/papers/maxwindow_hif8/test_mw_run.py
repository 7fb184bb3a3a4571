"""One continual-pretraining run: the BF16 baseline trains plain, a QAT run quantizes exactly from the warmup
step on and writes its telemetry, and the saturation summary counts what the telemetry holds."""

import csv

import pytest
import torch
from paper_testing import build_tiny_setup

from common.models import load_model
from common.qat import TELEMETRY_FIELDS
from common.train import TrainConfig
from papers.maxwindow_hif8.run import qat_run, saturation_summary


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return build_tiny_setup(tmp_path_factory.mktemp("mw"))


def config():
    return TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, lr=1e-3, warmup_steps=1, eval_every=3,
                       eval_sequences=2, checkpoint_every=3, progress=False)


def test_qat_run_quantizes_from_the_warmup_step(setup, tmp_path):
    meta = qat_run(setup / "base", setup / "train.jsonl", setup / "valid.jsonl", config(), tmp_path / "run",
                   tmp_path / "out", observer="max_window", warmup_steps=2)
    with open(tmp_path / "run" / "telemetry.csv") as f:
        rows = list(csv.DictReader(f))
    layers = meta["qat"]["layers"]
    assert layers == [f"model.layers.{b}.mlp.{p}_proj" for b in range(len(layers) // 3) for p in ("gate", "up", "down")]
    assert sorted({int(r["step"]) for r in rows}) == [2, 3, 4, 5]  # steps 0 and 1 are the unquantized warmup
    per_step = len(layers) * 3  # one row per layer and role (input, weight, grad_output)
    assert len(rows) == 4 * per_step
    assert sum(r["cold_start"] == "True" for r in rows) == per_step  # observers reset at step 2
    assert meta["qat"]["saturation"]["weight"]["calls"] == 3 * len(layers)
    trained, base = load_model(tmp_path / "out")[0], load_model(setup / "base")[0]
    assert not torch.equal(trained.model.layers[0].mlp.gate_proj.weight, base.model.layers[0].mlp.gate_proj.weight)
    assert meta["training"]["steps"] == 6


def test_bf16_baseline_has_empty_telemetry(setup, tmp_path):
    meta = qat_run(setup / "base", setup / "train.jsonl", None, config(), tmp_path / "run", tmp_path / "out",
                   observer=None)
    assert meta["qat"]["layers"] == []
    assert meta["qat"]["saturation"] == {}
    assert (tmp_path / "run" / "telemetry.csv").read_text() == ",".join(TELEMETRY_FIELDS) + "\n"


def test_bad_arguments_name_the_value(setup, tmp_path):
    with pytest.raises(ValueError, match="unknown observer 'window'"):
        qat_run(setup / "base", setup / "train.jsonl", None, config(), tmp_path / "r", tmp_path / "o",
                observer="window")
    with pytest.raises(ValueError, match=r"warmup_steps must be in \[0, max_steps=6\], got 7"):
        qat_run(setup / "base", setup / "train.jsonl", None, config(), tmp_path / "r", tmp_path / "o",
                observer="current", warmup_steps=7)
    with pytest.raises(ValueError, match=r"no train split at 'missing\.jsonl'"):
        qat_run(setup / "base", "missing.jsonl", None, config(), tmp_path / "r", tmp_path / "o", observer=None)


def test_saturation_summary_counts_exactly():
    def row(role, cold_start, overflow, over_range, clipped):
        return {"role": role, "cold_start": cold_start, "overflow": overflow, "over_range_fraction": over_range,
                "clipped_fraction": clipped}

    rows = [row("input", True, False, 0.0, 0.0), row("input", False, True, 0.5, 0.25),
            row("input", False, False, 0.0, 0.0), row("weight", False, False, 0.0, 0.0)]
    assert saturation_summary(rows) == {
        "input": {"calls": 2, "overflow_rate": 0.5, "mean_over_range": 0.25, "max_over_range": 0.5,
                  "mean_clipped": 0.125},
        "weight": {"calls": 1, "overflow_rate": 0.0, "mean_over_range": 0.0, "max_over_range": 0.0,
                   "mean_clipped": 0.0}}
