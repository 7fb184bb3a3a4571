"""round_to_format against ml_dtypes (exact), against the reference oracle, policies, dtypes, stochastic rounding."""

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from common.formats import FORMATS, get_format, round_to_format
from common.formats.reference import quantize_reference

ML_DTYPES = {
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "e3m2": ml_dtypes.float6_e3m2fn,
    "e2m3": ml_dtypes.float6_e2m3fn,
    "e2m1": ml_dtypes.float4_e2m1fn,
    "e8m0": ml_dtypes.float8_e8m0fnu,
}
# ml_dtypes' overflow behaviour, which our policy must reproduce: NaN/Inf where the format has them, else saturation
ML_POLICY = {"e4m3": "inf_nan", "e5m2": "inf_nan", "e3m2": "saturate", "e2m3": "saturate", "e2m1": "saturate",
             "e8m0": "inf_nan"}


def probe_values(fmt, n_random=1_000_000, seed=0):
    """Random values over the whole finite range (log-uniform magnitudes, both signs), every grid point, every
    midpoint (ties) and its float32 neighbours, subnormals, +-max and beyond, +-0, +-Inf."""
    g = torch.Generator().manual_seed(seed)
    lo, hi = math.log2(fmt.min_subnormal) - 2, math.log2(fmt.max) + 1.5
    magnitudes = torch.exp2(torch.rand(n_random, generator=g, dtype=torch.float64) * (hi - lo) + lo).float()
    signs = torch.where(torch.rand(n_random, generator=g) < 0.5, -1.0, 1.0)
    grid = torch.tensor(fmt.finite_values, dtype=torch.float64)
    grid = torch.cat([grid, torch.tensor([fmt.max + fmt.ulp_at_max])])
    mids = ((grid[1:] + grid[:-1]) / 2).float()
    mids = mids[mids.isfinite()]
    up, down = torch.tensor(math.inf), torch.tensor(-math.inf)
    around = torch.cat([mids, torch.nextafter(mids, up), torch.nextafter(mids, down)])
    special = torch.tensor([0.0, -0.0, math.inf, -math.inf, fmt.max, -fmt.max, fmt.min_subnormal / 2,
                            fmt.min_subnormal / 4, 3.0e38, -3.0e38, 1e-45, -1e-45])
    return torch.cat([magnitudes * signs, grid.float()[grid.float().isfinite()], around, -around, special])


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_equals_ml_dtypes_exactly(name):
    fmt = get_format(name)
    x = probe_values(fmt)
    assert x.numel() >= 1_000_000
    ours = round_to_format(x, fmt, overflow=ML_POLICY[name]).numpy()
    theirs = x.numpy().astype(ML_DTYPES[name]).astype(np.float32)
    keep = np.ones(x.numel(), dtype=bool)
    if not fmt.has_nan:  # ml_dtypes turns NaN into -0 for NaN-less formats; ours keeps NaN (documented)
        keep &= ~np.isnan(x.numpy())
    if name == "e8m0":
        # ml_dtypes sends float32 subnormals strictly between 2^-127 and 2^-126 up to 2^-126 (not nearest);
        # ours rounds to nearest there, checked against the oracle in test_e8m0_lowest_binade_is_nearest
        a = np.abs(x.numpy())
        keep &= ~((a > 2.0**-127) & (a < 2.0**-126))
    ours, theirs = ours[keep], theirs[keep]
    same = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
    assert same.all(), f"{(~same).sum()} mismatches, first inputs {x.numpy()[~same][:5]}"
    zeros = ours == 0
    np.testing.assert_array_equal(np.signbit(ours[zeros]), np.signbit(theirs[zeros]))  # the sign of zero too


def test_e8m0_lowest_binade_is_nearest():
    x = torch.tensor([1.01 * 2.0**-127, 1.49 * 2.0**-127, 1.5 * 2.0**-127, 1.51 * 2.0**-127])
    assert round_to_format(x, "e8m0").tolist() == [2.0**-127, 2.0**-127, 2.0**-126, 2.0**-126]
    np.testing.assert_array_equal(round_to_format(x, "e8m0").numpy(), quantize_reference(x.numpy(), "e8m0"))


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_saturate_is_clamped_ml_dtypes(name):
    """Under overflow="saturate", every value equals ml_dtypes' cast of the value clamped to +-max."""
    fmt = get_format(name)
    x = probe_values(fmt, n_random=100_000, seed=1)
    x = x[~x.isnan()]
    if not fmt.signed:
        x = x.abs()
    ours = round_to_format(x, fmt, overflow="saturate").numpy()
    clamped = x.clamp(-fmt.max, fmt.max)
    if not fmt.has_zero:
        clamped = clamped.clamp(min=fmt.min_subnormal)
    theirs = clamped.numpy().astype(ML_DTYPES[name]).astype(np.float32)
    if name == "e8m0":  # the ml_dtypes subnormal quirk, see test_equals_ml_dtypes_exactly
        a = np.abs(x.numpy())
        keep = ~((a > 2.0**-127) & (a < 2.0**-126))
        ours, theirs = ours[keep], theirs[keep]
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if f.is_codebook])
@pytest.mark.parametrize("rounding", ["rne", "away"])
def test_equals_reference_oracle(name, rounding):
    fmt = get_format(name)
    policies = ["saturate", "inf_nan"] if (fmt.has_inf or fmt.has_nan) else ["saturate"]
    x = probe_values(fmt, n_random=200_000, seed=2)
    for overflow in policies:
        ours = round_to_format(x, fmt, rounding=rounding, overflow=overflow).double().numpy()
        ref = quantize_reference(x.numpy(), fmt, rounding=rounding, overflow=overflow)
        same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
        assert same.all(), f"{overflow}: inputs {x.numpy()[~same][:5]} -> {ours[~same][:5]} vs {ref[~same][:5]}"


