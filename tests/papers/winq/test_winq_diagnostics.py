"""WinQ's diagnostics (papers.winq.diagnostics): code boundaries of every bit width against the quantizer's levels,
distances, clipping, the travel of a period, the mechanism records of a planted run (codes changed, near-boundary
and clipped shares before and after the interpolation, exact), the authors' relative gradient norm against a
backward-pass oracle, the fixed batches, the records after a resume, and a run with the diagnostics bit for bit
equal to one without."""

import csv
import json
import math

import pytest
import torch
from ptq_testing import assert_same_state, snapshot, tiny_llama
from torch import nn

from common.quantizers import attach_lowbit, hadamard_matrix, lowbit_selection
from common.quantizers.lowbit import ALPHA_EPS, lowbit_spec, normalized_levels
from common.recipes import LowBitRecipe
from common.train import Hooks, SequenceSampler, TrainConfig, causal_lm_loss, learning_rate, train
from papers.winq.diagnostics import (
    MECHANISM_FIELDS,
    MECHANISM_FILE,
    STAGNATION_FIELDS,
    STAGNATION_FILE,
    WinQDiagnostics,
    boundary_distance,
    changed_share,
    clipped,
    code_boundaries,
    code_map,
    fixed_batches,
    mechanism_shares,
    period_travel,
    relative_grad_norm,
)
from papers.winq.method import WinQ

BITS = (1, 1.58, 2, 3, 4)


def test_code_boundaries_are_the_midpoints_of_the_levels():
    assert code_boundaries(1) == (0.0,)
    assert code_boundaries(1.58) == (-0.5 / 1.5, 0.5 / 1.5)
    assert code_boundaries(2) == (-0.5, 0.0, 0.5)
    assert code_boundaries(3) == (-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5)
    assert code_boundaries(4) == tuple(k + 0.5 for k in range(-8, 7))
    with pytest.raises(ValueError, match=r"unknown weight bit width 5"):
        code_boundaries(5)


@pytest.mark.parametrize("bits", BITS)
def test_the_level_changes_exactly_at_the_boundaries(bits):
    """On a fine grid of u, q(u) changes between two neighbours iff a boundary lies between them (an oracle: the
    quantizer's own levels)."""
    spec = lowbit_spec(bits)
    u = torch.linspace(spec.lo - 1, spec.hi + 1, 20001, dtype=torch.float64)
    levels = normalized_levels(u, bits)
    changes = torch.nonzero(levels[1:] != levels[:-1]).flatten()
    boundaries = torch.tensor(code_boundaries(bits), dtype=torch.float64)
    assert len(changes) == len(boundaries)
    for i, boundary in zip(changes, boundaries, strict=True):
        assert u[i] <= boundary <= u[i + 1]
    midpoints = (levels.unique()[1:] + levels.unique()[:-1]) / 2
    assert torch.allclose(midpoints, boundaries, rtol=0, atol=1e-12)


def test_boundary_distance_in_weight_units():
    w = torch.tensor([[0.5, -1.0, 0.25, 2.0], [-4.0, 1.0, 3.0, 0.0]])
    alpha = torch.tensor([[2.0], [4.0]])  # 2-bit boundaries: -1, 0, 1 (row 0) and -2, 0, 2 (row 1)
    assert torch.equal(boundary_distance(w, alpha, 2), torch.tensor([[0.5, 0.0, 0.25, 1.0], [2.0, 1.0, 1.0, 0.0]]))
    assert torch.equal(boundary_distance(w, alpha, 1), w.abs())  # the sign's boundary is 0
    # 3 bits: boundaries k + 1/2 in units of alpha, from -3.5 to 2.5
    assert torch.equal(boundary_distance(torch.tensor([[0.25, 2.875, -4.5, 6.0]]), torch.tensor([[1.0]]), 3),
                       torch.tensor([[0.25, 0.375, 1.0, 3.5]]))
    ternary = boundary_distance(torch.tensor([[0.0, 1.5, -0.9]]), torch.tensor([[3.0]]), 1.58)  # boundaries +-1
    assert ternary[0].tolist() == pytest.approx([1.0, 0.5, 0.1], rel=1e-6)
    # the scale is clamped below at 1e-5, as the forward
    assert torch.equal(boundary_distance(torch.tensor([[3e-5]]), torch.tensor([[0.0]]), 2),
                       torch.tensor([[3e-5]]) - 0.5 * ALPHA_EPS)


