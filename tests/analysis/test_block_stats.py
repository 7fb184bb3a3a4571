"""block_stats: zero- and floor-scale fractions on planted blocks and on Normal data; bad sigma."""

import math

import pytest
import torch

from common.analysis import block_mse, block_stats, mse_sweep, standard_normal

MIN_SCALE = 2.0**-9  # UE4M3's smallest positive value


def planted():
    """One row of 1024 blocks of 4: 256 blocks whose abs-max scale underflows (max 2^-10: 2^-10 / 6 < 2^-11),
    256 whose scale is exactly the smallest positive UE4M3 value (max 6 * 2^-9), 512 with scale 1."""
    z = torch.zeros(1024, 4)
    z[:256, 0] = 2.0**-10
    z[256:512, 0] = 6 * MIN_SCALE
    z[512:, 0] = 6.0
    z[512:, 1] = -1.0
    return z.reshape(1, 4096)


def test_planted_fractions_with_absmax():
    stats = block_stats(1.0, 4, z=planted())
    # block SSEs: 2^-20 on 256 of the 1024 blocks, else 0: std 2^-20 sqrt(3)/4, over sqrt(1024) and 4 values
    assert stats.pop("mse_standard_error") == pytest.approx(2.0**-29 * 3**0.5, rel=1e-12)
    assert stats == {"sigma": 1.0, "mse": 2.0**-24, "relative_mse": 2.0**-24, "zero_scale_fraction": 0.25,
                     "floor_scale_fraction": 0.5}
    # 256 flushed blocks each lose 2^-20 of energy: 256 * 2^-20 / 4096 = 2^-24; the rest is exact in E2M1


def test_planted_fractions_with_prevent_zero():
    stats = block_stats(1.0, 4, z=planted(), prevent_zero=True)
    assert stats.pop("mse_standard_error") == 0.0
    # the underflowing scales become 2^-9, so 2^-10 is stored exactly as 0.5 * 2^-9
    assert stats == {"sigma": 1.0, "mse": 0.0, "relative_mse": 0.0, "zero_scale_fraction": 0.0,
                     "floor_scale_fraction": 0.5}


def test_floor_of_another_scale_format():
    # UE5M3's smallest positive value is 2^-17: 6 * 2^-9 is far above it, 2^-10 too (2^-10 / 6 > 2^-17)
    stats = block_stats(1.0, 4, z=planted(), scale="ue5m3")
    assert stats["zero_scale_fraction"] == 0.0
    assert stats["floor_scale_fraction"] == 0.0


def test_tiny_sigma_flushes_every_block():
    absmax = block_stats(1e-6, 16, samples=8192)
    assert absmax["zero_scale_fraction"] == 1.0
    assert absmax["floor_scale_fraction"] == 1.0
    x = standard_normal(8192, 0) * 1e-6
    assert absmax["mse"] == float((x.double() ** 2).mean())  # everything flushed: the MSE is the signal power
    assert absmax["relative_mse"] == absmax["mse"] / 1e-12
    rescued = block_stats(1e-6, 16, samples=8192, prevent_zero=True)
    assert rescued["zero_scale_fraction"] == 0.0
    assert rescued["floor_scale_fraction"] == 1.0
    hierarchical = block_stats(1e-6, 16, samples=8192, global_scale="row", global_target=448.0)
    assert hierarchical["zero_scale_fraction"] == 0.0
    assert hierarchical["floor_scale_fraction"] == 0.0
    assert hierarchical["relative_mse"] < 0.1 * absmax["relative_mse"]


@pytest.mark.parametrize("block_size", [4, 64])
def test_unit_sigma_has_no_floor_scales(block_size):
    stats = block_stats(1.0, block_size, samples=8192)
    assert stats["zero_scale_fraction"] == 0.0
    assert stats["floor_scale_fraction"] == 0.0
    assert stats["mse"] == block_mse(1.0, block_size, samples=8192)
    assert stats["relative_mse"] == stats["mse"]


def test_sweep_rows_carry_the_fractions():
    rows = mse_sweep([1e-6, 1.0], [16], {"absmax": {}, "pz": {"prevent_zero": True}}, samples=4096)
    assert [(r["setting"], r["sigma"], r["zero_scale_fraction"], r["floor_scale_fraction"]) for r in rows] == [
        ("absmax", 1e-6, 1.0, 1.0), ("absmax", 1.0, 0.0, 0.0), ("pz", 1e-6, 0.0, 1.0), ("pz", 1.0, 0.0, 0.0)]


@pytest.mark.parametrize(("sigma", "shown"), [(0.0, r"0\.0"), (-1e-3, r"-0\.001"), (math.nan, "nan")])
def test_sigma_must_be_positive(sigma, shown):
    with pytest.raises(ValueError, match=rf"sigma must be > 0, got {shown}$"):
        block_stats(sigma, 4, samples=4096)
    with pytest.raises(ValueError, match=rf"sigma must be > 0, got {shown}$"):
        block_mse(sigma, 4, samples=4096)