@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if f.is_codebook])
def test_every_output_is_on_the_grid(name):
    fmt = get_format(name)
    x = probe_values(fmt, n_random=50_000, seed=3)
    q = round_to_format(x, fmt).double().numpy()
    finite = q[np.isfinite(q)]
    assert np.isin(finite, fmt.finite_values).all()


def test_overflow_policies_per_format():
    big = torch.tensor([1e6, -1e6, math.inf])
    assert round_to_format(big, "e4m3", overflow="saturate").tolist() == [448.0, -448.0, 448.0]
    assert torch.isnan(round_to_format(big, "e4m3", overflow="inf_nan")).all()
    assert round_to_format(big, "e5m2", overflow="inf_nan").tolist() == [math.inf, -math.inf, math.inf]
    assert round_to_format(big, "hif8", overflow="inf_nan").tolist() == [math.inf, -math.inf, math.inf]
    assert torch.isnan(round_to_format(big, "int8", overflow="inf_nan")).all()
    assert round_to_format(big, "int8").tolist() == [127.0, -127.0, 127.0]
    for name in ("e2m1", "e3m2", "e2m3", "binary"):
        with pytest.raises(ValueError, match="no Inf and no NaN"):
            round_to_format(big, name, overflow="inf_nan")


def test_e5m2_overflow_boundary_ties_to_even():
    # 61440 is the midpoint between max 57344 (mantissa 11) and 2^16 (the Inf slot): ties to even -> Inf
    x = torch.tensor([61440.0, float(np.nextafter(np.float32(61440.0), np.float32(0)))])
    assert round_to_format(x, "e5m2", overflow="inf_nan").tolist() == [math.inf, 57344.0]


def test_unsigned_and_zeroless_edges():
    x = torch.tensor([-1.0, -0.0, 0.0, 1e-45])
    assert round_to_format(x, "ue4m3").tolist() == [0.0, 0.0, 0.0, 0.0]
    assert not round_to_format(x, "ue4m3").signbit().any()
    assert torch.isnan(round_to_format(x, "ue4m3", overflow="inf_nan")[0])
    assert round_to_format(x, "e8m0").tolist() == [2.0**-127] * 4
    e8m0_nan = round_to_format(x, "e8m0", overflow="inf_nan")
    assert torch.isnan(e8m0_nan[:3]).all()
    assert e8m0_nan[3] == 2.0**-127


def test_nan_propagates_everywhere():
    for name in FORMATS:
        assert torch.isnan(round_to_format(torch.tensor([math.nan]), name)).all(), name