def test_clipped_is_where_the_straight_through_gradient_is_zero():
    one = torch.tensor([[1.0]])
    w = torch.tensor([[-1.0, -0.99, 0.0, 0.99, 0.995, 2.0]])
    assert clipped(w, one, 2).tolist() == [[True, False, False, False, True, True]]  # |u| > 0.99
    assert clipped(w, one, 1.58).tolist() == [[True, False, False, False, True, True]]
    assert clipped(torch.tensor([[-1.5, -1.0, 1.0, 1.01]]), one, 1).tolist() == [[True, False, False, True]]
    assert clipped(torch.tensor([[-8.5, -8.0, 7.0, 7.2]]), one, 4).tolist() == [[True, False, False, True]]
    assert clipped(torch.tensor([[3.0, 1.5]]), torch.tensor([[2.0]]), 2).tolist() == [[True, False]]  # u = W / alpha


def test_period_travel_sums_the_learning_rate_of_the_next_period():
    constant = TrainConfig(max_steps=8, lr=0.1, min_lr_ratio=1.0)
    assert period_travel(1, 2, constant) == 0.2  # steps 2 and 3
    assert period_travel(5, 4, constant) == 0.2  # steps 6 and 7: the run ends
    assert period_travel(7, 2, constant) == 0.0  # after the last step
    cosine = TrainConfig(max_steps=12, lr=1e-3, warmup_steps=2, min_lr_ratio=0.0)
    assert period_travel(2, 3, cosine) == math.fsum(learning_rate(s, cosine) for s in (3, 4, 5))


def hand_model(w, alpha, bits=2, hadamard=False, every=2, method="winq"):
    """One 2 x 4 low-bit Linear holding ``w`` with scales ``alpha``; with its WinQ hooks (or plain hooks)."""
    model = nn.Sequential(nn.Linear(4, 2, bias=False))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor(w))
    handle = attach_lowbit(model, ["0"], LowBitRecipe(bits, hadamard=hadamard))
    with torch.no_grad():
        handle.alphas()["0"].copy_(torch.tensor(alpha))
    return model, handle, (WinQ(handle, every=every) if method == "winq" else Hooks())


def set_latent(handle, w):
    with torch.no_grad():
        handle.latent_weight("0").copy_(torch.as_tensor(w))


# 2 bits, scales 2 and 4: boundaries -1, 0, 1 and -2, 0, 2; levels +-0.5, +-1.5 and +-1, +-3
START = [[0.25, -0.75, 2.5, 1.75], [-2.5, 0.5, 1.5, -1.0]]
END = [[0.25, -1.25, 2.5, 0.875], [-2.5, 0.5, 2.25, -1.0]]  # -1, 1 and 2 crossed: 3 of 8 codes changed
# END's distances to the nearest boundary: [0.25, 0.25, 1.5, 0.125], [0.5, 0.5, 0.25, 1.0]; u = 1.25 clipped
# after 0.2 W + 0.8 Q(W): [0.45, -1.45, 1.7, 0.575], [-2.9, 0.9, 2.85, -1.0]: distances >= 0.425, none clipped
CONSTANT_LR = TrainConfig(max_steps=4, lr=0.15, min_lr_ratio=1.0)  # travel 0.15 + 0.15 = 0.3 after step 1


def test_mechanism_shares_of_planted_weights():
    model, _, _ = hand_model(END, [[2.0], [4.0]])
    assert mechanism_shares(model, 0.3) == {"weights": 8, "near_boundary": 0.5, "clipped": 0.125}
    assert mechanism_shares(model, 0.2) == {"weights": 8, "near_boundary": 0.125, "clipped": 0.125}
    assert mechanism_shares(model, None)["near_boundary"] is None
    with pytest.raises(ValueError, match=r"travel must be a number >= 0 or None, got -0\.1"):
        mechanism_shares(model, -0.1)
    with pytest.raises(ValueError, match=r"no low-bit quantized Linear"):
        mechanism_shares(nn.Sequential(nn.Linear(4, 2)), 0.3)


