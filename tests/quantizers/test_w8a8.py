"""HiF8 W8A8 QAT: the quantized linear's exact forward and backward, delayed scaling, telemetry, the BF16 warmup,
attach/remove on a Llama and a few steps of the shared training loop."""

import csv
import math

import pytest
import torch
import transformers
from torch import nn

from common.formats import round_to_format
from common.qat import BF16Warmup
from common.quantizers import TELEMETRY_FIELDS, W8A8Layer, attach_w8a8, w8a8_linear, w8a8_selection
from common.quantizers.w8a8 import tensor_amax
from common.recipes import ROLES, DelayedScalingRecipe, LowBitRecipe
from common.train import TrainConfig, train

TINY = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 6,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}

# Hand-picked: amax(x) = 7.5, amax(W) = 3.75, amax(g) = 1.875, so the cold-start scales 15 / (amax + 1e-12) are
# 2, 4 and 8 in float32 and every product below is exact.
X = torch.tensor([[1.3, -0.3, 7.5], [2.6, 0.7, -5.3]])
W = torch.tensor([[0.3, -1.1, 3.75], [-0.7, 2.2, 0.05]])
B = torch.tensor([0.5, -0.25])
G = torch.tensor([[0.3, -1.875], [1.1, 0.55]])
# HiF8 (ties away) of 2X, 4W, 8G, divided back, by hand: e.g. 2 * 1.3 = 2.6 -> 2.5 (step 0.25 in [2, 4)),
# 4 * 0.05 = 0.2 -> 0.203125 (step 2^-6 in [0.125, 0.25)), 8 * 1.1 = 8.8 -> 9 (step 1 in [8, 16))
QX = torch.tensor([[1.25, -0.3125, 7.5], [2.5, 0.6875, -5.5]])
QW = torch.tensor([[0.3125, -1.125, 3.75], [-0.6875, 2.25, 0.05078125]])
QG = torch.tensor([[0.3125, -1.875], [1.125, 0.5625]])


def tiny_llama(**overrides):
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**TINY, **overrides}))


def input_rows(handle):
    return [row for row in handle.telemetry_rows() if row["role"] == "input"]


def test_hand_values_are_hif8():
    for t, q, scale in ((X, QX, 2.0), (W, QW, 4.0), (G, QG, 8.0)):
        assert torch.equal(round_to_format(t * scale, "hif8") / scale, q)


def test_forward_and_backward_are_exactly_the_quantized_products():
    layer = W8A8Layer("fc", DelayedScalingRecipe())
    x, w, b = X.clone().requires_grad_(), W.clone().requires_grad_(), B.clone().requires_grad_()
    y = w8a8_linear(x, w, b, layer)
    assert torch.equal(y, QX @ QW.T + B)
    y.backward(G)
    assert torch.equal(x.grad, QG @ QW)
    assert torch.equal(w.grad, QG.T @ QX)
    assert torch.equal(b.grad, G.sum(0))  # the bias gradient is not quantized
    # the gradients are quantized: they differ from the unquantized backward (G is off the HiF8 grid)
    assert not torch.equal(x.grad, G @ QW)
    assert not torch.equal(w.grad, G.T @ QX)



@pytest.mark.parametrize("roles", [("input", "weight"), ("grad_output",), ("weight",)])
def test_a_role_subset_quantizes_exactly_those_operands(roles):
    """The roles left out pass through unquantized: every product uses Q_r for the roles given, the raw tensor
    for the others (forward-only W8A8 with ("input", "weight"), gradients only with ("grad_output",))."""
    layer = W8A8Layer("fc", DelayedScalingRecipe(roles=roles))
    assert tuple(layer.quantizers) == roles
    operands = (("input", X, QX), ("weight", W, QW), ("grad_output", G, QG))
    qx, qw, qg = (quantized if role in roles else raw for role, raw, quantized in operands)
    x, w = X.clone().requires_grad_(), W.clone().requires_grad_()
    y = w8a8_linear(x, w, B, layer)
    assert torch.equal(y, qx @ qw.T + B)
    y.backward(G)
    assert torch.equal(x.grad, qg @ qw)
    assert torch.equal(w.grad, qg.T @ qx)