def test_integer_and_binary_grids():
    x = torch.tensor([-200.0, -2.5, -0.5, 0.5, 1.5, 2.5, 126.5, 300.0])
    assert round_to_format(x, "int8").tolist() == [-127.0, -2.0, -0.0, 0.0, 2.0, 2.0, 126.0, 127.0]
    assert round_to_format(x, "int8", rounding="away").tolist() == [-127.0, -3.0, -1.0, 1.0, 2.0, 3.0, 127.0, 127.0]
    assert round_to_format(x, "int4").tolist() == [-7.0, -2.0, -0.0, 0.0, 2.0, 2.0, 7.0, 7.0]
    assert round_to_format(x, "ternary").tolist() == [-1.0, -1.0, -0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert round_to_format(torch.tensor([-3.0, -0.1, -0.0, 0.0, 0.2]), "binary").tolist() == [-1.0, -1.0, 1.0, 1.0, 1.0]
    assert round_to_format(x, "int4_tc").tolist() == [-8.0, -2.0, -0.0, 0.0, 2.0, 2.0, 7.0, 7.0]
    assert round_to_format(x, "int3_tc").tolist() == [-4.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0, 3.0]
    ties = torch.tensor([-8.5, -7.5, -4.5, -3.5, 3.5, 7.5])
    assert round_to_format(ties, "int4_tc").tolist() == [-8.0, -8.0, -4.0, -4.0, 4.0, 7.0]
    assert round_to_format(ties, "int4_tc", rounding="away").tolist() == [-8.0, -8.0, -5.0, -4.0, 4.0, 7.0]
    assert round_to_format(ties, "int3_tc").tolist() == [-4.0, -4.0, -4.0, -4.0, 3.0, 3.0]


def test_midrise_grid_and_its_ties():
    x = torch.tensor([-9.0, -3.0, -2.5, -2.0, -1.5, -1.0, -1e-30, -0.0, 0.0, 1e-30, 0.7, 2.0, 2.1, 3.0, 9.0])
    assert round_to_format(x, "midrise2").tolist() == [-3, -3, -3, -3, -1, -1, -1, 1, 1, 1, 1, 1, 3, 3, 3]
    away = [-3, -3, -3, -3, -1, -1, -1, 1, 1, 1, 1, 3, 3, 3, 3]
    assert round_to_format(x, "midrise2", rounding="away").tolist() == away
    # "rne" is ParetoQ's 2-bit rule on v = 4u: the level (round(2u - 1/2) + 1/2) / 2, round half to even
    u = torch.linspace(-0.99, 0.99, 397)  # holds u = -1/2, 0, 1/2 (v = -2, 0, 2: ties)
    paretoq = (torch.round(u * 2 - 0.5) + 0.5) / 2
    assert torch.equal(round_to_format(4 * u, "midrise2") / 4, paretoq)


def test_bf16_rne_equals_torch_cast_and_fp32_is_identity():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(100_000, generator=g) * torch.exp2(torch.randint(-140, 120, (100_000,), generator=g).float())
    x = x[x.isfinite()]
    torch.testing.assert_close(round_to_format(x, "bf16"), x.bfloat16().float(), rtol=0, atol=0)
    assert torch.equal(round_to_format(x, "fp32"), x)
    rounded_away = round_to_format(x, "bf16", rounding="away")
    assert (rounded_away.abs() >= x.bfloat16().float().abs()).float().mean() > 0.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_shape_and_dtype_are_kept(dtype):
    x = torch.randn(3, 5, 7).to(dtype)
    for name in ("e4m3", "hif8", "e2m1", "int4", "e8m0", "ue5m3"):
        q = round_to_format(x, name)
        assert q.shape == x.shape
        assert q.dtype == dtype
        assert torch.equal(q.float(), round_to_format(x.float(), name))  # the bf16 result is exact


def test_non_contiguous_input():
    x = torch.randn(64, 32).t()
    assert torch.equal(round_to_format(x, "e4m3"), round_to_format(x.contiguous(), "e4m3"))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rounding": "nearest"}, "unknown rounding 'nearest'"),
    ({"overflow": "clip"}, "unknown overflow 'clip'"),
])
def test_bad_options_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        round_to_format(torch.ones(2), "e4m3", **kwargs)


@pytest.mark.parametrize("x", [torch.ones(2, dtype=torch.int32), torch.ones(2, dtype=torch.float64),
                               torch.ones(2, dtype=torch.float16)])
def test_bad_dtypes_name_the_dtype(x):
    with pytest.raises(ValueError, match=str(x.dtype)):
        round_to_format(x, "e4m3")


def test_not_a_tensor():
    with pytest.raises(ValueError, match="list"):
        round_to_format([1.0], "e4m3")


@pytest.mark.parametrize("name", ["e2m1", "e4m3", "hif8", "int4", "e8m0", "bf16"])
def test_stochastic_rounding_is_unbiased_and_seeded(name):
    fmt = get_format(name)
    n = 400_000
    # one value strictly between two grid points, away from the ends: the mean must converge to it
    if fmt.is_codebook:
        grid = fmt.finite_values[fmt.finite_values > 0]
        lo, hi = grid[len(grid) // 2], grid[len(grid) // 2 + 1]
    else:
        lo, hi = 1.0, 1.0 + 2.0**-fmt.mantissa_bits
    value = np.float32(lo + 0.3 * (hi - lo))
    x = torch.full((n,), float(value))
    q = round_to_format(x, fmt, rounding="stochastic", generator=torch.Generator().manual_seed(5)).double()
    assert set(q.unique().tolist()) == {lo, hi}
    p = (float(value) - lo) / (hi - lo)
    sigma = (hi - lo) * math.sqrt(p * (1 - p) / n)
    assert abs(q.mean().item() - float(value)) < 4 * sigma
    again = round_to_format(x, fmt, rounding="stochastic", generator=torch.Generator().manual_seed(5))
    assert torch.equal(again.double(), q)
    other = round_to_format(x, fmt, rounding="stochastic", generator=torch.Generator().manual_seed(6))
    assert not torch.equal(other.double(), q)


def test_stochastic_binary_probability():
    x = torch.full((200_000,), 0.5)
    q = round_to_format(x, "binary", rounding="stochastic", generator=torch.Generator().manual_seed(7))
    assert abs(q.mean().item() - 0.5) < 4 * math.sqrt(0.75 / 200_000)
