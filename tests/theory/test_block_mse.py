"""block_mse and zero_block_probability: fact-sheet numbers, limits, the independent quad oracle, Monte Carlo of
each term, global scales, other distributions, quadrature convergence and bad input."""

import itertools
import math

import numpy as np
import pytest
import torch
from theory_testing import mc_mse, mc_parts, normal_draw, other_draw, reference_block_mse, within

from common.analysis import block_stats
from common.scaling import quantize_blocks
from common.theory import block_mse, zero_block_probability

T_UE4M3 = 3 * 2.0**-9  # largest block max whose UE4M3 abs-max scale rounds to 0 (E2M1)


@pytest.fixture(scope="module")
def z20():
    return normal_draw(1 << 20)


# ------------------------------------------------------------------------------------- zero-block probability
@pytest.mark.parametrize(("n", "fact"), [(4, 0.33), (8, 0.11), (16, 0.012), (32, 1.5e-4)])
def test_zero_block_probability_matches_the_fact_sheet(n, fact):
    p = zero_block_probability(0.005, n)
    assert p == pytest.approx(math.erf(T_UE4M3 / (0.005 * math.sqrt(2))) ** n, rel=1e-13)
    assert float(f"{p:.2g}") == fact


def test_zero_block_probability_against_monte_carlo(z20):
    for n in (4, 8, 16):
        p = zero_block_probability(0.005, n)
        blocks = z20.numel() // n
        fraction = block_stats(0.005, n, z=z20)["zero_scale_fraction"]
        assert abs(fraction - p) <= 4 * math.sqrt(p * (1 - p) / blocks)


def test_zero_block_probability_of_other_settings():
    assert zero_block_probability(0.005, 4, rule="prevent_zero") == 0.0
    assert zero_block_probability(0.005, 4, scale="e8m0") == 0.0
    t_ue5m3 = 3 * 2.0**-17  # 2^8 times smaller: ue5m3 at sigma equals ue4m3 at 2^8 sigma
    expected = math.erf(t_ue5m3 / (0.005 * math.sqrt(2))) ** 4
    assert zero_block_probability(0.005, 4, scale="ue5m3") == pytest.approx(expected, rel=1e-12)
    assert zero_block_probability(0.005, 4, scale="ue5m3") == pytest.approx(zero_block_probability(0.005 * 256, 4))
    # a global scale g acts as sigma / g
    assert zero_block_probability(0.005, 4, global_scale=0.5) == pytest.approx(zero_block_probability(0.01, 4))
    laplace = zero_block_probability(0.005, 4, dist="laplace")
    assert laplace == pytest.approx((-math.expm1(-T_UE4M3 * math.sqrt(2) / 0.005)) ** 4, rel=1e-13)


# -------------------------------------------------------------------------------------------- structure, limits
def test_parts_sum_to_total_and_are_non_negative():
    for sigma in (1e-4, 0.003, 0.03, 1.0):
        for n in (1, 2, 16, 256):
            parts = block_mse(sigma, n)
            assert parts["total"] == pytest.approx(parts["zero_blocks"] + parts["max_element"] + parts["non_max"],
                                                   rel=1e-15)
            assert min(parts.values()) >= 0
            assert parts["non_max"] == 0 or n > 1


def test_vanishing_sigma_flushes_every_block():
    for sigma in (1e-5, 1e-7):
        parts = block_mse(sigma, 16)
        assert parts["zero_blocks"] == pytest.approx(sigma**2, rel=1e-12)
        assert parts["max_element"] == parts["non_max"] == 0.0
    # prevent_zero keeps the scale at 2^-9 >> sigma: every value still rounds to zero, error = signal power
    assert block_mse(1e-5, 16, rule="prevent_zero")["total"] == pytest.approx(1e-10, rel=1e-12)