def test_bad_roles_are_named():
    with pytest.raises(ValueError, match=r"roles must be a non-empty subset of input, weight, grad_output without "
                                         r"repeats, got \('gradient',\)"):
        attach_w8a8(nn.Sequential(nn.Linear(3, 2)), ["0"], DelayedScalingRecipe(roles=("gradient",)))
    with pytest.raises(ValueError, match=r"got \(\)"):
        W8A8Layer("fc", DelayedScalingRecipe(roles=()))

def hand_model():
    model = nn.Sequential(nn.Linear(3, 2))
    with torch.no_grad():
        model[0].weight.copy_(W)
        model[0].bias.copy_(B)
    return model


def test_telemetry_of_one_call_and_csv(tmp_path):
    model = hand_model()
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe())
    handle.step(7)
    model(X).backward(G)
    rows = handle.telemetry_rows()
    assert [(row["step"], row["layer"], row["role"]) for row in rows] == [(7, "0", role) for role in ROLES]
    assert [(row["amax"], row["predicted_amax"], row["scale"]) for row in rows] == [
        (7.5, 7.5, 2.0), (3.75, 3.75, 4.0), (1.875, 1.875, 8.0)]
    assert all(row["cold_start"] and not row["overflow"] for row in rows)
    assert all(row["clipped_fraction"] == 0.0 == row["over_range_fraction"] for row in rows)
    handle.write_telemetry(tmp_path / "t.csv")
    with open(tmp_path / "t.csv") as f:
        written = list(csv.DictReader(f))
    assert tuple(written[0]) == TELEMETRY_FIELDS
    assert [row["role"] for row in written] == list(ROLES)
    assert written[2]["scale"] == "8.0"
    assert written[2]["cold_start"] == "True"


def test_delayed_scale_lags_the_spike_and_max_window_remembers_it():
    base = torch.linspace(-1.0, 1.0, 64).reshape(4, 16)  # amax 1; |x| > 0.1 for 58 of 64 values
    spikes = {4: 10.0, 6: 10.0}  # a 10x spike, and again two steps later
    results = {}
    for observer, max_val in (("most_recent", 15.0), ("max_window", 15.0), ("most_recent", 32768.0)):
        model = nn.Sequential(nn.Linear(16, 3))
        handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer=observer, max_val=max_val))
        for step in range(8):
            handle.step(step)
            model(base * spikes.get(step, 1.0))
        results[observer, max_val] = input_rows(handle)
    recent = results["most_recent", 15.0]
    assert [row["overflow"] for row in recent] == [False, False, False, False, True, False, True, False]
    assert [row["predicted_amax"] for row in recent] == [1.0, 1.0, 1.0, 1.0, 1.0, 10.0, 1.0, 10.0]
    assert recent[4]["over_range_fraction"] == 58 / 64  # |10 x| > 1 for |x| > 0.1
    assert recent[4]["clipped_fraction"] == 0.0  # HiF8's max 2^15 is ~2185x above max_val = 15: no clipping
    window = results["max_window", 15.0]
    assert [row["overflow"] for row in window] == [False, False, False, False, True, False, False, False]
    assert [row["predicted_amax"] for row in window][5:] == [10.0, 10.0, 10.0]
    saturating = results["most_recent", 32768.0]  # max_val = the format's max: the spike is clipped
    assert [row["clipped_fraction"] for row in saturating] == [0.0] * 4 + [58 / 64, 0.0, 58 / 64, 0.0]
    assert sum(row["overflow"] for row in window) == 1


def test_current_observer_never_overflows_and_exp_smooth_lags():
    for observer in ("current", "exp_smooth"):
        model = nn.Sequential(nn.Linear(4, 2))
        options = {"alpha": 0.5} if observer == "exp_smooth" else {}
        handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer=observer, observer_options=options))
        for step, amax in enumerate((1.0, 4.0, 2.0)):
            handle.step(step)
            model(torch.tensor([[amax, 0.0, 0.0, -0.5]]))
        predicted = [row["predicted_amax"] for row in input_rows(handle)]
        overflow = [row["overflow"] for row in input_rows(handle)]
        if observer == "current":
            assert predicted == [1.0, 4.0, 2.0]
            assert overflow == [False, False, False]
        else:
            assert predicted == [1.0, 1.0, 2.5]  # cold start, then 0.5 * 4 + 0.5 * 1
            assert overflow == [False, True, False]


