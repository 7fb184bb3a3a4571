"""ParetoQ low-bit quantizers (common.quantizers.lowbit): levels, scale initialisation, gradients, the parametrized
Linear,
noise injection, Hadamard rotation, A8 activations (the PTQ spec, bit for bit), remove() (and materialize), the noise
generator's state, and the integer codes of every bit width (codes x scale bit-equal to the forward)."""

import math

import pytest
import torch
import transformers
from torch import nn
from torch.nn.utils import parametrize

from common.formats import decode, encode, get_format
from common.ptq import QuantSpec
from common.quantizers import (
    LOWBIT_CODES,
    attach_lowbit,
    effective_weight,
    hadamard_matrix,
    init_alpha,
    int8_per_token,
    lowbit_codes,
    lowbit_grads,
    lowbit_quantize,
    lowbit_selection,
    quantize_tensor,
)
from common.quantizers.lowbit import ALPHA_EPS, lowbit_spec, lowbit_ste
from common.recipes import INT8_PER_TOKEN, LOWBIT_BITS, LowBitRecipe

G = torch.tensor([[1.0, 2.0, -1.0, 0.5], [3.0, -1.0, 2.0, -2.0]])


def linear_with(weight, bias=None):
    model = nn.Sequential(nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None))
    with torch.no_grad():
        model[0].weight.copy_(weight)
        if bias is not None:
            model[0].bias.copy_(bias)
    return model


def close(actual, expected):
    """Equal up to float32 rounding of a few products and sums (about 2 ulp)."""
    return torch.allclose(actual, expected, rtol=2.5e-7, atol=1e-7)


def autograd_grads(weight, alpha, bits, grad=G):
    w, a = weight.clone().requires_grad_(), alpha.clone().requires_grad_()
    lowbit_ste(w, a, bits).backward(grad)
    return w.grad, a.grad


# --- levels -------------------------------------------------------------------------------------------------------

def test_binary_levels_and_sign_of_zero_is_plus_one():
    w = torch.tensor([[0.5, -0.25, 0.0, 2.0], [-1.0, 0.125, 3.0, -0.0]])
    alpha = torch.tensor([[0.5], [2.0]])
    expected = torch.tensor([[0.5, -0.5, 0.5, 0.5], [-2.0, 2.0, 2.0, 2.0]])
    assert torch.equal(lowbit_quantize(w, alpha, 1), expected)


def test_ternary_levels_are_minus_two_thirds_zero_two_thirds():
    w = torch.tensor([[-1.5, -0.5, -0.3, 0.3, 0.32, 0.5, 0.99, 2.0]])
    for scale in (1.0, 2.0):
        q = lowbit_quantize(w * scale, torch.tensor([[scale]]), 1.58)
        expected = torch.tensor([[-1.0, -1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]]) / 1.5 * scale
        assert torch.equal(q, expected)
    levels = set(lowbit_quantize(torch.linspace(-3, 3, 601)[None], torch.tensor([[1.0]]), 1.58)[0].tolist())
    assert levels == {float(torch.tensor(-2 / 3)), 0.0, float(torch.tensor(2 / 3))}


def test_two_bit_levels_are_quarters_and_three_quarters():
    w = torch.tensor([[-2.0, -0.6, -0.4, -0.1, 0.0, 0.1, 0.49, 0.51, 0.9, 5.0]])
    expected = torch.tensor([[-0.75, -0.75, -0.25, -0.25, 0.25, 0.25, 0.25, 0.75, 0.75, 0.75]])
    assert torch.equal(lowbit_quantize(w, torch.tensor([[1.0]]), 2), expected)  # 0 -> round(-0.5) = -0 -> +1/4
    assert torch.equal(lowbit_quantize(w * 4, torch.tensor([[4.0]]), 2), expected * 4)


def test_lsq_levels_round_half_to_even_and_clamp():
    w3 = torch.tensor([[-3.0, -1.25, -0.75, -0.2, 0.25, 0.75, 1.4, 9.0]])  # u = w / 0.5
    assert torch.equal(lowbit_quantize(w3, torch.tensor([[0.5]]), 3),
                       torch.tensor([[-2.0, -1.0, -1.0, 0.0, 0.0, 1.0, 1.5, 1.5]]))
    w4 = torch.tensor([[-3.0, -1.9, 0.3, 1.0, 1.8, 2.0]])  # u = w / 0.25
    assert torch.equal(lowbit_quantize(w4, torch.tensor([[0.25]]), 4),
                       torch.tensor([[-2.0, -2.0, 0.25, 1.0, 1.75, 1.75]]))


