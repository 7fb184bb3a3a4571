"""Hessian SLQ: Lanczos on known matrices, SLQ on a known spectrum, double-backprop HVPs against analytic and
autograd Hessians, determinism, bad input."""

import json
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

from common.analysis import hessian_vector_product, lanczos, model_hessian_spectrum, slq_density
from common.quantizers.ste import ste_quantize


def rotated(eigenvalues, seed=0):
    """``Q diag(eigenvalues) Q^T`` (float64) with ``Q`` a random orthogonal matrix (QR of a Gaussian)."""
    values = torch.as_tensor(eigenvalues, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(values.numel(), values.numel(), generator=g, dtype=torch.float64))
    return q @ torch.diag(values) @ q.T


def tridiagonal_eigenvalues(alpha, beta):
    t = torch.diag(alpha) + torch.diag(beta, 1) + torch.diag(beta, -1)
    return torch.linalg.eigvalsh(t)


def three_level_matrix():
    """200 x 200: eigenvalue 0 (multiplicity 100), +1 (50), -2 (50)."""
    return rotated([0.0] * 100 + [1.0] * 50 + [-2.0] * 50, seed=1)


def test_lanczos_full_run_gives_every_eigenvalue():
    eigenvalues = torch.linspace(-3.0, 5.0, 30, dtype=torch.float64)
    a = rotated(eigenvalues)
    alpha, beta = lanczos(lambda v: a @ v, 30, 30, torch.Generator().manual_seed(0))
    assert alpha.shape == (30,)
    assert beta.shape == (29,)
    torch.testing.assert_close(tridiagonal_eigenvalues(alpha, beta), eigenvalues, rtol=0, atol=1e-8)


def test_lanczos_stops_at_breakdown():
    # 3 distinct eigenvalues: the Krylov space of a generic start vector is 3-dimensional
    a = rotated([-1.0] * 10 + [0.5] * 10 + [2.0] * 10)
    for reorthogonalize in (True, False):
        alpha, beta = lanczos(lambda v: a @ v, 30, 30, torch.Generator().manual_seed(0),
                              reorthogonalize=reorthogonalize)
        assert alpha.shape == (3,)
        assert beta.shape == (2,)
        torch.testing.assert_close(tridiagonal_eigenvalues(alpha, beta),
                                   torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64), rtol=0, atol=1e-8)


def test_lanczos_caps_steps_at_dim_and_handles_zero():
    a = rotated([1.0, 2.0, 3.0, 4.0, 5.0])
    alpha, beta = lanczos(lambda v: a @ v, 5, 50, torch.Generator().manual_seed(0))
    assert alpha.shape == (5,)
    assert beta.shape == (4,)
    alpha, beta = lanczos(torch.zeros_like, 7, 10, torch.Generator().manual_seed(0))
    assert alpha.tolist() == [0.0]
    assert beta.tolist() == []


