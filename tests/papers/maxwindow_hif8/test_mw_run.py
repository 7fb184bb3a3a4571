"""One continual-pretraining run with gradient accumulation: the BF16 baseline trains plain, a QAT run quantizes
exactly from the warmup step on, records one telemetry row per layer, role and call (``grad_accum`` calls a step)
and its history unit, resumes after a kill to the uninterrupted weights and telemetry, never resumes a checkpoint of
other QAT settings, and the ``train`` step passes the config's seed, history unit and accumulation."""

import gzip
import json

import pytest
import torch
from paper_testing import KilledError, build_tiny_setup, killed_train

import common.qat.run as skeleton
from common.io import read_json
from common.models import load_model
from common.quantizers import TELEMETRY_FIELDS, saturation_summary
from common.train import TrainConfig
from papers.maxwindow_hif8.__main__ import main
from papers.maxwindow_hif8.claims import Artifact, telemetry_check
from papers.maxwindow_hif8.run import TELEMETRY_FILE, maxwindow_run
from papers.maxwindow_hif8.study import read_telemetry

REAL_TRAIN = skeleton.train
ROLES = ("input", "weight", "grad_output")


def config(**changes):
    """6 steps of 2 micro-batches of 2 x 16 tokens, validation after steps 2 and 5, a checkpoint after step 2."""
    return TrainConfig(**{"max_steps": 6, "seq_len": 16, "micro_batch_size": 2, "grad_accum": 2, "lr": 1e-3,
                          "warmup_steps": 1, "eval_every": 3, "eval_sequences": 2, "checkpoint_every": 3,
                          "progress": False, **changes})


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return build_tiny_setup(tmp_path_factory.mktemp("mw"))


def train_run(setup, root, *, observer="max_window", history_unit="call", warmup_steps=2, **changes):
    return maxwindow_run(setup / "base", setup / "train.jsonl", setup / "valid.jsonl", config(**changes),
                         root / "run", root / "out", observer=observer, warmup_steps=warmup_steps,
                         observer_options={"window": 3} if observer == "max_window" else {},
                         history_unit=history_unit)


@pytest.fixture(scope="module")
def runs(setup, tmp_path_factory):
    """The uninterrupted max_window runs (warmup 2) of each history unit: ``{unit: (metadata, root)}``."""
    out = {}
    for unit in ("call", "step"):
        root = tmp_path_factory.mktemp(f"run-{unit}")
        out[unit] = (train_run(setup, root, history_unit=unit), root)
    return out


def weights(path):
    return load_model(path)[0].state_dict()


