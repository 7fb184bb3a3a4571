"""WinQ (papers.winq.method): interpolation toward the quantized weights after optimizer steps K, 2K, ... counted from 1
(0-based steps K - 1, 2K - 1, ..., the last step included), in the rotated basis with Hadamard, its state, bad
arguments, and the shared training loop with noise (N // K interpolations, the last one in the saved weights)."""

import csv
import math

import pytest
import torch
import transformers
from safetensors.torch import load_file
from torch import nn

from common.models import save_checkpoint
from common.quantizers import attach_lowbit, hadamard_matrix, lowbit_selection
from common.recipes import LowBitRecipe
from common.train import TrainConfig, train
from papers.winq.method import WinQ, interpolate_toward, winq_step

W = torch.tensor([[0.5, -1.0, 0.25, 2.0], [-4.0, 1.0, 3.0, 0.0]])
Q2 = torch.tensor([[0.5, -1.5, 0.5, 1.5], [-3.0, 1.0, 3.0, 1.0]])  # 2-bit, alpha = 2, 4


def hand_model():
    model = nn.Sequential(nn.Linear(4, 2, bias=False))
    with torch.no_grad():
        model[0].weight.copy_(W)
    return model


def test_interpolate_toward_is_the_fact_sheet_formula():
    w, q = torch.tensor([1.0, -2.0, 0.5]), torch.tensor([0.75, -1.5, 0.25])
    assert torch.allclose(interpolate_toward(w, q, 0.8), torch.tensor([0.8, -1.6, 0.3]), rtol=0, atol=1e-7)
    assert torch.equal(interpolate_toward(w, q, 0.0), w)
    assert torch.equal(interpolate_toward(w, q, 1.0), q)


def test_winq_steps_end_multiples_of_k_counted_from_one():
    assert [s for s in range(9) if winq_step(s, 3)] == [2, 5, 8]
    assert [s for s in range(10) if winq_step(s, 3)] == [2, 5, 8]
    assert [s for s in range(4) if winq_step(s, 1)] == [0, 1, 2, 3]
    assert not winq_step(0, 2)


def test_a_160_step_run_with_k_40_interpolates_after_steps_40_80_120_160():
    # the authors' callback: global_step (after its increment) % K == 0, i.e. after optimizer steps 40, ..., 160
    assert [s for s in range(160) if winq_step(s, 40)] == [39, 79, 119, 159]


def test_interpolation_moves_80_percent_toward_q_after_steps_k_and_2k_only():
    model = hand_model()
    handle = attach_lowbit(model, ["0"], LowBitRecipe(2))
    hooks = WinQ(handle, every=2)
    latent = handle.latent_weight("0")
    first = 0.2 * W + 0.8 * Q2  # = [[0.5, -1.4, 0.45, 1.6], [-3.2, 1, 3, 0.8]]; its Q is Q2 again (alphas unchanged)
    for step in range(5):
        before = latent.detach().clone()
        target = handle.quantized_weight("0")
        hooks.after_optimizer_step(model, step)
        if step in (1, 3):
            assert torch.equal(latent, interpolate_toward(before, target, 0.8))
            assert torch.allclose(latent - before, 0.8 * (target - before), rtol=0, atol=1e-6)
        else:
            assert torch.equal(latent, before)
        if step == 1:
            assert torch.allclose(latent, first, rtol=0, atol=1e-7)
            assert torch.allclose(latent, torch.tensor([[0.5, -1.4, 0.45, 1.6], [-3.2, 1.0, 3.0, 0.8]]), rtol=0,
                                  atol=1e-6)
    assert hooks.interpolations == 2
    assert torch.equal(handle.quantized_weight("0"), Q2)


def test_interpolation_with_hadamard_is_in_the_rotated_basis():
    model = hand_model()
    handle = attach_lowbit(model, ["0"], LowBitRecipe(1, hadamard=True))
    h = hadamard_matrix(4)
    alpha = handle.alphas()["0"].detach()
    rotated_q = handle.quantized_weight("0") @ h  # = Q(W H)
    assert torch.allclose(rotated_q.abs(), alpha.expand(2, 4), rtol=0, atol=1e-7)  # 1-bit: +-alpha in that basis
    WinQ(handle, every=1, strength=0.5).after_optimizer_step(model, 0)
    expected_rotated = 0.5 * (W @ h) + 0.5 * rotated_q
    assert torch.allclose(handle.latent_weight("0") @ h, expected_rotated, rtol=0, atol=1e-6)


