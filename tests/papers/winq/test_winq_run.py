"""One low-bit QAT run per method on a tiny model: the checkpoint and its metadata, the interpolation count, the
validation curve, the saved scales (the reloaded model has the trained effective weights bit for bit), the
diagnostics' records (paired at the same boundaries in every method), resume after a kill (the same weights and
records), the command line, and bad arguments named."""

import csv
import json

import pytest
import torch
from paper_testing import KilledError, build_tiny_setup, killed_train
from safetensors.torch import load_file
from torch.nn.utils import parametrize
from winq_testing import EVAL_SEQUENCES, MICRO_BATCH, SEQ_LEN, train_config

import common.data.shards as shards
import common.qat.run as skeleton
from common.data import read_jsonl, token_stream
from common.io import read_json
from common.models import count_parameters, load_float_model, load_model
from common.qat.lowbit_io import LOWBIT_RECORD_VERSION, load_lowbit_model
from common.quantizers import lowbit_selection
from common.train import evaluate_loss
from papers.winq.__main__ import main
from papers.winq.diagnostics import (
    MECHANISM_FIELDS,
    MECHANISM_FILE,
    STAGNATION_FILE,
    STAGNATION_SEED,
    fixed_batches,
)
from papers.winq.method import WinQ
from papers.winq.run import NoiseState, winq_run

METHODS = ("baseline", "winq", "interpolation", "noise")
EVERY = {"baseline": None, "winq": 2, "interpolation": 2, "noise": None}
SIGMA = {"baseline": 0.0, "winq": 1e-3, "interpolation": 0.0, "noise": 1e-3}
BATCHES = 2  # the stagnation statistic's batches (the authors' 20 would cost 60 passes of a 6-step run)
DIAGNOSTICS = {"diagnostics_every": 2, "stagnation_batches": BATCHES}
REAL_TRAIN = skeleton.train  # the QAT run skeleton's training loop (patched to spy and to kill)


def effective_weights(model):
    """``{layer: Q(W)}`` of every quantized layer, noise-free (eval mode; the model's mode is restored)."""
    was_training = model.training
    model.eval()
    weights = {name: module.weight.detach().clone() for name, module in model.named_modules()
               if parametrize.is_parametrized(module, "weight")}
    model.train(was_training)
    return weights


def spy_train(captured):
    """``train`` that also records the training tokens, the hooks and the effective weights at the end of training
    into ``captured``."""
    def train(model, tokens, *args, **kwargs):
        summary = REAL_TRAIN(model, tokens, *args, **kwargs)
        captured.update(tokens=tokens, hooks=kwargs["hooks"], weights=effective_weights(model))
        return summary

    return train


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return build_tiny_setup(tmp_path_factory.mktemp("winq"))


@pytest.fixture(scope="module")
def runs(setup):
    """Every method at 2 bits, 6 steps, interpolation every 2 steps, seed 5 (data order and noise), the diagnostics'
    boundaries every 2 steps in every method: ``{method: (metadata, run dir, out, captured)}``."""
    out = {}
    with pytest.MonkeyPatch.context() as patch:
        for method in METHODS:
            captured = {}
            patch.setattr(skeleton, "train", spy_train(captured))
            meta = winq_run(setup / "base", setup / "train.jsonl", setup / "valid.jsonl", train_config(seed=5),
                            setup / "runs" / method, setup / "models" / method, bits=2, method=method,
                            every=EVERY[method], noise_sigma=SIGMA[method], **DIAGNOSTICS)
            out[method] = (meta, setup / "runs" / method, setup / "models" / method, captured)
    return out


