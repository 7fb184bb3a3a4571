"""The Hessian cell on a tiny trained low-bit model: its record, mass fractions, determinism by seed, the fixed batch,
and the command-line step."""

import json
import math

import pytest
import torch
from paper_testing import build_tiny_setup
from winq_testing import SEQ_LEN, train_config

from common.io import read_json
from papers.winq.__main__ import main
from papers.winq.hessian import first_sequences, spectrum_cell
from papers.winq.run import winq_run

HESSIAN = {"probes": 2, "steps": 4, "sigma": 1.0e-3, "grid": 50, "near_zero": 0.01, "batch_sequences": 1}
DIM = 4 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64)  # q, o (64x64), k, v (32x64: 2 KV heads), gate, up, down


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A 2-bit WinQ model trained 6 steps; returns ``(setup root, checkpoint folder)``."""
    root = build_tiny_setup(tmp_path_factory.mktemp("winq_hessian"))
    winq_run(root / "base", root / "train.jsonl", root / "valid.jsonl", train_config(), root / "run", root / "out",
             bits=2, method="winq", every=2, noise_sigma=1e-3)
    return root, root / "out"


@pytest.fixture(scope="module")
def cell(model):
    root, out = model
    return spectrum_cell(out, root / "valid.jsonl", HESSIAN, SEQ_LEN, seed=0)


def test_the_cell_record(cell):
    assert set(cell) == {"grid", "density", "density_mass", "nodes", "weights", "largest_abs_eigenvalue",
                         "near_zero_threshold", "near_zero_mass", "negative_mass", "positive_mass", "probes", "steps",
                         "sigma", "seed", "dim", "parameter_names", "parameters", "bits", "activation_bits", "method",
                         "seq_len", "batch_sequences", "wall_time_s"}
    assert (cell["bits"], cell["activation_bits"], cell["method"]) == (2, None, "winq")
    assert (cell["probes"], cell["steps"], cell["sigma"], cell["seed"]) == (2, 4, 1.0e-3, 0)
    assert (cell["seq_len"], cell["batch_sequences"]) == (SEQ_LEN, 1)
    assert cell["parameters"] == DIM
    assert cell["dim"] == DIM
    assert cell["parameter_names"][0] == "model.layers.0.self_attn.q_proj.parametrizations.weight.original"
    assert len(cell["parameter_names"]) == 28
    assert len(cell["grid"]) == 50
    assert len(cell["density"]) == 50
    assert [len(n) for n in cell["nodes"]] == [4, 4]
    assert cell["wall_time_s"] >= 0
    json.dumps(cell)  # a JSON artifact


def test_mass_fractions_sum_to_one(cell):
    assert math.isclose(cell["near_zero_mass"] + cell["negative_mass"] + cell["positive_mass"], 1.0, abs_tol=1e-12)
    for weights in cell["weights"]:
        assert math.isclose(sum(weights), 1.0, abs_tol=1e-12)
    assert cell["largest_abs_eigenvalue"] == max(abs(t) for nodes in cell["nodes"] for t in nodes)
    assert cell["near_zero_threshold"] == 0.01 * cell["largest_abs_eigenvalue"]


def test_deterministic_by_seed(model, cell):
    root, out = model
    again = spectrum_cell(out, root / "valid.jsonl", HESSIAN, SEQ_LEN, seed=0)
    other = spectrum_cell(out, root / "valid.jsonl", HESSIAN, SEQ_LEN, seed=1)
    timeless = {k: v for k, v in cell.items() if k != "wall_time_s"}
    assert {k: v for k, v in again.items() if k != "wall_time_s"} == timeless
    assert other["nodes"] != cell["nodes"]


def test_first_sequences():
    tokens = torch.arange(10)
    assert torch.equal(first_sequences(tokens, 3, 3), torch.tensor([[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]))
    with pytest.raises(ValueError, match=r"token stream of 10 tokens is shorter than 3 sequences of 4 \+ 1 tokens"):
        first_sequences(tokens, 4, 3)


def test_the_hessian_step(model, cell, tmp_path, capsys):
    root, out = model
    config = {"hessian": HESSIAN, "train": {"seq_len": SEQ_LEN}}
    argv = ["hessian", "--config-json", json.dumps(config), "--model", str(out), "--split", str(root / "valid.jsonl"),
            "--out", str(tmp_path / "cell.json")]
    assert main(argv) == 0
    capsys.readouterr()  # the model loader's progress bars
    written = read_json(tmp_path / "cell.json")
    assert written["nodes"] == cell["nodes"]
    assert written["near_zero_mass"] == cell["near_zero_mass"]
    assert main([*argv[:4], str(tmp_path / "missing"), *argv[5:]]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"error: --model {str(tmp_path / 'missing')!r} does not exist"
