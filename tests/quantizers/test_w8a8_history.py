"""The amax-history unit of W8A8 delayed scaling: one entry per call (the authors') or per optimizer step, exact
predictions on a hand-built sequence of micro-batch calls, the state round trip mid-step, validation."""

import csv

import pytest
import torch
import transformers
from torch import nn

from common.qat import BF16Warmup
from common.quantizers import W8A8Layer, attach_w8a8
from common.recipes import HISTORY_UNITS, DelayedScalingRecipe
from common.train import TrainConfig, train

TINY = {"vocab_size": 128, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32}

# input amaxes of the micro-batch calls of steps 0..3 (0.0: an all-zero input, a skipped amax)
CALLS = [[1.0, 3.0], [2.0, 5.0, 4.0], [0.5, 0.0, 6.0], [1.0]]
# max_window(window=2), the amax the scale of each input call came from (its own on a cold start):
# "call": the last two calls' amaxes (the zero skipped): 1 (cold), 1 | 3, 3, 5 | 5, 4, 4 | 6
# "step": the last two steps' maxima 3, 5, 6, predicting a whole step: 1, 3 (cold) | 3, 3, 3 | 5, 5, 5 | 6
EXPECTED = {"call": ([1.0, 1.0, 3.0, 3.0, 5.0, 5.0, 4.0, 4.0, 6.0], [True] + [False] * 8),
            "step": ([1.0, 3.0, 3.0, 3.0, 3.0, 5.0, 5.0, 5.0, 6.0], [True, True] + [False] * 7)}


def window_recipe(window, unit):
    return DelayedScalingRecipe(observer="max_window", observer_options={"window": window}, history_unit=unit)


def run_calls(handle, model, calls, first_step=0):
    """``handle.step(t)`` then one forward + backward per micro-batch amax of step ``t`` (input ``[a, 0, 0, -a/2]``)."""
    for step, amaxes in enumerate(calls, start=first_step):
        handle.step(step)
        for amax in amaxes:
            model(torch.tensor([[amax, 0.0, 0.0, -amax / 2]])).sum().backward()


def input_rows(handle):
    return [row for row in handle.telemetry_rows() if row["role"] == "input"]


@pytest.mark.parametrize("unit", HISTORY_UNITS)
def test_predictions_across_steps_of_micro_batches(unit):
    model = nn.Sequential(nn.Linear(4, 2))
    handle = attach_w8a8(model, ["0"], window_recipe(2, unit))
    run_calls(handle, model, CALLS)
    rows = input_rows(handle)
    predicted, cold = EXPECTED[unit]
    assert [row["predicted_amax"] for row in rows] == predicted
    assert [row["cold_start"] for row in rows] == cold
    assert [row["step"] for row in rows] == [0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert [row["amax"] for row in rows] == [a for amaxes in CALLS for a in amaxes]
    # every role is one row per call: grad_output once per backward, like input and weight once per forward
    for role in ("weight", "grad_output"):
        assert [row["step"] for row in handle.telemetry_rows() if row["role"] == role] == [0, 0, 1, 1, 1, 2, 2, 2, 3]
    observer, quantizer = handle.observer("0", "input"), handle.layers["0"].quantizers["input"]
    assert observer.skipped == 1  # the zero amax, counted at its call in both units
    if unit == "call":
        assert observer.state_dict()["history"] == [6.0, 1.0]
        assert quantizer.pending is None
    else:
        assert observer.state_dict()["history"] == [5.0, 6.0]  # steps 1 and 2; step 3's maximum is still pending
        assert quantizer.pending == 1.0
        handle.step(4)
        assert observer.state_dict()["history"] == [6.0, 1.0]
        assert quantizer.pending is None


def test_most_recent_per_step_predicts_the_previous_steps_maximum():
    model = nn.Sequential(nn.Linear(4, 2))
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="most_recent", history_unit="step"))
    run_calls(handle, model, CALLS)
    assert [row["predicted_amax"] for row in input_rows(handle)] == [1.0, 3.0, 3.0, 3.0, 3.0, 5.0, 5.0, 5.0, 6.0]
    with torch.no_grad():  # evaluation during step 3 uses the history up to step 2, changes nothing
        model(torch.tensor([[100.0, 0.0, 0.0, 0.0]]))
    assert handle.observer("0", "input").predict() == 6.0
    assert handle.layers["0"].quantizers["input"].pending == 1.0