def test_with_hadamard_the_codes_and_distances_are_those_of_the_rotated_weight():
    model, _, _ = hand_model(START, [[1.0], [1.0]], bits=1, hadamard=True)
    rotated = torch.tensor(START) @ hadamard_matrix(4)  # [1.875, 0.875, -2.375, 0.125], [-0.75, -0.25, -1.25, -2.75]
    assert mechanism_shares(model, 0.5)["near_boundary"] == 0.25  # |W H| < 0.5: the sign's boundary is 0
    assert torch.equal(code_map(model)["0"], torch.where(rotated < 0, -1, 1).to(torch.int8))


def test_changed_share_counts_over_all_layers():
    start = {"a": torch.tensor([1, 1, -1], dtype=torch.int8), "b": torch.tensor([[3, -3]], dtype=torch.int8)}
    end = {"a": torch.tensor([1, -1, -1], dtype=torch.int8), "b": torch.tensor([[1, -3]], dtype=torch.int8)}
    assert changed_share(start, end) == 0.4
    with pytest.raises(ValueError, match=r"other layers: \['b'\]"):
        changed_share(start, {"a": end["a"]})
    with pytest.raises(ValueError, match=r"layer 'b': codes of shape \(1, 2\) and \(2,\)"):
        changed_share(start, {**end, "b": torch.tensor([1, 1], dtype=torch.int8)})


def planted_run(tmp_path, method):
    """Two periods of K = 2 on the hand model: START at the beginning, END after step 1 (the first boundary),
    nothing moves in the second period; returns the hooks and the model."""
    model, handle, method_hooks = hand_model(START, [[2.0], [4.0]], method=method)
    hooks = WinQDiagnostics(method_hooks, CONSTANT_LR, torch.zeros(1, 1, 2, dtype=torch.long), period=2,
                            run_dir=tmp_path)
    hooks.on_train_start(model, 0)
    for step in range(4):
        if step == 0:
            set_latent(handle, END)
        hooks.after_optimizer_step(model, step)
    return hooks, model


def test_the_mechanism_records_of_a_planted_interpolating_run(tmp_path):
    hooks, _ = planted_run(tmp_path, "winq")
    first, last = hooks.mechanism
    assert first == {"period": 1, "step": 1, "steps_taken": 2, "interpolated": True, "travel": 0.3, "weights": 8,
                     "codes_changed": 0.375, "codes_changed_by_interpolation": 0.0, "near_boundary_before": 0.5,
                     "near_boundary_after": 0.0, "clipped_before": 0.125, "clipped_after": 0.0}
    assert tuple(first) == MECHANISM_FIELDS
    # the second period: nothing moved but the interpolation; no next period after the last step
    assert (last["period"], last["step"], last["travel"], last["codes_changed"]) == (2, 3, 0.0, 0.0)
    assert (last["near_boundary_before"], last["near_boundary_after"]) == (None, None)
    assert hooks.method_hooks.interpolations == 2
    lines = (tmp_path / MECHANISM_FILE).read_text().splitlines()
    assert [json.loads(line) for line in lines] == hooks.mechanism
    assert (tmp_path / STAGNATION_FILE).read_text() == ""


def test_a_run_without_interpolation_is_measured_at_the_same_boundaries(tmp_path):
    hooks, _ = planted_run(tmp_path, "baseline")
    first = hooks.mechanism[0]
    assert first == {"period": 1, "step": 1, "steps_taken": 2, "interpolated": False, "travel": 0.3, "weights": 8,
                     "codes_changed": 0.375, "codes_changed_by_interpolation": 0.0, "near_boundary_before": 0.5,
                     "near_boundary_after": 0.5, "clipped_before": 0.125, "clipped_after": 0.125}
    assert [r["step"] for r in hooks.mechanism] == [1, 3]