def test_huge_sigma_saturates_the_scale():
    sigmas = (1e2, 1e3, 1e4, 1e5, 1e6)
    ratios = [block_mse(sigma, 16)["total"] / sigma**2 for sigma in sigmas]
    assert ratios[0] < 0.02  # 100 sigma still fits below 6 * 448
    assert all(b > a for a, b in itertools.pairwise(ratios))
    # every value clips at c = 6 * 448: MSE = E[(|X| - c)^2] + O(c^2) = sigma^2 - 2 c E|X| + O(c^2)
    for sigma, ratio in zip(sigmas[-2:], ratios[-2:], strict=True):
        assert 1 - ratio == pytest.approx(2 * 2688 * math.sqrt(2 / math.pi) / sigma, rel=0.05)


def test_where_zero_blocks_dominate_and_where_they_vanish():
    dominated = block_mse(0.003, 16)
    assert dominated["zero_blocks"] > 0.9 * dominated["total"]
    vanished = block_mse(0.05, 16)
    assert vanished["zero_blocks"] < 1e-15 * vanished["total"]
    assert vanished["non_max"] > 10 * vanished["max_element"]


# ------------------------------------------------------------------------------------ exactness of the numerics
@pytest.mark.parametrize(("sigma", "n", "scale", "rule"), [
    (0.005, 4, "ue4m3", "absmax"),  # all three terms significant
    (0.01, 2, "ue4m3", "prevent_zero"),
    (2e-5, 4, "ue5m3", "absmax"),
    (0.3, 1, "ue4m3", "absmax"),
    (0.005, 16, "ue4m3", "absmax"),
])
def test_matches_the_nested_quad_oracle(sigma, n, scale, rule):
    reference = reference_block_mse(sigma, n, scale, rule)
    parts = block_mse(sigma, n, scale=scale, rule=rule)
    for name, value in reference.items():
        assert parts[name] == pytest.approx(value, rel=1e-9, abs=1e-12 * reference["total"])


@pytest.mark.parametrize(("dist", "df"), [("normal", None), ("laplace", None), ("student_t", 3.0)])
def test_gauss_legendre_has_converged(dist, df):
    for scale in ("ue4m3", "ue5m3", "e8m0"):
        for sigma in (3e-5, 0.004, 0.1, 3.0):
            for n in (1, 4, 64):
                base = block_mse(sigma, n, scale=scale, dist=dist, df=df)["total"]
                fine = block_mse(sigma, n, scale=scale, dist=dist, df=df, order=32)["total"]
                assert base == pytest.approx(fine, rel=1e-9)


# ------------------------------------------------------------------------------------------------ Monte Carlo
def test_each_term_against_monte_carlo(z20):
    for n in (4, 8, 32):
        parts = block_mse(0.005, n)
        for name, (mc, se) in mc_parts(z20 * 0.005, n).items():
            assert within(parts[name], mc, se), (n, name, parts[name], mc, se)


def test_global_scale_mirrors_quantize_blocks(z20):
    """UE4M3-S: quantize_blocks' per-tensor g = amax / (6 * 448) passed as a number reproduces its MSE."""
    for sigma in (1e-4, 0.02):
        x = z20 * sigma
        g = float(x.abs().amax() / (6 * 448))
        for n in (4, 32):
            mc, se, _ = mc_mse(x, n, global_scale="tensor")
            theory = block_mse(sigma, n, global_scale=g)
            assert within(theory["total"], mc, se), (sigma, n, theory["total"], mc, se)
            assert theory["zero_blocks"] < 1e-12 * theory["total"]  # the global scale removes the underflow
            assert theory["total"] == pytest.approx(g**2 * block_mse(sigma / g, n)["total"], rel=1e-12)


def test_global_scale_is_division_then_multiplication(z20):
    x, g = z20 * 0.01, 2.0**-6  # a power of two: x / g and the product are exact in float32
    q = quantize_blocks(x / g, "e2m1", "ue4m3", 16) * g
    mse = float((x - q).double().square().mean())
    assert block_mse(0.01, 16, global_scale=g)["total"] == pytest.approx(mse, rel=0.02)


