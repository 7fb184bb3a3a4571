"""Real weight tensors: measured vs predicted block MSE, and which tensors invert (a narrow and a wide one)."""

import pytest
import torch

from common.analysis import fit_sigma, tensor_block_mse
from common.theory import block_mse
from papers.microscaling_limits.tensors import tensor_cell

CONFIG = {"element": "e2m1", "tensors": {"block_sizes": [16, 8]}}  # unsorted: the two smallest are 8 and 16


@pytest.fixture(scope="module")
def weights():
    generator = torch.Generator().manual_seed(0)
    return {"wide.weight": torch.randn(64, 256, generator=generator) * 0.05,
            "narrow.weight": torch.randn(64, 256, generator=generator) * 0.005}


@pytest.fixture(scope="module")
def cell(weights):
    return tensor_cell("tiny", weights, CONFIG, ["ue4m3", "ue5m3"])


def test_the_numerics_behind_the_inversion(weights):
    """Independently of tensor_cell: with UE4M3 the narrow tensor's MSE at block 8 exceeds that at 16 (blocks
    flush to zero and scales are subnormal); UE5M3 and the wide tensor keep finer better."""
    mse = {(name, scale, n): tensor_block_mse(w, n, "e2m1", scale)["mse"]
           for name, w in weights.items() for scale in ("ue4m3", "ue5m3") for n in (8, 16)}
    assert mse[("narrow.weight", "ue4m3", 8)] > 2 * mse[("narrow.weight", "ue4m3", 16)]
    assert mse[("narrow.weight", "ue5m3", 8)] < mse[("narrow.weight", "ue5m3", 16)]
    for scale in ("ue4m3", "ue5m3"):
        assert mse[("wide.weight", scale, 8)] < mse[("wide.weight", scale, 16)]
    assert tensor_block_mse(weights["narrow.weight"], 8, "e2m1", "ue4m3")["zero_scale_fraction"] > 0.05


def test_cell_header(cell):
    assert cell["model"] == "tiny"
    assert cell["block_sizes"] == [16, 8]
    assert cell["inversion_blocks"] == [8, 16]
    assert cell["wall_time_s"] > 0


def test_rows_per_tensor_scale_and_block(cell, weights):
    assert [(r["name"], r["scale"], r["block_size"]) for r in cell["rows"]] == [
        (name, scale, n) for name in ("wide.weight", "narrow.weight") for scale in ("ue4m3", "ue5m3")
        for n in (16, 8)]
    for row in cell["rows"]:
        w = weights[row["name"]]
        assert row["std"] == fit_sigma(w)["std"]
        assert row["mse"] == tensor_block_mse(w, row["block_size"], "e2m1", row["scale"])["mse"]
        assert row["relative_mse"] == row["mse"] / row["std"] ** 2


def test_prediction_is_the_theory_at_the_fitted_sigma(cell):
    for row in cell["rows"]:
        theory = block_mse(row["std"], row["block_size"], "e2m1", row["scale"], "absmax")
        assert row["predicted_mse"] == theory["total"]
        assert row["predicted_zero_blocks"] == theory["zero_blocks"]
        assert row["prediction_error"] == abs(theory["total"] / row["mse"] - 1)
        assert row["prediction_error"] < 0.06  # Normal weights: the theory predicts the measured MSE


def test_stds_are_the_planted_ones(cell):
    stds = {r["name"]: r["std"] for r in cell["rows"]}
    assert stds["narrow.weight"] == pytest.approx(0.005, rel=0.02)
    assert stds["wide.weight"] == pytest.approx(0.05, rel=0.02)


def test_narrow_tensor_inverts_with_ue4m3_only(cell):
    assert [(t["name"], t["scale"], t["inverts"], t["predicted_inverts"]) for t in cell["tensors"]] == [
        ("narrow.weight", "ue4m3", True, True),
        ("narrow.weight", "ue5m3", False, False),
        ("wide.weight", "ue4m3", False, False),
        ("wide.weight", "ue5m3", False, False),
    ]
    by_key = {(r["name"], r["scale"], r["block_size"]): r for r in cell["rows"]}
    for t in cell["tensors"]:
        small, large = by_key[(t["name"], t["scale"], 8)], by_key[(t["name"], t["scale"], 16)]
        assert t["std"] == small["std"]
        assert t["inverts"] == (small["mse"] > large["mse"])
        assert t["predicted_inverts"] == (small["predicted_mse"] > large["predicted_mse"])


def test_scales_follow_the_argument(weights):
    out = tensor_cell("tiny", {"narrow.weight": weights["narrow.weight"]}, CONFIG, ("ue5m3",))
    assert {r["scale"] for r in out["rows"]} == {"ue5m3"}
    assert [(t["scale"], t["inverts"]) for t in out["tensors"]] == [("ue5m3", False)]


def test_bfloat16_weights_are_measured_exactly_widened(weights):
    narrow = weights["narrow.weight"].to(torch.bfloat16)
    out = tensor_cell("bf16", {"narrow.weight": narrow}, CONFIG, ["ue4m3"])
    assert [t["inverts"] for t in out["tensors"]] == [True]
    assert out["rows"][1]["mse"] == tensor_block_mse(narrow.float(), 8, "e2m1", "ue4m3")["mse"]