def test_lanczos_without_reorthogonalization_agrees_early():
    # orthogonality is lost only as Ritz values converge: the first few coefficients coincide
    a = rotated(torch.linspace(-3.0, 5.0, 30, dtype=torch.float64))
    full = lanczos(lambda v: a @ v, 30, 5, torch.Generator().manual_seed(3))
    plain = lanczos(lambda v: a @ v, 30, 5, torch.Generator().manual_seed(3), reorthogonalize=False)
    torch.testing.assert_close(plain[0], full[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(plain[1], full[1], rtol=0, atol=1e-10)


def test_slq_recovers_a_known_spectrum():
    a = three_level_matrix()
    result = slq_density(lambda v: a @ v, 200, sigma=0.02, seed=0)
    # per probe the weights are Beta distributed (a Gaussian probe's squared projections on the eigenspaces):
    # the 0-space mass Beta(50, 50), sd 0.050; a quarter Beta(25, 75), sd 0.043; over 20 probes the standard
    # errors are 0.011 and 0.0096: a tolerance of 0.05 is ~4.5 standard errors
    assert result["near_zero_mass"] == pytest.approx(0.5, abs=0.05)
    assert result["negative_mass"] == pytest.approx(0.25, abs=0.05)
    assert result["positive_mass"] == pytest.approx(0.25, abs=0.05)
    assert result["near_zero_mass"] + result["negative_mass"] + result["positive_mass"] == pytest.approx(1.0)
    assert result["largest_abs_eigenvalue"] == pytest.approx(2.0, abs=1e-8)
    assert result["near_zero_threshold"] == pytest.approx(0.02, abs=1e-10)
    for nodes, weights in zip(result["nodes"], result["weights"], strict=True):
        assert nodes == pytest.approx([-2.0, 0.0, 1.0], abs=1e-8)  # breakdown after 3 steps
        assert sum(weights) == pytest.approx(1.0, abs=1e-12)
    grid, density = np.array(result["grid"]), np.array(result["density"])
    assert grid.size == 400
    assert grid[0] == pytest.approx(-2.15)  # pad 5% of the node range 3 (> 5 sigma)
    assert grid[-1] == pytest.approx(1.15)
    assert float(np.trapezoid(density, grid)) == pytest.approx(1.0, abs=1e-3)
    assert result["density_mass"] == pytest.approx(1.0, abs=1e-3)
    assert (result["probes"], result["steps"], result["sigma"], result["dim"]) == (20, 50, 0.02, 200)
    json.dumps(result)


def test_slq_default_sigma_is_absolute():
    # sigma 1e-3 in eigenvalue units: on a 400-point grid over [-2.15, 1.15] (spacing 8e-3) the kernels are
    # undersampled and density_mass says so; on a grid around 0 the density integrates to the zero-node mass
    a = three_level_matrix()
    wide = slq_density(lambda v: a @ v, 200, seed=0)
    assert abs(wide["density_mass"] - 1.0) > 0.1
    narrow = slq_density(lambda v: a @ v, 200, seed=0, grid_range=(-0.01, 0.01))
    assert narrow["grid"][0] == -0.01
    assert narrow["grid"][-1] == 0.01
    assert narrow["density_mass"] == pytest.approx(narrow["near_zero_mass"], abs=1e-6)
    assert narrow["nodes"] == wide["nodes"]


def test_slq_absolute_near_zero_threshold():
    # eigenvalues 0, 5e-3, 1 (10 each): 5e-3 is near zero relative to 1 (threshold 0.01), not for the paper's
    # absolute 1e-3; each third's mass is Beta(5, 10) per probe (sd 0.12), 0.026 over 20 probes: tolerance 0.1
    a = rotated([0.0] * 10 + [5e-3] * 10 + [1.0] * 10)
    relative = slq_density(lambda v: a @ v, 30)
    absolute = slq_density(lambda v: a @ v, 30, near_zero_abs=1e-3)
    assert relative["near_zero_threshold"] == pytest.approx(0.01)
    assert absolute["near_zero_threshold"] == 1e-3
    assert relative["near_zero_mass"] == pytest.approx(2 / 3, abs=0.1)
    assert absolute["near_zero_mass"] == pytest.approx(1 / 3, abs=0.1)
    assert relative["near_zero_mass"] - absolute["near_zero_mass"] == pytest.approx(
        absolute["positive_mass"] - relative["positive_mass"], abs=1e-12)
    assert absolute["negative_mass"] == 0.0


def test_slq_is_deterministic_per_seed():
    a = rotated(torch.linspace(-1.0, 3.0, 30, dtype=torch.float64))
    first = slq_density(lambda v: a @ v, 30, probes=3, steps=10, seed=7)
    again = slq_density(lambda v: a @ v, 30, probes=3, steps=10, seed=7)
    other = slq_density(lambda v: a @ v, 30, probes=3, steps=10, seed=8)
    assert first == again
    assert first["nodes"] != other["nodes"]


def test_hvp_of_a_quadratic_is_exact():
    g = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=g, dtype=torch.float64)
    a = m + m.T
    b = torch.randn(6, generator=g, dtype=torch.float64)
    x = nn.Parameter(torch.randn(6, generator=g, dtype=torch.float64))
    calls = []

    def loss():
        calls.append(1)
        return 0.5 * x @ a @ x + b @ x

    hvp = hessian_vector_product(loss, [x])
    for _ in range(3):
        v = torch.randn(6, generator=g, dtype=torch.float64)
        torch.testing.assert_close(hvp(v), a @ v, rtol=0, atol=1e-10)
    assert len(calls) == 1  # the gradient graph is built once and reused


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()


def tiny_batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(5, 2, generator=g, dtype=torch.float64)


def reference_hessian(model, names, x, y):
    """``torch.autograd.functional.hessian`` of the MSE loss over the named parameters, flattened in order."""
    base = dict(model.named_parameters())
    shapes = [base[n].shape for n in names]
    sizes = [base[n].numel() for n in names]

    def loss(flat):
        pieces = {n: p.reshape(s) for n, p, s in zip(names, flat.split(sizes), shapes, strict=True)}
        return nn.functional.mse_loss(functional_call(model, {**base, **pieces}, (x,)), y)

    return torch.autograd.functional.hessian(loss, torch.cat([base[n].detach().reshape(-1) for n in names]))


def test_hvp_matches_autograd_hessian_on_a_two_layer_model():
    model, (x, y) = tiny_model(), tiny_batch()
    names = ["0.weight", "0.bias", "2.weight"]
    params = dict(model.named_parameters())
    hvp = hessian_vector_product(lambda: nn.functional.mse_loss(model(x), y), [params[n] for n in names])
    expected = reference_hessian(model, names, x, y)
    columns = torch.stack([hvp(e) for e in torch.eye(expected.shape[0], dtype=torch.float64)], dim=1)
    torch.testing.assert_close(columns, expected, rtol=0, atol=1e-10)
    # a float32 vector goes in, a float32 product comes out
    assert hvp(torch.ones(expected.shape[0])).dtype == torch.float32


def test_model_hessian_spectrum_over_linear_weights():
    model, (x, y) = tiny_model(), tiny_batch()
    result = model_hessian_spectrum(model, lambda: nn.functional.mse_loss(model(x), y), probes=2, sigma=0.01)
    assert result["parameters"] == ["0.weight", "2.weight"]
    assert result["dim"] == 12 + 8
    eigenvalues = torch.linalg.eigvalsh(reference_hessian(model, ["0.weight", "2.weight"], x, y))
    # 50 steps capped at dim 20: the Ritz values are the eigenvalues
    assert result["largest_abs_eigenvalue"] == pytest.approx(float(eigenvalues.abs().max()), abs=1e-8)
    assert math.fsum(result["weights"][0]) == pytest.approx(1.0, abs=1e-12)


def test_model_hessian_spectrum_uses_latent_weights_of_fake_quantized_layers():
    model, (x, y) = tiny_model(), tiny_batch()
    torch.nn.utils.parametrize.register_parametrization(model[0], "weight", RoundWeight())
    result = model_hessian_spectrum(model, lambda: nn.functional.mse_loss(model(x), y), probes=1, steps=3)
    assert result["parameters"] == ["0.parametrizations.weight.original", "2.weight"]


class RoundWeight(nn.Module):
    def forward(self, w):
        return ste_quantize(w, lambda t: torch.round(t * 4) / 4)


def matvec_30(v):
    return 2.0 * v


@pytest.mark.parametrize(("options", "message"), [
    ({"probes": 0}, r"probes must be an integer >= 1, got 0"),
    ({"steps": 0}, r"steps must be an integer >= 1, got 0"),
    ({"sigma": 0.0}, r"sigma must be a finite number > 0, got 0\.0"),
    ({"sigma": -1e-3}, r"sigma must be a finite number > 0, got -0\.001"),
    ({"grid": 1}, r"grid must be an integer >= 2, got 1"),
    ({"seed": -1}, r"seed must be an integer >= 0, got -1"),
    ({"near_zero": 1.0}, r"near_zero must be .* in \[0, 1\), got 1\.0"),
    ({"near_zero_abs": -1.0}, r"near_zero_abs must be a finite number >= 0, got -1\.0"),
    ({"grid_range": (1.0, 1.0)}, r"grid_range must be finite with lo < hi, got \(1\.0, 1\.0\)"),
])
def test_slq_rejects_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        slq_density(matvec_30, 30, **options)


def test_bad_dimensions_are_rejected():
    with pytest.raises(ValueError, match=r"dim must be an integer >= 1, got 0"):
        slq_density(matvec_30, 0)
    with pytest.raises(ValueError, match=r"matvec returned a tensor of shape \(30,\).* dim = 31 \(dim mismatch\?\)"):
        slq_density(lambda v: matvec_30(v[:30]), 31)
    with pytest.raises(ValueError, match=r"steps must be an integer >= 1, got 0"):
        lanczos(matvec_30, 30, 0, torch.Generator())
    x = nn.Parameter(torch.ones(4, dtype=torch.float64))
    hvp = hessian_vector_product(lambda: (x**3).sum(), [x])
    with pytest.raises(ValueError, match=r"v must be a 1-D tensor of length dim = 4, got a tensor of shape \(5,\)"):
        hvp(torch.ones(5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"v must be a 1-D tensor of length dim = 4, got a tensor of shape \(5,\)"):
        slq_density(hvp, 5)


def test_hvp_rejects_bad_params_and_losses():
    x = nn.Parameter(torch.ones(3))
    unused = nn.Parameter(torch.ones(2))
    with pytest.raises(ValueError, match=r"params is empty"):
        hessian_vector_product(lambda: x.sum(), [])
    with pytest.raises(ValueError, match=r"params\[0\] must be a tensor that requires grad"):
        hessian_vector_product(lambda: x.sum(), [torch.ones(3)])
    with pytest.raises(ValueError, match=r"params\[1\] \(shape \(3,\)\) is given twice"):
        hessian_vector_product(lambda: x.sum(), [x, x])
    with pytest.raises(ValueError, match=r"params\[1\] \(shape \(2,\)\) does not reach the loss"):
        hessian_vector_product(lambda: (x**2).sum(), [x, unused])
    with pytest.raises(ValueError, match=r"loss_fn must return a scalar tensor, got a tensor of shape \(3,\)"):
        hessian_vector_product(lambda: x**2, [x])
    with pytest.raises(ValueError, match=r"params\[0\] .* is not a parameter of Sequential"):
        model_hessian_spectrum(tiny_model(), lambda: x.sum(), [x])


def test_hvp_of_a_loss_linear_in_some_params_has_zero_blocks():
    x = nn.Parameter(torch.ones(3, dtype=torch.float64))
    y = nn.Parameter(torch.ones(2, dtype=torch.float64))
    linear = hessian_vector_product(lambda: 2.0 * x.sum(), [x])
    assert linear(torch.ones(3, dtype=torch.float64)).tolist() == [0.0, 0.0, 0.0]
    mixed = hessian_vector_product(lambda: (x**2).sum() + 3.0 * y.sum(), [x, y])
    v = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=torch.float64)
    assert mixed(v).tolist() == [2.0, 4.0, 6.0, 0.0, 0.0]