def test_alpha_is_clamped_below_at_eps():
    w = torch.tensor([[2e-5, -1e-5, 1.0], [2e-5, -1e-5, 1.0]])
    q = lowbit_quantize(w, torch.tensor([[0.0], [-1.0]]), 3)
    assert torch.equal(q, torch.tensor([[2.0, -1.0, 3.0]] * 2) * torch.tensor(ALPHA_EPS))


def test_init_alpha_per_row():
    w = torch.tensor([[0.5, -0.25, 0.0, 2.0], [-1.0, 0.125, 3.0, -7.0]])
    assert torch.equal(init_alpha(w, 1), torch.tensor([[0.6875], [2.78125]]))  # mean |W|
    assert torch.equal(init_alpha(w, 1.58), torch.tensor([[2.0], [7.0]]))  # max |W|
    assert torch.equal(init_alpha(w, 2), torch.tensor([[2.0], [7.0]]))
    assert torch.equal(init_alpha(w, 3), torch.tensor([[2.0], [7.0]]) / 3)  # max |W| / Qp
    assert torch.equal(init_alpha(w, 4), torch.tensor([[2.0 / 7], [1.0]]))


# --- gradients ----------------------------------------------------------------------------------------------------

def test_binary_gradients():
    w = torch.tensor([[0.5, -1.5, 0.0, 1.0], [-0.2, 0.8, -0.9, 1.2]])
    alpha = torch.tensor([[1.0], [0.5]])  # u = [[0.5, -1.5, 0, 1], [-0.4, 1.6, -1.8, 2.4]]
    middle = torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])  # |u| <= 1
    sign = torch.tensor([[1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, -1.0, 1.0]])  # sign(0) := +1
    grad_w, grad_alpha = autograd_grads(w, alpha, 1)
    assert torch.equal(grad_w, middle * G)
    assert close(grad_alpha, torch.tensor([[-1.5], [-8.0]]) / math.sqrt(8 * 1))
    assert close(grad_alpha, (sign * G).sum(-1, keepdim=True) / math.sqrt(8))


def test_ternary_gradients():
    w = torch.tensor([[-1.2, -0.3, 0.6, 1.0], [0.5, -2.5, 1.5, 0.25]])
    alpha = torch.tensor([[1.0], [2.0]])  # u = [[-1.2, -0.3, 0.6, 1.0], [0.25, -1.25, 0.75, 0.125]]
    middle = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]])  # |u| <= 0.99
    # small -> -1, big -> +1 (ParetoQ: (n - shift) / n = 1), middle -> q(u) - u with q(u) in {-2/3, 0, 2/3}
    slope = torch.tensor([[-1.0, 0.3, 2 / 3 - 0.6, 1.0], [-0.25, -1.0, 2 / 3 - 0.75, -0.125]])
    grad_w, grad_alpha = autograd_grads(w, alpha, 1.58)
    assert torch.equal(grad_w, middle * G)
    expected = (slope * G).sum(-1, keepdim=True) / math.sqrt(8 * 1)
    assert close(grad_alpha, expected)


def test_two_bit_gradients():
    w = torch.tensor([[-1.2, -0.3, 0.6, 1.0], [0.5, -2.5, 1.5, 0.25]])
    alpha = torch.tensor([[1.0], [2.0]])
    middle = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0]])
    # small -> -3/4, big -> +3/4 (ParetoQ: (n - shift) / n), middle -> q(u) - u with q(u) in {+-1/4, +-3/4}
    slope = torch.tensor([[-0.75, -0.25 + 0.3, 0.75 - 0.6, 0.75], [0.25 - 0.25, -0.75, 0.75 - 0.75, 0.25 - 0.125]])
    grad_w, grad_alpha = autograd_grads(w, alpha, 2)
    assert torch.equal(grad_w, middle * G)
    assert close(grad_alpha, torch.tensor([[-0.425], [0.5]]) / math.sqrt(8 * 1))
    assert close(grad_alpha, (slope * G).sum(-1, keepdim=True) / math.sqrt(8))


