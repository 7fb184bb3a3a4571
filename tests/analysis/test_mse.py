"""Monte Carlo block MSE: exact small cases, the zero-block limit, determinism, bad input."""

import numpy as np
import pytest
import torch

from common.analysis import block_mse, mse_sweep, sigma_grid
from common.scaling import quantize_blocks


def test_block_mse_equals_a_direct_computation():
    z = torch.randn(4, 4096, generator=torch.Generator().manual_seed(3))
    x = z * 0.01
    expected = float(((x - quantize_blocks(x, "e2m1", "ue4m3", 16, "four_over_six")).double() ** 2).mean())
    assert block_mse(0.01, 16, rule="four_over_six", z=z) == expected


@pytest.mark.parametrize("sigma", [1e-5, 5e-4])
def test_small_sigma_rounds_every_block_to_zero(sigma):
    # UE4M3 abs-max scales underflow when bmax/6 < 2^-10: every block is zero, the MSE is the signal power
    # (Region A); prevent-zero keeps the scale at 2^-9, which rescues blocks whose max exceeds 2^-11
    mse = block_mse(sigma, 4, samples=1 << 16)
    z = torch.randn(16, 4096, generator=torch.Generator().manual_seed(0))
    assert mse == pytest.approx(float((z.double() * sigma).pow(2).mean()), rel=1e-12)
    rescued = block_mse(sigma, 4, samples=1 << 16, prevent_zero=True)
    assert rescued == mse if sigma < 1e-4 else rescued < 0.5 * mse


def test_sweep_is_seeded_and_complete():
    settings = {"absmax": {}, "brute": {"rule": "brute_force"}}
    a = mse_sweep([1e-3, 1e-1], [8, 16], settings, samples=1 << 14)
    b = mse_sweep([1e-3, 1e-1], [8, 16], settings, samples=1 << 14)
    assert a == b
    assert len(a) == 8
    for row_abs, row_brute in zip(a[:4], a[4:], strict=True):
        assert row_brute["mse"] <= row_abs["mse"]
        assert row_abs["relative_mse"] == pytest.approx(row_abs["mse"] / row_abs["sigma"] ** 2)


def test_grid_and_bad_input():
    grid = sigma_grid(1e-5, 1, 41)
    assert grid[0] == pytest.approx(1e-5)
    assert grid[-1] == pytest.approx(1.0)
    assert np.allclose(np.diff(np.log10(grid)), 0.125)
    with pytest.raises(ValueError, match=r"low=1\.0"):
        sigma_grid(1.0, 0.1)
    for bad in (3, 0, -4):
        with pytest.raises(ValueError, match=f"block_size must be a positive divisor of 4096, got {bad}"):
            block_mse(0.1, bad, samples=4096)
    with pytest.raises(ValueError, match="multiple of 4096, got 100"):
        block_mse(0.1, 4, samples=100)