def test_units_agree_with_one_call_per_step():
    rows = {}
    for unit in HISTORY_UNITS:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 2))
        handle = attach_w8a8(model, ["0"], window_recipe(3, unit))
        run_calls(handle, model, [[a] for amaxes in CALLS for a in amaxes])
        rows[unit] = handle.telemetry_rows()
    assert rows["call"] == rows["step"]


@pytest.mark.parametrize("unit", HISTORY_UNITS)
def test_state_round_trip_mid_step_continues_identically(unit, tmp_path):
    def fresh():
        model = nn.Sequential(nn.Linear(4, 2))
        with torch.no_grad():
            model[0].weight.fill_(0.5)
        handle = attach_w8a8(model, ["0"], window_recipe(2, unit))
        return model, handle

    model, handle = fresh()
    run_calls(handle, model, CALLS[:2])  # stop after step 1: its maximum 5 is pending under "step"
    torch.save(handle.state_dict(), tmp_path / "state.pt")
    state = torch.load(tmp_path / "state.pt", weights_only=True)  # plain Python values only
    assert state["pending"]["0::input"] == (5.0 if unit == "step" else None)
    resumed_model, resumed = fresh()
    resumed.load_state_dict(state)
    run_calls(handle, model, CALLS[2:], first_step=2)
    run_calls(resumed, resumed_model, CALLS[2:], first_step=2)
    assert resumed.telemetry_rows() == handle.telemetry_rows()
    for key in ("observers", "pending", "enabled"):
        assert resumed.state_dict()[key] == handle.state_dict()[key]
    assert [row["predicted_amax"] for row in input_rows(resumed)] == EXPECTED[unit][0]
    other = attach_w8a8(nn.Sequential(nn.Linear(4, 2)), ["0"],
                        DelayedScalingRecipe(history_unit="call" if unit == "step" else "step"))
    with pytest.raises(ValueError, match=f"state of history_unit '{unit}' loaded into a handle of history_unit"):
        other.load_state_dict(state)


def test_reset_drops_the_pending_maximum():
    model = nn.Sequential(nn.Linear(4, 2))
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="most_recent", history_unit="step"))
    run_calls(handle, model, [[2.0]])
    handle.enable()  # reset, as the end of the BF16 warmup
    handle.step(1)
    assert handle.observer("0", "input").predict() is None
    layer = W8A8Layer("fc", DelayedScalingRecipe(observer="most_recent", history_unit="step"))  # no handle: end_step
    layer.quantizers["input"](torch.tensor([3.0]))
    assert layer.quantizers["input"].observer.predict() is None
    layer.end_step()
    assert layer.quantizers["input"].observer.predict() == 3.0


def test_unknown_history_unit_is_rejected():
    model = nn.Sequential(nn.Linear(4, 2))
    with pytest.raises(ValueError, match=r"unknown history_unit 'micro_batch'; valid: call, step"):
        attach_w8a8(model, ["0"], DelayedScalingRecipe(history_unit="micro_batch"))
    assert "forward" not in model[0].__dict__
    with pytest.raises(ValueError, match=r"unknown history_unit 'steps'"):
        W8A8Layer("fc", DelayedScalingRecipe(history_unit="steps"))


@pytest.mark.parametrize("unit", HISTORY_UNITS)
def test_train_loop_with_accumulation_has_a_row_per_micro_batch(unit, tmp_path):
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY))
    names = ["model.layers.0.mlp.up_proj", "model.layers.1.mlp.down_proj"]
    handle = attach_w8a8(model, names, DelayedScalingRecipe(history_unit=unit))
    tokens = torch.randint(0, 128, (2000,), generator=torch.Generator().manual_seed(2))
    config = TrainConfig(max_steps=3, seq_len=8, micro_batch_size=1, grad_accum=2, lr=1e-3, progress=False)
    train(model, tokens, config, tmp_path / "run", hooks=BF16Warmup(handle, warmup_steps=1))
    handle.write_telemetry(tmp_path / "telemetry.csv")
    with open(tmp_path / "telemetry.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 2 * 3 * 2  # steps 1 and 2, 2 micro-batches, 3 roles, 2 layers
    cold = [(row["step"], row["layer"], row["role"]) for row in rows if row["cold_start"] == "True"]
    # after the warmup: the first call of each layer and role is cold ("call"), or its whole first step ("step")
    assert len(cold) == 2 * 3 * (1 if unit == "call" else 2)
    assert {step for step, _, _ in cold} == {"1"}
    assert all(float(row["rel_error"]) > 0 for row in rows)
