"""The straight-through estimator and QAT fake quantization of Linear layers."""

import pytest
import torch
from torch import nn

from common.quantizers import attach_fake_quant, quantize_tensor, ste_quantize
from common.recipes import get_recipe
from common.scaling import quantize_blocks


def test_ste_forward_is_exact_and_backward_is_identity():
    x = torch.randn(8, 32, requires_grad=True)
    q = ste_quantize(x, lambda t: quantize_blocks(t, block_size=16))
    assert torch.equal(q, quantize_blocks(x.detach(), block_size=16))
    weights = torch.randn(8, 32)
    (q * weights).sum().backward()
    assert torch.equal(x.grad, weights)


def test_attach_fake_quant_trains_latent_weights_and_restores():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4))
    latent = model[0].weight.detach().clone()
    recipe = get_recipe("MXFP4", activations=True)
    x = torch.randn(5, 32)
    with attach_fake_quant(model, ["0"], recipe):
        assert torch.equal(model[0].weight, quantize_tensor(latent, recipe.weights))
        out = model(x)
        expected = nn.functional.linear(quantize_tensor(x, recipe.activations), quantize_tensor(latent, recipe.weights),
                                        model[0].bias)
        assert torch.equal(model[0](x), expected)
        out.sum().backward()
        grad = model[0].parametrizations.weight.original.grad
        assert grad is not None
        assert torch.isfinite(grad).all()
    assert torch.equal(model[0].weight, latent)  # the latent weights come back, not the quantized ones
    assert not hasattr(model[0], "parametrizations")
    assert not model[0]._forward_pre_hooks


def test_unknown_module_is_rejected():
    with pytest.raises(ValueError, match=r"module '5' is not an nn.Linear of the model \(no such module\)"):
        attach_fake_quant(nn.Sequential(nn.Linear(2, 2)), ["5"], get_recipe("MXFP4"))