def test_disabled_layer_is_exactly_nn_linear():
    torch.manual_seed(0)
    plain = nn.Linear(16, 8)
    x = torch.randn(5, 16)
    layer = W8A8Layer("fc", DelayedScalingRecipe())
    layer.enabled = False
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    w, b = plain.weight.detach().clone().requires_grad_(), plain.bias.detach().clone().requires_grad_()
    y1, y2 = plain(x1), w8a8_linear(x2, w, b, layer)
    assert torch.equal(y1, y2)
    g = torch.randn(5, 8)
    y1.backward(g)
    y2.backward(g)
    assert torch.equal(x1.grad, x2.grad)
    assert torch.equal(plain.weight.grad, w.grad)
    assert torch.equal(plain.bias.grad, b.grad)
    assert all(q.observer.predict() is None for q in layer.quantizers.values())


def test_no_grad_calls_quantize_but_leave_observers_alone():
    model = hand_model()
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="most_recent"))
    model(X)  # one training forward
    with torch.no_grad():
        out = model(X * 100)
    assert handle.observer("0", "input").predict() == 7.5
    assert len(handle.telemetry_rows()) == 2  # input and weight of the training forward only
    assert not torch.equal(out, nn.functional.linear(X * 100, model[0].weight, model[0].bias))


def test_attach_remove_restores_the_model_bit_exactly():
    model = tiny_llama()
    input_ids = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(1))
    before = model(input_ids).logits.detach()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    names = w8a8_selection(model)
    assert names == [f"model.layers.{i}.mlp.{p}" for i in range(1, 6) for p in ("gate_proj", "up_proj", "down_proj")]
    with attach_w8a8(model, names, DelayedScalingRecipe()) as handle:
        assert list(model.state_dict()) == list(state)  # parameter names unchanged
        quantized = model(input_ids).logits.detach()
        assert not torch.equal(quantized, before)
        handle.disable()
        assert torch.equal(model(input_ids).logits, before)
        handle.enable()
    assert torch.equal(model(input_ids).logits, before)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert not any("forward" in m.__dict__ for m in model.modules())


def test_paper_selection_on_26_blocks_keeps_21():
    names = w8a8_selection(tiny_llama(num_hidden_layers=26, hidden_size=8, intermediate_size=8,
                                      num_attention_heads=2, num_key_value_heads=1))
    assert sorted({int(name.split(".")[2]) for name in names}) == list(range(3, 24))
    assert len(names) == 63


def test_bf16_warmup_switches_at_exactly_step_w():
    model = hand_model()
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="max_window"))
    hooks = BF16Warmup(handle, warmup_steps=2)
    hooks.on_train_start(model, 0)
    plain = lambda: nn.functional.linear(X, model[0].weight, model[0].bias)  # noqa: E731
    for step in range(4):
        if step == 2:
            handle.observer("0", "input").update(99.0)  # stale history planted before the switch
        hooks.before_step(model, step)
        assert handle.enabled == (step >= 2)
        out = model(X)
        if step < 2:
            assert torch.equal(out, plain())
            assert all(handle.observer("0", role).predict() is None for role in ROLES)
        if step == 2:
            assert torch.equal(out, QX @ QW.T + B)  # quantized, with cold-start scales: the 99 was reset
        with torch.no_grad():
            model[0].weight.copy_(W)  # no optimizer here: keep W
    rows = handle.telemetry_rows()
    assert [(row["step"], row["role"], row["cold_start"]) for row in rows] == [
        (step, role, step == 2) for step in (2, 3) for role in ("input", "weight")]
    assert rows[0]["predicted_amax"] == 7.5