@pytest.mark.parametrize("method", METHODS)
def test_the_checkpoint_and_its_metadata(setup, runs, method):
    meta, run_dir, out, captured = runs[method]
    base, tokenizer = load_model(setup / "base")
    interpolates = method in ("winq", "interpolation")
    assert meta["qat"] == {"format_version": LOWBIT_RECORD_VERSION, "bits": 2, "activation_bits": None,
                           "hadamard": False, "layers": lowbit_selection(base),
                           "recipe": {"type": "lowbit", "bits": 2, "activation_bits": None, "hadamard": False,
                                      "name": None},
                           "method": method,
                           "every": 2 if interpolates else None, "strength": 0.8 if interpolates else None,
                           "noise_sigma": SIGMA[method], "noise_seed": 5,
                           "diagnostics": {"every": 2, "stagnation_batches": BATCHES, "stagnation_seed": 1000},
                           # N // K = 6 // 2: after optimizer steps 2, 4 and 6 counted from 1 (0-based 1, 3, 5)
                           "interpolations": 3 if interpolates else 0}
    assert meta["training"]["config"]["seed"] == 5  # the data order's seed is the noise's
    assert len(meta["qat"]["layers"]) == 4 * 7  # q, k, v, o, gate, up, down of 4 blocks
    assert meta["init"] == str(setup / "base")
    assert meta["train_split"] == str(setup / "train.jsonl")
    assert meta["parameters"] == count_parameters(base)
    assert meta["train_tokens"] == token_stream(tokenizer, read_jsonl(setup / "train.jsonl")).numel()
    assert meta["training"]["steps"] == 6
    assert meta["training"]["tokens"] == 6 * 2 * 16
    assert json.loads((out / "lowbit_metadata.json").read_text()) == meta
    assert read_json(run_dir / "qat.json") == {k: v for k, v in meta["qat"].items() if k != "interpolations"}
    assert isinstance(captured["hooks"].method_hooks, WinQ if interpolates else NoiseState)
    assert [int(r["step"]) for r in rows(run_dir / "eval_log.csv")] == [1, 3, 5]
    assert [int(r["step"]) for r in rows(run_dir / "train_log.csv")] == [0, 1, 2, 3, 4, 5]
    assert not (run_dir / "checkpoint.pt").exists()
    plain = load_float_model(out)  # a plain HF model of the latent weights (load_model loads it as the QAT run)
    assert not any(parametrize.is_parametrized(m, "weight") for m in plain.modules())
    layer = "model.layers.0.mlp.gate_proj"
    assert not torch.equal(plain.get_submodule(layer).weight, base.get_submodule(layer).weight)


@pytest.mark.parametrize("method", METHODS)
def test_reloaded_model_has_the_trained_effective_weights(setup, runs, method):
    meta, run_dir, out, captured = runs[method]
    model, tokenizer, handle = load_lowbit_model(out)
    assert handle.names == meta["qat"]["layers"]
    assert handle.bits == 2
    assert handle.noise.sigma == 0.0
    assert not model.training
    reloaded = effective_weights(model)
    assert list(reloaded) == list(captured["weights"])
    for name, weight in captured["weights"].items():
        assert torch.equal(reloaded[name], weight), name
        assert torch.equal(handle.quantized_weight(name), weight), name
    scales = load_file(out / "lowbit_scales.safetensors")
    assert sorted(scales) == sorted(f"{name}.alpha" for name in meta["qat"]["layers"])
    assert scales["model.layers.0.mlp.gate_proj.alpha"].shape == (172, 1)
    # the last logged validation loss (after step 5, eval mode) is the reloaded model's, to the last bit
    val_tokens = token_stream(tokenizer, read_jsonl(setup / "valid.jsonl"))
    last = rows(run_dir / "eval_log.csv")[-1]
    assert evaluate_loss(model, val_tokens, SEQ_LEN, EVAL_SEQUENCES, MICRO_BATCH)["val_loss"] == float(last["val_loss"])


@pytest.mark.parametrize("method", METHODS)
def test_the_diagnostics_records(runs, method):
    _, run_dir, _, captured = runs[method]
    mechanism, stagnation = records(run_dir / MECHANISM_FILE), records(run_dir / STAGNATION_FILE)
    assert mechanism == captured["hooks"].mechanism
    assert [r["steps_taken"] for r in mechanism] == [2, 4, 6]  # the boundaries K, 2K, 3K of every method
    assert all(set(r) == set(MECHANISM_FIELDS) for r in mechanism)  # (JSONL keys are sorted)
    assert all(r["interpolated"] == (EVERY[method] is not None) for r in mechanism)
    assert all(r["codes_changed_by_interpolation"] == 0.0 for r in mechanism)  # Q(0.2 W + 0.8 Q(W)) = Q(W)
    assert mechanism[-1]["near_boundary_before"] is None  # no period after the last step
    if EVERY[method] is None:
        assert all(r["near_boundary_after"] == r["near_boundary_before"] for r in mechanism)
    assert [r["steps_taken"] for r in stagnation] == [2, 4, 6]  # the evaluations
    assert all(r["batches"] == BATCHES and r["sequences_per_batch"] == 2 for r in stagnation)
    assert all(0 < r["relative_grad_norm"] < 1 for r in stagnation)


