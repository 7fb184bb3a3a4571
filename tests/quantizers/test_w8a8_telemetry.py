"""W8A8 saturation telemetry: rel_error and mantissa_bits_lost on a planted sequence of spikes, saturation_summary,
the column store (CSV and state round trip)."""

import csv
import math

import pytest
import torch
from torch import nn

from common.formats import get_format, round_to_format
from common.quantizers import TELEMETRY_FIELDS, attach_w8a8, saturation_summary
from common.quantizers.w8a8 import Telemetry, mantissa_bits_lost, relative_error
from common.recipes import DelayedScalingRecipe

# most_recent predicts the previous call's amax; max_val 15, HiF8. Step by step (s = float32(15 / prediction)):
# 0: amax 1, cold start (s = 15)
# 1: a 4x spike over the prediction 1 (s = 15, exact s = 3.75): 4 -> 60 (2 bits) vs 15 (3), -3 -> 45 vs 11.25 and
#    -2 -> 30 vs 7.5 lose one bit each, 1.0625 -> 15.94 vs 3.98 keeps 3; 1.0 and 0.5 are not over range
# 2: a 20x spike over 4 (s = 3.75, exact s = 0.1875): 80 -> 300 (1 bit) vs 15 (3 bits)
# 3: 327680 = 4096 x 80 (s = 0.1875): 61440 is clipped at 2^15 (1 bit at the maximum) vs 15 (3 bits)
# 4: back to amax 1: no value over range
PLANTED = [[1.0, -0.5, 0.25, 0.75, 0.0, 0.0], [4.0, -2.0, 1.0625, 0.5, 1.0, -3.0], [80.0, 1.0, 0.0, 0.0, 0.0, 0.0],
           [327680.0, 1.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0.5, 0.0, 0.0, 0.0, 0.0]]


def planted_rows():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 2))
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="most_recent"))
    for step, values in enumerate(PLANTED):
        handle.step(step)
        model(torch.tensor([values])).sum().backward()
    return handle, handle.telemetry_rows()


def explicit_rel_error(values, scale):
    """``||Q(t) - t|| / ||t||`` written out: HiF8 of ``t s`` divided back, float64 sums by ``math.fsum``."""
    t = torch.tensor(values)
    q = (round_to_format(t * scale, "hif8") / scale).tolist()
    return math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(q, values, strict=True))) / math.sqrt(
        math.fsum(b * b for b in values))


def test_planted_spikes():
    _, rows = planted_rows()
    inputs = [row for row in rows if row["role"] == "input"]
    assert [row["predicted_amax"] for row in inputs] == [1.0, 1.0, 4.0, 80.0, 327680.0]
    assert [row["scale"] for row in inputs] == [15.0, 15.0, 3.75, 0.1875, 15 / 327680]
    assert [row["overflow"] for row in inputs] == [False, True, True, True, False]
    assert [row["over_range_fraction"] for row in inputs] == [0.0, 4 / 6, 1 / 6, 1 / 6, 0.0]
    assert [row["clipped_fraction"] for row in inputs] == [0.0, 0.0, 0.0, 1 / 6, 0.0]
    assert [row["mantissa_bits_lost"] for row in inputs] == [0.0, 0.75, 2.0, 2.0, 0.0]
    for row, values in zip(inputs, PLANTED, strict=True):
        assert row["rel_error"] == pytest.approx(explicit_rel_error(values, row["scale"]), rel=1e-6, abs=0)
    assert inputs[3]["rel_error"] == pytest.approx(1 - 32768 / 61440, rel=1e-6)  # the clipped spike dominates
    assert all(row["mantissa_bits_lost"] == 0.0 and not row["overflow"] for row in rows if row["role"] == "weight")


def test_saturation_summary_of_the_planted_rows():
    _, rows = planted_rows()
    summary = saturation_summary(rows)
    inputs = [row for row in rows if row["role"] == "input"]
    errors = [row["rel_error"] for row in inputs]
    assert sorted(summary) == ["grad_output", "input", "weight"]
    assert summary["input"] == {
        "calls": 4, "overflow_rows": 3, "overflow_rate": 0.75, "mean_over_range": (4 / 6 + 1 / 6 + 1 / 6 + 0.0) / 4,
        "max_over_range": 4 / 6, "mean_clipped": (0.0 + 0.0 + 1 / 6 + 0.0) / 4,
        "rel_error_overflow": (errors[1] + errors[2] + errors[3]) / 3, "rel_error_no_overflow": errors[4],
        "mean_mantissa_bits_lost": (0.75 + 2.0 + 2.0) / 3}
    assert summary["weight"]["calls"] == 4
    assert summary["weight"]["overflow_rows"] == 0
    assert summary["weight"]["rel_error_overflow"] is None
    assert summary["weight"]["mean_mantissa_bits_lost"] is None
    assert summary["weight"]["rel_error_no_overflow"] == sum(r["rel_error"] for r in rows
                                                             if r["role"] == "weight" and not r["cold_start"]) / 4