@pytest.mark.parametrize(("dist", "df"), [("laplace", None), ("student_t", 5.0), ("student_t", 10.0)])
def test_other_distributions_against_monte_carlo(dist, df):
    z = other_draw(dist, 1 << 20, seed=1, df=df)
    for sigma in (0.004, 0.02, 0.3):
        for n in (8, 64):
            for scale, rule in (("ue4m3", "absmax"), ("ue4m3", "prevent_zero"), ("ue5m3", "absmax")):
                mc, se, _ = mc_mse(z * sigma, n, scale=scale, rule=rule)
                theory = block_mse(sigma, n, scale=scale, rule=rule, dist=dist, df=df)["total"]
                assert within(theory, mc, se), (sigma, n, scale, rule, theory, mc, se)


@pytest.mark.parametrize(("elem", "scale", "rule"), [
    ("e2m1", "e8m0", "absmax"),  # powers of two, no zero: no block is ever flushed
    ("int4", "ue4m3", "absmax"),
    ("e2m3", "e8m0", "prevent_zero"),
    ("binary", "ue4m3", "absmax"),  # one positive element value
    ("e2m1", "hif8", "absmax"),  # tapered scale grid
])
def test_other_formats_against_monte_carlo(z20, elem, scale, rule):
    for sigma in (0.003, 0.3):
        for n in (1, 32):
            mc, se, _ = mc_mse(z20 * sigma, n, elem=elem, scale=scale, rule=rule)
            theory = block_mse(sigma, n, elem, scale, rule)["total"]
            assert within(theory, mc, se), (sigma, n, theory, mc, se)


def test_heavy_student_t_tail_against_monte_carlo():
    """df = 3 (infinite fourth moment): the range reaches the saturated scale; looser, 5% or 4 SE."""
    z = other_draw("student_t", 1 << 20, seed=2, df=3.0)
    for sigma in (0.01, 1.0):
        mc, se, _ = mc_mse(z * sigma, 16)
        theory = block_mse(sigma, 16, dist="student_t", df=3.0)["total"]
        assert within(theory, mc, se, relative=0.05), (sigma, theory, mc, se)


# ------------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sigma": 0.0}, "sigma=0.0"),
    ({"sigma": -1.0}, "sigma=-1.0"),
    ({"sigma": math.nan}, "sigma=nan"),
    ({"sigma": math.inf}, "sigma=inf"),
    ({"block_size": 0}, "block_size=0"),
    ({"block_size": 2.0}, "block_size=2.0"),
    ({"block_size": True}, "block_size=True"),
    ({"dist": "cauchy"}, "unknown dist 'cauchy'"),
    ({"rule": "four_over_six"}, "rule 'four_over_six' is not tractable"),
    ({"rule": "bogus"}, "unknown rule 'bogus'"),
    ({"elem": "e9m9"}, "unknown format 'e9m9'"),
    ({"scale": "bf16"}, "scale format 'bf16'"),
    ({"dist": "student_t"}, "df=None"),
    ({"dist": "student_t", "df": 2.0}, "df=2.0"),
    ({"dist": "student_t", "df": 1}, "df=1"),
    ({"df": 5.0}, "df=5.0 is only for dist='student_t'"),
    ({"global_scale": 0.0}, "global_scale=0.0"),
    ({"global_scale": -2.0}, "global_scale=-2.0"),
    ({"order": 0}, "order=0"),
])
def test_bad_arguments_name_the_value(kwargs, message):
    args = {"sigma": 0.01, "block_size": 16, **kwargs}
    with pytest.raises(ValueError, match=message):
        block_mse(args.pop("sigma"), args.pop("block_size"), **args)
    if "order" not in kwargs:
        rest = {k: v for k, v in kwargs.items() if k not in ("sigma", "block_size")}
        with pytest.raises(ValueError, match=message):
            zero_block_probability(kwargs.get("sigma", 0.01), kwargs.get("block_size", 16), **rest)


def test_numpy_scalars_are_accepted():
    assert block_mse(np.float64(0.01), np.int64(16)) == block_mse(0.01, 16)
    with pytest.raises(ValueError, match="sigma=tensor"):
        block_mse(torch.tensor(0.01), 16)