def test_state_round_trip_keeps_count_and_noise_generator():
    model = hand_model()
    handle = attach_lowbit(model, ["0"], LowBitRecipe(3))
    handle.set_noise(0.01, seed=4)
    hooks = WinQ(handle, every=1)
    hooks.after_optimizer_step(model, 0)
    model[0].weight  # noqa: B018 (one noise draw)
    state = hooks.state_dict()
    continued = model[0].weight.detach()
    other_model = hand_model()
    resumed = WinQ(attach_lowbit(other_model, ["0"], LowBitRecipe(3)), every=1)
    resumed.load_state_dict(state)
    assert resumed.interpolations == 1
    with torch.no_grad():
        other_model[0].parametrizations.weight.original.copy_(handle.latent_weight("0"))
    assert torch.equal(other_model[0].weight, continued)
    assert state["every"] == 1
    assert state["strength"] == 0.8


def test_bad_arguments_raise_naming_the_value():
    handle = attach_lowbit(hand_model(), ["0"], LowBitRecipe(2))
    with pytest.raises(ValueError, match=r"every must be an integer >= 1, got 0"):
        WinQ(handle, every=0)
    with pytest.raises(ValueError, match=r"every must be an integer >= 1, got 2\.0"):
        WinQ(handle, every=2.0)
    with pytest.raises(ValueError, match=r"strength must be a number in \[0, 1\], got 1\.5"):
        WinQ(handle, every=2, strength=1.5)
    with pytest.raises(ValueError, match=r"strength must be a number in \[0, 1\], got -0\.1"):
        WinQ(handle, every=2, strength=-0.1)
    with pytest.raises(ValueError, match=r"strength must be a number in \[0, 1\], got nan"):
        WinQ(handle, every=2, strength=math.nan)


class RecordingWinQ(WinQ):
    """WinQ that records the steps at which it interpolated and the latent weights before and after each time."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps, self.before, self.after = [], [], []

    def after_optimizer_step(self, model, step):
        count = self.interpolations
        before = {name: self.handle.latent_weight(name).detach().clone() for name in self.handle.names}
        super().after_optimizer_step(model, step)
        if self.interpolations > count:
            self.steps.append(step)
            self.before.append(before)
            self.after.append({name: self.handle.latent_weight(name).detach().clone() for name in self.handle.names})


def tiny_llama():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64))


def test_train_loop_with_winq_and_noise(tmp_path):
    model = tiny_llama()
    handle = attach_lowbit(model, lowbit_selection(model), LowBitRecipe(2))
    handle.set_noise(1e-3, seed=0)
    alphas = {name: alpha.detach().clone() for name, alpha in handle.alphas().items()}
    tokens = torch.randint(0, 128, (2000,), generator=torch.Generator().manual_seed(2))
    config = TrainConfig(max_steps=4, seq_len=16, micro_batch_size=2, lr=1e-3, weight_decay=0.0, progress=False)
    hooks = RecordingWinQ(handle, every=2)
    train(model, tokens, config, tmp_path / "run", hooks=hooks)
    assert hooks.steps == [1, 3]  # after optimizer steps 2 and 4 counted from 1
    assert hooks.interpolations == 2
    assert all(not torch.equal(alpha, alphas[name]) for name, alpha in handle.alphas().items())
    with open(tmp_path / "run" / "train_log.csv") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    assert len(losses) == 4
    assert all(math.isfinite(loss) for loss in losses)


@pytest.mark.parametrize(("max_steps", "every"), [(6, 3), (7, 3), (6, 2)])
def test_train_loop_interpolates_n_over_k_times_and_saves_the_last(tmp_path, max_steps, every):
    model = tiny_llama()
    handle = attach_lowbit(model, lowbit_selection(model), LowBitRecipe(1))
    handle.set_noise(1e-3, seed=0)
    tokens = torch.randint(0, 128, (2000,), generator=torch.Generator().manual_seed(2))
    config = TrainConfig(max_steps=max_steps, seq_len=16, micro_batch_size=2, lr=1e-3, weight_decay=0.0,
                         progress=False, checkpoint_every=2)
    hooks = RecordingWinQ(handle, every=every)
    train(model, tokens, config, tmp_path / "run", hooks=hooks)
    assert hooks.interpolations == max_steps // every
    assert hooks.steps == [k * every - 1 for k in range(1, max_steps // every + 1)]
    names = handle.names
    last_before, last_after = hooks.before[-1], hooks.after[-1]
    for name in names:  # the last interpolation moved the weights (it is not a no-op) ...
        assert not torch.equal(last_after[name], last_before[name]), name
    handle.remove()  # the latent weights stay in the layers
    save_checkpoint(model, None, tmp_path / "out")
    saved = load_file(tmp_path / "out" / "model.safetensors")
    last_is_final = hooks.steps[-1] == max_steps - 1
    for name in names:  # ... and, when it came after the last optimizer step, it is what the checkpoint holds
        assert torch.equal(saved[f"{name}.weight"], last_after[name]) == last_is_final, name