def test_the_stagnation_batches_come_from_the_tokens_the_run_trains_on(setup, runs, tmp_path, monkeypatch):
    """The fixed batches are drawn from the training split the skeleton loaded (``Attachment.prepare``): the same
    for every method, and the run tokenizes each split once."""
    for method in METHODS:
        captured = runs[method][3]
        expected = fixed_batches(captured["tokens"], SEQ_LEN, MICRO_BATCH, BATCHES, STAGNATION_SEED)
        assert torch.equal(captured["hooks"].batches, expected), method
    assert captured["hooks"].batches.shape == (BATCHES, MICRO_BATCH, SEQ_LEN + 1)
    tokenized = []
    real = shards.token_stream
    monkeypatch.setattr(shards, "token_stream", lambda *args: tokenized.append(1) or real(*args))
    winq_run(setup / "base", setup / "train.jsonl", setup / "valid.jsonl", train_config(max_steps=2),
             tmp_path / "run", tmp_path / "out", bits=2, method="baseline", stagnation_batches=BATCHES)
    assert len(tokenized) == 2  # the training and the validation split


def test_the_first_period_is_paired_with_the_baseline(runs):
    """Interpolation only has the baseline's trajectory up to its first interpolation: the same first record but
    for what the interpolation did."""
    baseline, interpolation = (records(runs[m][1] / MECHANISM_FILE)[0] for m in ("baseline", "interpolation"))
    same = ("period", "step", "travel", "weights", "codes_changed", "near_boundary_before", "clipped_before")
    assert {k: interpolation[k] for k in same} == {k: baseline[k] for k in same}
    assert interpolation["near_boundary_after"] != baseline["near_boundary_after"]


def test_each_component_changes_the_training(runs):
    final = {method: runs[method][3]["weights"]["model.layers.1.self_attn.q_proj"] for method in METHODS}
    for method in ("winq", "interpolation", "noise"):
        assert not torch.equal(final[method], final["baseline"]), method
    assert not torch.equal(final["winq"], final["interpolation"])  # noise on top of interpolation


def test_a8_setting_reloads_with_its_input_quantization(setup, tmp_path):
    meta = winq_run(setup / "base", setup / "train.jsonl", setup / "valid.jsonl", train_config(max_steps=2),
                    tmp_path / "run", tmp_path / "out", bits=1.58, activation_bits=8, method="baseline",
                    stagnation_batches=BATCHES)
    assert (meta["qat"]["bits"], meta["qat"]["activation_bits"]) == (1.58, 8)
    model, _, handle = load_lowbit_model(tmp_path / "out")
    assert (handle.bits, handle.activation_bits) == (1.58, 8)
    assert len(model.get_submodule("model.layers.0.mlp.up_proj")._forward_pre_hooks) == 1


@pytest.mark.parametrize("method", ["winq", "noise"])
def test_a_killed_run_resumes_to_the_uninterrupted_weights(setup, runs, tmp_path, monkeypatch, method):
    """KilledError after step 3 (checkpoint after step 2), rerun: the same weights and scales as uninterrupted."""
    arguments = (setup / "base", setup / "train.jsonl", setup / "valid.jsonl", train_config(seed=5),
                 tmp_path / "run", tmp_path / "out")
    options = {"bits": 2, "method": method, "every": EVERY[method], "noise_sigma": SIGMA[method], **DIAGNOSTICS}
    monkeypatch.setattr(skeleton, "train", killed_train(REAL_TRAIN, 3))
    with pytest.raises(KilledError):
        winq_run(*arguments, **options)
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    captured = {}
    monkeypatch.setattr(skeleton, "train", spy_train(captured))
    meta = winq_run(*arguments, **options)
    assert meta["training"]["resumed_from"] == 3
    assert meta["qat"]["interpolations"] == runs[method][0]["qat"]["interpolations"]
    for name, weight in runs[method][3]["weights"].items():
        assert torch.equal(captured["weights"][name], weight), name
    assert [int(r["step"]) for r in rows(tmp_path / "run" / "eval_log.csv")] == [1, 3, 5]
    for name in (MECHANISM_FILE, STAGNATION_FILE):  # the records of the uninterrupted run, to the byte
        assert (tmp_path / "run" / name).read_bytes() == (runs[method][1] / name).read_bytes(), name


def test_a_checkpoint_of_other_qat_settings_is_not_resumed(setup, tmp_path, monkeypatch):
    arguments = (setup / "base", setup / "train.jsonl", setup / "valid.jsonl", train_config(), tmp_path / "run",
                 tmp_path / "out")
    monkeypatch.setattr(skeleton, "train", killed_train(REAL_TRAIN, 3))
    with pytest.raises(KilledError):
        winq_run(*arguments, bits=2, method="noise", noise_sigma=1e-3, stagnation_batches=BATCHES)
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    monkeypatch.setattr(skeleton, "train", REAL_TRAIN)
    meta = winq_run(*arguments, bits=2, method="noise", noise_sigma=2e-3,  # same TrainConfig, other noise
                    stagnation_batches=BATCHES)
    assert meta["training"]["resumed_from"] == 0
    assert read_json(tmp_path / "run" / "qat.json")["noise_sigma"] == 2e-3