def test_lsq_three_bit_gradients():
    w = torch.tensor([[-5.0, -0.6, 0.7, 4.0], [1.25, -9.0, 0.5, 7.0]])
    alpha = torch.tensor([[1.0], [2.0]])  # u = [[-5, -0.6, 0.7, 4], [0.625, -4.5, 0.25, 3.5]]
    middle = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]])  # -4 <= u <= 3
    slope = torch.tensor([[-4.0, -0.4, 0.3, 3.0], [0.375, -4.0, -0.25, 3.0]])  # Qn, round(u) - u, Qp
    grad_w, grad_alpha = autograd_grads(w, alpha, 3)
    assert torch.equal(grad_w, middle * G)
    assert close(grad_alpha, (slope * G).sum(-1, keepdim=True) / math.sqrt(8 * 3))
    by_hand = torch.tensor([[-4.0 - 0.8 - 0.3 + 1.5], [1.125 + 4.0 - 0.5 - 6.0]]) / math.sqrt(24)
    assert close(grad_alpha, by_hand)


def test_lsq_four_bit_gradient_scale_uses_qp_seven():
    w, alpha = torch.tensor([[0.3, -9.0]]), torch.tensor([[1.0]])  # u = 0.3 (middle), -9 (small, Qn = -8)
    grad_w, grad_alpha = autograd_grads(w, alpha, 4, torch.tensor([[1.0, 1.0]]))
    assert torch.equal(grad_w, torch.tensor([[1.0, 0.0]]))
    assert close(grad_alpha, torch.tensor([[-0.3 - 8.0]]) / math.sqrt(2 * 7))


def test_alpha_gradient_uses_the_clamped_alpha_and_reaches_the_parameter():
    w = torch.tensor([[2e-5, 1.0]])
    grad_w, grad_alpha = autograd_grads(w, torch.tensor([[-3.0]]), 3, torch.tensor([[1.0, 1.0]]))
    expected_w, expected_alpha = lowbit_grads(w, torch.tensor([[ALPHA_EPS]]), torch.tensor([[1.0, 1.0]]), 3)
    assert torch.equal(grad_w, torch.tensor([[1.0, 0.0]]))  # u = 2 (middle), 1e5 (big)
    assert torch.equal(grad_w, expected_w)
    assert torch.equal(grad_alpha, expected_alpha)


# --- the parametrized Linear ----------------------------------------------------------------------------------------

W = torch.tensor([[0.5, -1.0, 0.25, 2.0], [-4.0, 1.0, 3.0, 0.0]])
Q2 = torch.tensor([[0.5, -1.5, 0.5, 1.5], [-3.0, 1.0, 3.0, 1.0]])  # 2-bit, alpha = max|W| = 2, 4
X = torch.tensor([[1.0, 2.0, -0.5, 0.25], [-3.0, 0.5, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
B = torch.tensor([0.5, -0.25])


def test_parametrized_linear_forward_is_exactly_x_times_quantized_weight():
    model = linear_with(W, B)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(2))
    assert torch.equal(handle.alphas()["0"], torch.tensor([[2.0], [4.0]]))
    assert torch.equal(handle.quantized_weight("0"), Q2)
    assert torch.equal(model[0].weight, Q2)
    assert torch.equal(model(X), X @ Q2.T + B)
    assert torch.equal(handle.latent_weight("0"), W)


def test_alphas_and_latent_weights_are_model_parameters():
    model = linear_with(W)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(1))
    parameters = list(model.parameters())
    assert any(p is handle.alphas()["0"] for p in parameters)
    assert any(p is handle.latent_weight("0") for p in parameters)
    assert "0.parametrizations.weight.0.alpha" in model.state_dict()
    model(X).sum().backward()
    assert handle.alphas()["0"].grad.shape == (2, 1)


def test_remove_restores_plain_linears_with_latent_weights_and_is_idempotent():
    model = linear_with(W, B)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(2, activation_bits=8))
    latent = handle.latent_weight("0")
    with torch.no_grad():
        latent.add_(0.125)  # as an optimizer step would
    handle.remove()
    handle.remove()
    assert model[0].weight is latent
    assert torch.equal(model[0].weight, W + 0.125)
    assert not hasattr(model[0], "parametrizations")
    assert not model[0]._forward_pre_hooks
    assert len(list(model.parameters())) == 2  # weight, bias: the alpha went
    assert torch.equal(model(X), nn.functional.linear(X, W + 0.125, B))