def test_no_period_records_no_mechanism_and_no_run_dir_measures_nothing(tmp_path):
    model, _, _ = hand_model(START, [[2.0], [4.0]])
    hooks = WinQDiagnostics(Hooks(), CONSTANT_LR, torch.zeros(1, 1, 2, dtype=torch.long), run_dir=tmp_path)
    hooks.on_train_start(model, 0)
    for step in range(4):
        hooks.after_optimizer_step(model, step)
    assert hooks.mechanism == []
    model, _, winq = hand_model(START, [[2.0], [4.0]])
    silent = WinQDiagnostics(winq, CONSTANT_LR, torch.zeros(1, 1, 2, dtype=torch.long), run_dir=None)
    silent.on_train_start(model, 0)
    for step in range(4):
        silent.after_optimizer_step(model, step)
    assert silent.period == 2  # the interpolation's
    assert (silent.mechanism, winq.interpolations) == ([], 2)  # the method's hooks still run


def test_bad_periods_are_named():
    _, _, winq = hand_model(START, [[2.0], [4.0]])
    batches = torch.zeros(1, 1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match=r"period 3 differs from the interpolation's every 2"):
        WinQDiagnostics(winq, CONSTANT_LR, batches, period=3)
    with pytest.raises(ValueError, match=r"period must be an integer >= 1 or None, got 0"):
        WinQDiagnostics(Hooks(), CONSTANT_LR, batches, period=0)


def test_a_resumed_hook_rewrites_the_records_of_its_checkpoint(tmp_path):
    model, handle, winq = hand_model(START, [[2.0], [4.0]])
    hooks = WinQDiagnostics(winq, CONSTANT_LR, torch.zeros(1, 1, 2, dtype=torch.long), run_dir=tmp_path)
    hooks.on_train_start(model, 0)
    set_latent(handle, END)
    hooks.after_optimizer_step(model, 0)
    hooks.after_optimizer_step(model, 1)
    state, latent = hooks.state_dict(), handle.latent_weight("0").detach().clone()  # a checkpoint after 2 steps
    hooks.after_optimizer_step(model, 2)
    hooks.after_optimizer_step(model, 3)
    assert len((tmp_path / MECHANISM_FILE).read_text().splitlines()) == 2
    uninterrupted = (tmp_path / MECHANISM_FILE).read_text()
    resumed_model, resumed_handle, resumed_winq = hand_model(START, [[2.0], [4.0]])
    resumed = WinQDiagnostics(resumed_winq, CONSTANT_LR, torch.zeros(1, 1, 2, dtype=torch.long), run_dir=tmp_path)
    resumed.load_state_dict(state)
    set_latent(resumed_handle, latent)  # the model's part of the checkpoint
    resumed.on_train_start(resumed_model, 2)
    assert len((tmp_path / MECHANISM_FILE).read_text().splitlines()) == 1  # the later record is gone ...
    assert resumed_winq.interpolations == 1
    resumed.after_optimizer_step(resumed_model, 2)
    resumed.after_optimizer_step(resumed_model, 3)
    assert (tmp_path / MECHANISM_FILE).read_text() == uninterrupted  # ... and made again