@pytest.mark.parametrize("unit", ["call", "step"])
def test_a_qat_run_quantizes_every_call_from_the_warmup_step(setup, runs, unit):
    meta, root = runs[unit]
    rows = read_telemetry(root / "run" / TELEMETRY_FILE)
    layers = meta["qat"]["layers"]
    assert layers == [f"model.layers.{b}.mlp.{p}_proj" for b in range(len(layers) // 3) for p in ("gate", "up", "down")]
    per_call = len(layers) * 3  # one row per layer and role (input, weight, grad_output)
    assert len(rows) == 4 * 2 * per_call  # steps 2..5 (0 and 1 are the unquantized warmup), 2 micro-batches each
    for step in range(2, 6):
        for layer in layers:
            for role in ROLES:
                assert sum(r["step"] == step and r["layer"] == layer and r["role"] == role for r in rows) == 2
    cold = [r for r in rows if r["cold_start"]]
    assert {r["step"] for r in cold} == {2}  # observers reset at step 2
    # "call": the second micro-batch predicts from the first's amax; "step": nothing until step 2 is committed
    assert len(cold) == per_call * (1 if unit == "call" else 2)
    assert meta["qat"]["saturation"] == saturation_summary(rows)
    assert meta["qat"]["saturation"]["weight"]["calls"] == (8 - len(cold) // per_call) * len(layers)
    assert set(meta["qat"]["saturation"]["input"]) >= {"rel_error_overflow", "rel_error_no_overflow",
                                                       "overflow_rows", "mean_mantissa_bits_lost"}
    assert all(0 <= r["rel_error"] < 1 for r in rows)
    assert read_json(root / "run" / "saturation.json") == meta["qat"]["saturation"]
    # the claims' accounting holds on the real telemetry: 2 calls per layer, role and HiF8 step
    check = telemetry_check(("max_window-lrlow-w2", 0), Artifact("t", rows),
                            Artifact("s", read_json(root / "run" / "saturation.json")), 2, 6, 2)
    assert check.passed, check.measured
    assert not telemetry_check(("max_window-lrlow-w2", 0), Artifact("t", rows),
                               Artifact("s", read_json(root / "run" / "saturation.json")), 2, 6, 1).passed


@pytest.mark.parametrize("unit", ["call", "step"])
def test_the_record_holds_the_history_unit_and_the_accumulation(setup, runs, unit):
    meta, root = runs[unit]
    record = {"observer": "max_window", "format": "hif8", "warmup_steps": 2, "max_val": 15.0,
              "observer_options": {"window": 3}, "history_unit": unit, "layers": meta["qat"]["layers"],
              "recipe": {"type": "delayed_scaling", "format": "hif8", "max_val": 15.0, "observer": "max_window",
                         "observer_options": {"window": 3}, "history_unit": unit,
                         "roles": ["input", "weight", "grad_output"], "name": None, "amax_reduction": "none"}}
    assert read_json(root / "run" / "qat.json") == record
    assert meta["qat"] == {**record, "saturation": meta["qat"]["saturation"]}
    assert json.loads((root / "out" / "lowbit_metadata.json").read_text()) == meta
    assert meta["training"]["config"]["grad_accum"] == 2
    assert meta["training"]["tokens"] == 6 * 2 * 2 * 16
    assert meta["training"]["resumed_from"] == 0
    assert not (root / "run" / "checkpoint.pt").exists()
    trained, base = weights(root / "out"), weights(setup / "base")
    name = "model.layers.0.mlp.gate_proj.weight"
    assert not torch.equal(trained[name], base[name])


def test_the_history_unit_changes_the_training(runs):
    call, step = (weights(runs[unit][1] / "out") for unit in ("call", "step"))
    assert any(not torch.equal(call[k], step[k]) for k in call)


def test_bf16_baseline_has_empty_telemetry(setup, tmp_path):
    meta = maxwindow_run(setup / "base", setup / "train.jsonl", None, config(max_steps=2), tmp_path / "run",
                         tmp_path / "out", observer=None)
    assert meta["qat"] == {"observer": None, "format": None, "warmup_steps": 0, "max_val": 15.0,
                           "observer_options": {}, "history_unit": None, "layers": [], "recipe": None,
                           "saturation": {}}
    assert gzip.decompress((tmp_path / "run" / TELEMETRY_FILE).read_bytes()) == \
        (",".join(TELEMETRY_FIELDS) + "\n").encode()
    assert read_json(tmp_path / "run" / "saturation.json") == {}


@pytest.mark.parametrize("unit", ["call", "step"])
def test_a_killed_run_resumes_to_the_uninterrupted_weights_and_telemetry(setup, runs, tmp_path, monkeypatch, unit):
    """KilledError after step 3 (quantized since step 2; checkpoint after step 2), rerun: the weights, telemetry and
    saturation summary of the uninterrupted run, to the last bit."""
    monkeypatch.setattr(skeleton, "train", killed_train(REAL_TRAIN, 3))
    with pytest.raises(KilledError):
        train_run(setup, tmp_path, history_unit=unit)
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    monkeypatch.setattr(skeleton, "train", REAL_TRAIN)
    meta = train_run(setup, tmp_path, history_unit=unit)
    expected, root = runs[unit]
    assert meta["training"]["resumed_from"] == 3
    assert meta["qat"] == expected["qat"]
    resumed, uninterrupted = weights(tmp_path / "out"), weights(root / "out")
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), name
    assert (tmp_path / "run" / TELEMETRY_FILE).read_bytes() == (root / "run" / TELEMETRY_FILE).read_bytes()
    assert [r.split(",")[0] for r in (tmp_path / "run" / "train_log.csv").read_text().splitlines()] == [
        "step", "0", "1", "2", "3", "4", "5"]


@pytest.mark.parametrize("other", [{"observer": "most_recent"}, {"history_unit": "step"}, {"warmup_steps": 1}])
def test_a_checkpoint_of_other_qat_settings_is_not_resumed(setup, tmp_path, monkeypatch, other):
    """The same TrainConfig, another QAT setting: the skeleton's record guard starts over."""
    monkeypatch.setattr(skeleton, "train", killed_train(REAL_TRAIN, 3))
    with pytest.raises(KilledError):
        train_run(setup, tmp_path)
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    monkeypatch.setattr(skeleton, "train", REAL_TRAIN)
    meta = train_run(setup, tmp_path, **other)
    assert meta["training"]["resumed_from"] == 0
    record = read_json(tmp_path / "run" / "qat.json")
    assert {k: record[k] for k in other} == other
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_the_train_step(setup, runs, tmp_path):
    settings = {"format": "hif8", "max_val": 15.0, "history_unit": "step", "amax_reduction": "none",
                "observers": ["max_window"],
                "observer_options": {"max_window": {"window": 3}}, "learning_rates": {"high": 1e-2, "low": 1e-3},
                "bf16_warmup_steps": 2,
                "train": {"max_steps": 6, "seq_len": 16, "micro_batch_size": 2, "grad_accum": 2, "warmup_steps": 1,
                          "eval_every": 3, "eval_sequences": 2, "checkpoint_every": 3}}
    argv = ["train", "--config-json", json.dumps(settings), "--run", "max_window-lrlow-w2", "--init",
            str(setup / "base"), "--train", str(setup / "train.jsonl"), "--validation", str(setup / "valid.jsonl"),
            "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    meta = read_json(tmp_path / "out" / "lowbit_metadata.json")
    assert meta["qat"] == runs["step"][0]["qat"]  # the fixture's run: seed 0, lr 1e-3
    assert (meta["training"]["config"]["seed"], meta["training"]["config"]["lr"]) == (0, 1e-3)
    for name, tensor in weights(runs["step"][1] / "out").items():
        assert torch.equal(weights(tmp_path / "out")[name], tensor), name
    assert main([*argv, "--seed", "1"]) == 0  # another seed: another cell (here the same folder, restarted)
    meta = read_json(tmp_path / "out" / "lowbit_metadata.json")
    assert (meta["training"]["config"]["seed"], meta["training"]["resumed_from"]) == (1, 0)


def test_bad_arguments_name_the_value(setup, tmp_path):
    def call(train="train.jsonl", **options):
        maxwindow_run(setup / "base", setup / train if train != "missing.jsonl" else train, None, config(),
                      tmp_path / "r", tmp_path / "o", **{"observer": "current", **options})

    with pytest.raises(ValueError, match="unknown observer 'window'"):
        call(observer="window")
    with pytest.raises(ValueError, match=r"warmup_steps must be in \[0, max_steps=6\], got 7"):
        call(warmup_steps=7)
    with pytest.raises(ValueError, match=r"no train split at 'missing\.jsonl'"):
        call(train="missing.jsonl", observer=None)
    with pytest.raises(ValueError, match=r"unknown history_unit 'epoch'; valid: call, step"):
        call(history_unit="epoch")
    assert not (tmp_path / "o").exists()