def test_context_manager_removes():
    model = linear_with(W)
    with attach_lowbit(model, ["0"], LowBitRecipe(3)):
        assert hasattr(model[0], "parametrizations")
    assert not hasattr(model[0], "parametrizations")


# --- noise ----------------------------------------------------------------------------------------------------------

def noisy_expected(weight, alpha, bits, sigma, seed):
    generator = torch.Generator().manual_seed(seed)
    noise_w = torch.randn(weight.shape, generator=generator)
    noise_a = torch.randn(alpha.shape, generator=generator)
    return weight + sigma * noise_w, alpha + sigma * noise_a


def test_noise_in_training_forward_only_and_gradients_use_the_noisy_tensors():
    model = linear_with(W)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(2))
    alpha = handle.alphas()["0"].detach().clone()
    handle.set_noise(0.25, seed=3)
    noisy_w, noisy_a = noisy_expected(W, alpha, 2, 0.25, 3)
    out = model(X)
    assert torch.equal(out, X @ lowbit_quantize(noisy_w, noisy_a, 2).T)
    out.backward(torch.ones_like(out))
    grad_w, grad_a = lowbit_grads(noisy_w, noisy_a, torch.ones(3, 2).T @ X, 2)
    assert torch.equal(handle.latent_weight("0").grad, grad_w)
    assert torch.equal(handle.alphas()["0"].grad, grad_a)
    model.eval()
    assert torch.equal(model(X), X @ Q2.T)  # no noise in eval mode
    assert torch.equal(handle.quantized_weight("0"), Q2)


def test_noise_is_reproducible_from_the_seed_and_off_at_sigma_zero():
    def draws(seed, sigma=1e-3, count=2):
        model = linear_with(W)
        handle = attach_lowbit(model, ["0"], LowBitRecipe(4))
        handle.set_noise(sigma, seed)
        return [model[0].weight.detach() for _ in range(count)]

    first, again, other = draws(0), draws(0), draws(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[0], first[1])  # fresh noise every forward
    clean = draws(0, sigma=0.0, count=1)[0]
    assert torch.equal(clean, lowbit_quantize(W, init_alpha(W, 4), 4))


def test_noise_generator_state_round_trip():
    model = linear_with(W)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(3))
    handle.set_noise(0.1, seed=5)
    model[0].weight  # noqa: B018 (one draw advances the generator)
    state = handle.state_dict()
    continued = model[0].weight.detach()
    other_model = linear_with(W)
    other = attach_lowbit(other_model, ["0"], LowBitRecipe(3))
    other.load_state_dict(state)
    assert torch.equal(other_model[0].weight, continued)
    handle.load_state_dict(state)
    assert torch.equal(model[0].weight, continued)
    assert state["noise"]["sigma"] == 0.1
    assert state["noise"]["seed"] == 5


# --- Hadamard -----------------------------------------------------------------------------------------------------

def test_hadamard_matrix_is_normalized_sylvester_and_orthogonal():
    h4 = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -1.0, -1.0],
                       [1.0, -1.0, -1.0, 1.0]]) / 2
    assert torch.equal(hadamard_matrix(4), h4)
    assert torch.equal(hadamard_matrix(1), torch.ones(1, 1))
    h = hadamard_matrix(64)
    assert torch.allclose(h @ h.T, torch.eye(64), rtol=0, atol=1e-6)
    assert torch.equal(h, h.T)


def test_hadamard_effective_weight_is_q_of_rotated_times_h_transposed():
    model = linear_with(W)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(2, hadamard=True))
    h = hadamard_matrix(4)
    rotated = W @ h
    assert torch.equal(handle.alphas()["0"], init_alpha(rotated, 2))
    expected = lowbit_quantize(rotated, init_alpha(rotated, 2), 2) @ h.T
    assert torch.equal(handle.quantized_weight("0"), expected)
    assert torch.equal(model[0].weight, expected)
    assert torch.equal(effective_weight(W, init_alpha(rotated, 2), 2, h), expected)
    assert not torch.equal(expected, lowbit_quantize(W, init_alpha(W, 2), 2))


# --- A8 -----------------------------------------------------------------------------------------------------------