def test_the_train_step(setup, runs, tmp_path):
    config = {"settings": {"w2": {"bits": 2, "activation_bits": None}}, "study_settings": ["w2"], "methods": ["winq"],
              "compared": {"w2": ["winq"]}, "figure_methods": [], "seeds": [0], "figure_seeds": [0],
              "interpolation": {"fraction": {"low_bit": 1 / 3}, "strength": 0.8}, "noise": {"sigma": 1e-3},
              "learning_rates": {"low_bit": 1e-3},
              "diagnostics": {"stagnation_batches": BATCHES, "stagnation_seed": STAGNATION_SEED},
              "train": {"max_steps": 6, "seq_len": SEQ_LEN, "micro_batch_size": MICRO_BATCH, "warmup_steps": 1,
                        "weight_decay": 0.0, "eval_every": 2, "eval_sequences": EVAL_SEQUENCES,
                        "checkpoint_every": 3}}
    argv = ["train", "--config-json", json.dumps(config), "--run", "w2-winq", "--seed", "5",
            "--init", str(setup / "base"),
            "--train", str(setup / "train.jsonl"), "--validation", str(setup / "valid.jsonl"),
            "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    qat = read_json(tmp_path / "out" / "lowbit_metadata.json")["qat"]
    assert qat == runs["winq"][0]["qat"]  # diagnostics every K = 2 with the config's batches and seed
    assert {r["batches"] for r in records(tmp_path / "run" / STAGNATION_FILE)} == {BATCHES}
    scales, expected = (load_file(path / "lowbit_scales.safetensors") for path in (tmp_path / "out", runs["winq"][2]))
    assert scales.keys() == expected.keys()
    for key, alpha in expected.items():  # the same run as the fixture's
        assert torch.equal(scales[key], alpha), key
    assert main([*argv[:4], "w2-sam", *argv[5:]]) == 2


def test_bad_arguments_name_the_value(setup, tmp_path):
    def call(**options):
        winq_run(setup / "base", options.pop("train", setup / "train.jsonl"), setup / "valid.jsonl", train_config(),
                 tmp_path / "r", tmp_path / "o", **{"bits": 2, **options})

    with pytest.raises(ValueError, match=r"unknown method 'sam'; valid: baseline, winq, interpolation, noise"):
        call(method="sam")
    with pytest.raises(ValueError, match=r"method 'winq' interpolates: every must be an integer >= 1, got None"):
        call(method="winq", noise_sigma=1e-3)
    with pytest.raises(ValueError, match=r"method 'interpolation' interpolates: every must be an integer >= 1, got 0"):
        call(method="interpolation", every=0)
    with pytest.raises(ValueError, match=r"method 'baseline' does not interpolate: every must be None, got 2"):
        call(method="baseline", every=2)
    with pytest.raises(ValueError, match=r"method 'noise' needs noise_sigma > 0, got 0\.0"):
        call(method="noise")
    with pytest.raises(ValueError, match=r"method 'interpolation' needs noise_sigma 0, got 0\.001"):
        call(method="interpolation", every=2, noise_sigma=1e-3)
    with pytest.raises(ValueError, match=r"noise_sigma must be a number >= 0, got -1"):
        call(method="baseline", noise_sigma=-1)
    with pytest.raises(ValueError, match=r"unknown weight bit width 5; valid: 1, 1\.58, 2, 3, 4"):
        call(bits=5, method="baseline")
    with pytest.raises(ValueError, match=r"no train split at 'missing\.jsonl'"):
        call(method="baseline", train="missing.jsonl")
    with pytest.raises(ValueError, match=r"unknown activation bit width 4; valid: None \(A16\), 8"):
        call(method="baseline", activation_bits=4)
    with pytest.raises(ValueError, match=r"period 3 differs from the interpolation's every 2"):
        call(method="interpolation", every=2, diagnostics_every=3)
    with pytest.raises(ValueError, match=r"period must be an integer >= 1 or None, got 0"):
        call(method="baseline", diagnostics_every=0)
    with pytest.raises(ValueError, match=r"count must be an integer >= 1, got 0"):
        call(method="baseline", stagnation_batches=0)
    assert not (tmp_path / "r").exists()
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match=r"is not a low-bit QAT checkpoint: no lowbit_scales\.safetensors"):
        load_lowbit_model(setup / "base")