def test_bf16_warmup_state_round_trip():
    model = hand_model()
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="max_window", observer_options={"window": 4}))
    hooks = BF16Warmup(handle, 0)
    hooks.on_train_start(model, 0)
    hooks.before_step(model, 0)
    model(X).backward(G)
    state = hooks.state_dict()
    other = nn.Sequential(nn.Linear(3, 2))
    other_handle = attach_w8a8(other, ["0"],
                               DelayedScalingRecipe(observer="max_window", observer_options={"window": 4}))
    other_handle.disable()
    resumed = BF16Warmup(other_handle, 0)
    resumed.load_state_dict(state)
    resumed.on_train_start(other, 1)
    assert other_handle.enabled
    assert [other_handle.observer("0", r).predict() for r in ROLES] == [7.5, 3.75, 1.875]
    assert other_handle.telemetry_rows() == handle.telemetry_rows()  # a resumed run keeps the telemetry so far
    assert [(row["role"], row["amax"]) for row in other_handle.telemetry_rows()] == list(
        zip(ROLES, [7.5, 3.75, 1.875], strict=True))
    with pytest.raises(ValueError, match="warmup_steps must be an integer >= 0, got -1"):
        BF16Warmup(handle, -1)


def test_train_loop_with_warmup_and_telemetry(tmp_path):
    model = tiny_llama()
    handle = attach_w8a8(model, w8a8_selection(model), DelayedScalingRecipe())
    tokens = torch.randint(0, 128, (2000,), generator=torch.Generator().manual_seed(2))
    config = TrainConfig(max_steps=4, seq_len=16, micro_batch_size=2, lr=1e-3, progress=False)
    train(model, tokens, config, tmp_path / "run", hooks=BF16Warmup(handle, warmup_steps=2))
    with open(tmp_path / "run" / "train_log.csv") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == 4
    assert all(math.isfinite(loss) for loss in losses)
    handle.write_telemetry(tmp_path / "telemetry.csv")
    with open(tmp_path / "telemetry.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 3 * 15  # steps 2 and 3, three roles, 15 quantized linears
    assert {row["step"] for row in rows} == {"2", "3"}
    assert all(float(row["scale"]) > 0 for row in rows)


def test_autocast_bf16_runs():
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 4))
    attach_w8a8(model, ["0", "1"], DelayedScalingRecipe())
    x = torch.randn(3, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert x.grad.dtype == torch.float32
    assert model[0].weight.grad.dtype == torch.float32
    assert torch.isfinite(model[0].weight.grad).all()


def test_errors():
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    with pytest.raises(ValueError, match=r"module '1' is not an nn.Linear of the model \(ReLU\)"):
        attach_w8a8(model, ["1"], DelayedScalingRecipe())
    with pytest.raises(ValueError, match="unknown observer 'window'"):
        attach_w8a8(model, ["0"], DelayedScalingRecipe(observer="window"))
    with pytest.raises(ValueError, match=r"max_val must be finite and > 0, got -1\.0"):
        attach_w8a8(model, ["0"], DelayedScalingRecipe(max_val=-1.0))
    with pytest.raises(ValueError, match="unknown format 'hif9'"):
        attach_w8a8(model, ["0"], DelayedScalingRecipe(format="hif9"))
    with pytest.raises(ValueError, match=r"expected a DelayedScalingRecipe, got LowBitRecipe\(bits=2"):
        attach_w8a8(model, ["0"], LowBitRecipe(2))
    with pytest.raises(ValueError, match=r"expected a DelayedScalingRecipe, got 'hif8'"):
        W8A8Layer("fc", "hif8")
    handle = attach_w8a8(model, ["0"], DelayedScalingRecipe())
    with pytest.raises(ValueError, match=r"module '0' already has an instance forward \(W8A8 attached twice\?\)"):
        attach_w8a8(model, ["0"], DelayedScalingRecipe())
    handle.remove()
    handle.remove()  # idempotent
    assert "forward" not in model[0].__dict__


def test_tensor_amax():
    assert tensor_amax(torch.tensor([1.0, -3.0, 2.0])) == 3.0
    assert math.isnan(tensor_amax(torch.tensor([1.0, math.nan])))
    assert tensor_amax(torch.tensor([-math.inf, 1.0])) == math.inf
    assert tensor_amax(torch.empty(0)) == 0.0
    assert tensor_amax(torch.tensor([0.5, -1.25], dtype=torch.bfloat16)) == 1.25