def test_int8_per_token_levels():
    x = torch.tensor([[127.0, -3.4, 50.5, 0.0], [254.0, 1.0, -3.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    expected = torch.tensor([[127.0, -3.0, 50.0, 0.0], [254.0, 0.0, -4.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert torch.equal(int8_per_token(x), expected)  # s = 1, 2, and 1 for the zero token; ties to even
    assert torch.equal(int8_per_token(x[None]), expected[None])  # per token along the last dimension


def test_a8_forward_and_straight_through_gradient():
    model = linear_with(W, B)
    attach_lowbit(model, ["0"], LowBitRecipe(2, activation_bits=8))
    x = (X * 127).requires_grad_()  # s = 254, 381, 1: x / s is exact
    x_q = int8_per_token(x.detach())
    assert not torch.equal(x_q, x.detach())
    out = model(x)
    assert torch.equal(out, x_q @ Q2.T + B)
    grad = torch.tensor([[1.0, -2.0], [0.5, 0.25], [3.0, 1.0]])
    out.backward(grad)
    assert torch.equal(x.grad, grad @ Q2)  # identity through the activation quantizer


# --- selection and bad input --------------------------------------------------------------------------------------

def test_lowbit_selection_is_every_block_linear_not_embeddings_or_head():
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32))
    projections = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                   "mlp.up_proj", "mlp.down_proj")
    assert lowbit_selection(model) == [f"model.layers.{i}.{p}" for i in range(2) for p in projections]


def test_bad_inputs_raise_naming_the_value():
    assert LOWBIT_BITS == (1, 1.58, 2, 3, 4)
    with pytest.raises(ValueError, match=r"unknown weight bit width 5; valid: 1, 1\.58, 2, 3, 4"):
        attach_lowbit(linear_with(W), ["0"], LowBitRecipe(5))
    with pytest.raises(ValueError, match=r"unknown weight bit width True"):
        lowbit_spec(True)
    with pytest.raises(ValueError, match=r"unknown weight bit width 1\.5;"):
        init_alpha(W, 1.5)
    with pytest.raises(ValueError, match=r"unknown activation bit width 4; valid: None \(A16\), 8"):
        attach_lowbit(linear_with(W), ["0"], LowBitRecipe(2, activation_bits=4))
    with pytest.raises(ValueError, match=r"Hadamard size must be a power of two, got 6"):
        attach_lowbit(linear_with(torch.ones(2, 6)), ["0"], LowBitRecipe(2, hadamard=True))
    with pytest.raises(ValueError, match=r"Hadamard size must be a power of two, got 0"):
        hadamard_matrix(0)
    model = linear_with(W)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(2))
    with pytest.raises(ValueError, match=r"the weight of '0' is already parametrized"):
        attach_lowbit(model, ["0"], LowBitRecipe(2))
    with pytest.raises(ValueError, match=r"noise sigma must be a finite number >= 0, got -0\.1"):
        handle.set_noise(-0.1, 0)
    with pytest.raises(ValueError, match=r"noise sigma must be a finite number >= 0, got inf"):
        handle.set_noise(math.inf, 0)
    with pytest.raises(ValueError, match=r"noise seed must be an integer, got 1\.5"):
        handle.set_noise(0.1, 1.5)
    with pytest.raises(ValueError, match=r"'1' is not a quantized layer of this handle"):
        handle.quantized_weight("1")
    with pytest.raises(ValueError, match=r"module 'nope' is not an nn.Linear"):
        attach_lowbit(model, ["nope"], LowBitRecipe(2))
    with pytest.raises(ValueError, match=r"expected a LowBitRecipe, got 2"):
        attach_lowbit(linear_with(W), ["0"], 2)


def int8_per_token_formula(x):
    """The A8 formula written out (ParetoQ): s = max|x| / 127 per token, s = 1 where the max is 0."""
    amax = x.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / 127)
    return torch.clamp(torch.round(x / scale), -128, 127) * scale


@pytest.mark.parametrize("seed", range(4))
def test_int8_per_token_is_the_quant_spec_and_the_formula_bit_for_bit(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 9, 48, generator=g) * torch.exp2(torch.randint(-40, 40, (6, 9, 1), generator=g).float())
    x[0, 2] = 0.0  # an all-zero token
    x[1, 3] = -0.0
    x[2, :, 7] = 0.0  # zeros inside tokens
    x[3, 4, 5] = x[3, 4].abs().max() * 0.5 / 127 * 3  # a tie (x / s = 1.5) up to rounding of s
    expected = int8_per_token_formula(x)
    assert torch.equal(int8_per_token(x), expected)
    assert torch.equal(quantize_tensor(x, INT8_PER_TOKEN), expected)
    assert QuantSpec("int8", "fp32", "row", "absmax") == INT8_PER_TOKEN


# --- codes --------------------------------------------------------------------------------------------------------

def weights_with_edge_cases(bits, seed):
    """Random (64 x 96) weights with exact zeros, exact ties of the rounding, a tiny and a negative alpha (both
    clamped to 1e-5) and a row far beyond the clip range."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(64, 96, generator=g) * 0.05
    alpha = init_alpha(w, bits) * (0.5 + torch.rand(64, 1, generator=g))
    w[0, :8] = 0.0
    w[1, :4] = -0.0
    alpha[2:6] = 0.25  # power of two: u = w / alpha is exact, so the ties below are exact ties
    ties = {1: [0.0], 1.58: [1 / 3], 2: [-0.5, 0.0, 0.5, 0.25, -0.75], 3: [0.5, -0.5, 1.5, -2.5, 3.5, -4.5],
            4: [0.5, 2.5, -7.5, 7.5, -8.5]}[bits]
    w[2:6, : len(ties)] = torch.tensor(ties) * 0.25
    alpha[6], alpha[7] = 1e-9, -1.0
    w[8] *= 100.0
    return w, alpha


@pytest.mark.parametrize("bits", LOWBIT_BITS)
@pytest.mark.parametrize("seed", range(3))
def test_lowbit_codes_times_scale_is_the_forward_bit_for_bit(bits, seed):
    w, alpha = weights_with_edge_cases(bits, seed)
    fmt, parts = lowbit_codes(w, alpha, bits)
    formats = {1: "binary", 1.58: "ternary", 2: "midrise2", 3: "int3_tc", 4: "int4_tc"}
    assert fmt == LOWBIT_CODES[bits][0] == formats[bits]
    assert parts.global_ is None
    assert parts.block.shape == (64, 1)
    assert parts.elements.shape == w.shape
    assert torch.equal(parts.elements * parts.block, lowbit_quantize(w, alpha, bits))
    grid = torch.tensor(get_format(fmt).finite_values, dtype=torch.float32)
    assert torch.isin(parts.elements, grid).all()  # the codes are levels of the format
    assert torch.equal(decode(encode(parts.elements, fmt), fmt), parts.elements)
    alpha_c = torch.where(alpha > ALPHA_EPS, alpha, torch.full_like(alpha, ALPHA_EPS))
    step = {1: 1.0, 1.58: float(torch.tensor(1.0) / 1.5), 2: 0.25, 3: 1.0, 4: 1.0}[bits]
    assert torch.equal(parts.block, alpha_c * step)


def test_ternary_scale_is_the_forward_expression():
    """The forward forms ``fl(fl(1 / 1.5) alpha)``; so does the code scale (fl(2/3) is the same float32)."""
    alpha = torch.rand(10_000, 1, generator=torch.Generator().manual_seed(0)) + 1e-3
    fl = torch.tensor(1.0) / 1.5
    assert fl == torch.tensor(2.0) / 3
    _, parts = lowbit_codes(torch.ones(10_000, 1), alpha, 1.58)  # u = 1 / alpha >= clip: code 1
    assert torch.equal(parts.elements, torch.ones(10_000, 1))
    assert torch.equal(parts.block, alpha * fl)
    assert torch.equal(parts.block, lowbit_quantize(torch.ones(10_000, 1), alpha, 1.58))


def test_lowbit_codes_rejects_unknown_bits():
    with pytest.raises(ValueError, match=r"unknown weight bit width 5"):
        lowbit_codes(W, torch.ones(2, 1), 5)


@pytest.mark.parametrize("bits", LOWBIT_BITS)
def test_remove_materialize_keeps_the_effective_weights(bits):
    model = linear_with(W, B)
    handle = attach_lowbit(model, ["0"], LowBitRecipe(bits, activation_bits=8))
    effective = handle.quantized_weight("0")
    latent = handle.latent_weight("0").detach().clone()
    handle.remove(materialize=True)
    assert not parametrize.is_parametrized(model[0], "weight")
    assert not model[0]._forward_pre_hooks
    assert torch.equal(model[0].weight, effective)
    assert not torch.equal(model[0].weight, latent)
    handle.remove(materialize=True)  # idempotent
    assert torch.equal(model[0].weight, effective)