def test_fixed_batches_are_a_seeded_sample_of_sequences():
    tokens = torch.arange(100)
    batches = fixed_batches(tokens, 4, batch_size=2, count=3, seed=7)
    assert batches.shape == (3, 2, 5)
    order = torch.randperm(24, generator=torch.Generator().manual_seed(7))  # (100 - 1) // 4 = 24 sequences
    for i, index in enumerate(order[:6].tolist()):
        assert torch.equal(batches[i // 2, i % 2], tokens[4 * index : 4 * index + 5])
    assert torch.equal(batches.reshape(6, 5), SequenceSampler(tokens, 4, 7).batch(0, 6))
    torch.manual_seed(123)  # the global stream plays no part
    assert torch.equal(fixed_batches(tokens, 4, batch_size=2, count=3, seed=7), batches)
    assert fixed_batches(tokens, 4, batch_size=8).shape == (20, 8, 5)  # the authors' 20 by default
    with pytest.raises(ValueError, match=r"count must be an integer >= 1, got 0"):
        fixed_batches(tokens, 4, batch_size=2, count=0)
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1, got 1\.5"):
        fixed_batches(tokens, 4, batch_size=1.5)
    with pytest.raises(ValueError, match=r"seed must be an integer, got '1'"):
        fixed_batches(tokens, 4, batch_size=2, seed="1")


def quantized_tiny(bits=2, sigma=1e-3):
    model = tiny_llama(num_hidden_layers=2)
    handle = attach_lowbit(model, lowbit_selection(model), LowBitRecipe(bits))
    handle.set_noise(sigma, seed=3)
    return model, handle


def test_relative_grad_norm_is_the_mean_batch_gradient_norm_over_the_weight_norm():
    model, handle = quantized_tiny()
    model.train()
    batches = torch.randint(0, 128, (3, 2, 9), generator=torch.Generator().manual_seed(1))
    noise_state = handle.noise.state_dict()
    rng = torch.get_rng_state()
    ratio = relative_grad_norm(model, batches)
    assert model.training  # restored
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)
    assert handle.noise.state_dict() == noise_state  # no noise drawn: eval mode
    # the oracle: a backward pass per batch in eval mode, the norms of the latent weights' .grad
    weights = [handle.latent_weight(name) for name in handle.names]
    model.eval()
    norms = []
    for batch in batches:
        model.zero_grad(set_to_none=True)
        causal_lm_loss(model, batch).backward()
        norms.append(torch.cat([w.grad.flatten() for w in weights]).double().norm())
    expected = float(torch.stack(norms).mean() / torch.cat([w.detach().flatten() for w in weights]).double().norm())
    assert ratio == pytest.approx(expected, rel=1e-6)
    assert 0 < ratio < math.inf
    with pytest.raises(ValueError, match=r"at least one batch"):
        relative_grad_norm(model, [])
    with pytest.raises(ValueError, match=r"no low-bit quantized Linear"):
        relative_grad_norm(tiny_llama(num_hidden_layers=1), batches)


def run_tiny(tmp_path, diagnostics):
    """4 steps of WinQ (K = 2) with noise on the tiny Llama, validation after steps 2 and 4: the final state, the
    noise generator, the training log and the hooks."""
    model, handle = quantized_tiny()
    tokens = torch.randint(0, 128, (2000,), generator=torch.Generator().manual_seed(2))
    config = TrainConfig(max_steps=4, seq_len=16, micro_batch_size=2, lr=1e-3, weight_decay=0.0, eval_every=2,
                         eval_sequences=2, progress=False)
    hooks = WinQ(handle, every=2)
    if diagnostics:
        hooks = WinQDiagnostics(hooks, config, fixed_batches(tokens, 16, 2, count=3), run_dir=tmp_path)
    train(model, tokens, config, tmp_path, val_tokens=tokens[:200], hooks=hooks)
    with open(tmp_path / "train_log.csv") as handle_:
        losses = [row["loss"] for row in csv.DictReader(handle_)]
    return snapshot(model), handle.noise.state_dict(), losses, hooks


def test_a_run_with_the_diagnostics_is_bit_identical_to_one_without(tmp_path):
    plain = run_tiny(tmp_path / "plain", diagnostics=False)
    measured = run_tiny(tmp_path / "measured", diagnostics=True)
    assert_same_state(plain[0], measured[0])
    assert torch.equal(plain[1]["generator"], measured[1]["generator"])  # the noise stream
    assert plain[2] == measured[2]
    hooks = measured[3]
    assert [r["steps_taken"] for r in hooks.stagnation] == [2, 4]
    assert tuple(hooks.stagnation[0]) == STAGNATION_FIELDS
    assert (hooks.stagnation[0]["batches"], hooks.stagnation[0]["sequences_per_batch"]) == (3, 2)
    assert [r["steps_taken"] for r in hooks.mechanism] == [2, 4]
    assert all(r["codes_changed_by_interpolation"] == 0.0 for r in hooks.mechanism)
    assert [json.loads(line) for line in (tmp_path / "measured" / STAGNATION_FILE).read_text().splitlines()] == \
        hooks.stagnation