def test_saturation_summary_by_hand():
    def row(role, cold_start, overflow, over_range=0.0, clipped=0.0, rel_error=0.0, bits=0.0):
        return {"role": role, "cold_start": cold_start, "overflow": overflow, "over_range_fraction": over_range,
                "clipped_fraction": clipped, "rel_error": rel_error, "mantissa_bits_lost": bits}

    rows = [row("input", True, False, rel_error=9.0), row("input", False, True, 0.5, 0.25, 0.125, 1.5),
            row("input", False, False, rel_error=0.0625), row("input", False, True, 0.25, 0.0, 0.375, 0.5),
            row("weight", False, False, rel_error=0.5), row("grad_output", True, False)]
    assert saturation_summary(rows) == {
        "grad_output": {"calls": 0, "overflow_rows": 0, "overflow_rate": 0.0, "mean_over_range": 0.0,
                        "max_over_range": 0.0, "mean_clipped": 0.0, "rel_error_overflow": None,
                        "rel_error_no_overflow": None, "mean_mantissa_bits_lost": None},
        "input": {"calls": 3, "overflow_rows": 2, "overflow_rate": 2 / 3, "mean_over_range": 0.25,
                  "max_over_range": 0.5, "mean_clipped": 0.25 / 3, "rel_error_overflow": 0.25,
                  "rel_error_no_overflow": 0.0625, "mean_mantissa_bits_lost": 1.0},
        "weight": {"calls": 1, "overflow_rows": 0, "overflow_rate": 0.0, "mean_over_range": 0.0,
                   "max_over_range": 0.0, "mean_clipped": 0.0, "rel_error_overflow": None,
                   "rel_error_no_overflow": 0.5, "mean_mantissa_bits_lost": None}}
    assert saturation_summary([]) == {}


def test_relative_error():
    assert relative_error(torch.tensor([3.0, 0.0]), torch.tensor([0.0, 4.0])) == 1.25  # ||(3, -4)|| / ||(0, 4)||
    assert relative_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert relative_error(torch.empty(0), torch.empty(0)) == 0.0
    assert relative_error(torch.tensor(1.0), torch.tensor(2.0)) == 0.5
    bf16 = torch.tensor([0.0, 1.0], dtype=torch.bfloat16)
    assert relative_error(bf16, torch.tensor([0.0, 2.0], dtype=torch.bfloat16)) == 0.5
    rows = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 12.0]])
    assert relative_error(torch.zeros(2, 3), rows) == 1.0
    torch.manual_seed(0)  # against a float64 computation, on a tensor of 2^20 values of magnitudes over 2^24
    t = torch.randn(64, 16384) * torch.rand(64, 16384).pow(6) * 1e3
    q = round_to_format(t * 15.0, "hif8") / 15.0
    exact = float(torch.linalg.vector_norm(q.double() - t.double()) / torch.linalg.vector_norm(t.double()))
    assert relative_error(q, t) == pytest.approx(exact, rel=1e-6)


def test_mantissa_bits_lost():
    hif8 = get_format("hif8")
    over = torch.tensor([4.0, 2.0, 1.0625, 3.0])
    assert mantissa_bits_lost(over, 15.0, 3.75, hif8) == 0.75
    assert mantissa_bits_lost(torch.tensor([80.0]), 3.75, 0.1875, hif8) == 2.0
    assert mantissa_bits_lost(torch.empty(0), 15.0, 3.75, hif8) == 0.0
    assert math.isnan(mantissa_bits_lost(over, 15.0, 3.75, get_format("int8")))


def test_column_store_csv_and_state(tmp_path):
    handle, rows = planted_rows()
    assert len(handle.telemetry) == len(rows) == 15
    handle.write_telemetry(tmp_path / "t.csv")
    with open(tmp_path / "t.csv") as f:
        written = list(csv.DictReader(f))
    assert tuple(written[0]) == TELEMETRY_FIELDS
    assert [{k: str(v) for k, v in row.items()} for row in rows] == written  # the dict rows, printed as str()
    state = handle.state_dict()["telemetry"]
    assert state["labels"] == {"layer": ["0"], "role": ["input", "weight", "grad_output"]}
    assert state["columns"]["amax"].dtype == torch.float64
    assert state["columns"]["overflow"].tolist() == [int(row["overflow"]) for row in rows]
    copy = Telemetry()
    copy.load_state_dict(state)
    assert copy.rows() == rows
    assert copy.step == 4
    handle.clear_telemetry()
    assert handle.telemetry_rows() == []
    assert copy.rows() == rows  # the state is a copy
