"""Standardized distributions of the theory: closed-form tail moments, quantiles and cell errors vs scipy."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from common.theory import cell_error, get_distribution

DISTS = [("normal", None), ("laplace", None), ("student_t", 3.0), ("student_t", 7.5)]
REFERENCE = {  # the law of Z (unit variance) in scipy.stats
    "normal": lambda df: stats.norm(),
    "laplace": lambda df: stats.laplace(scale=1 / math.sqrt(2)),
    "student_t": lambda df: stats.t(df, scale=math.sqrt((df - 2) / df)),
}


@pytest.fixture(params=DISTS, ids=lambda p: f"{p[0]}{'' if p[1] is None else p[1]}")
def pair(request):
    name, df = request.param
    return get_distribution(name, df), REFERENCE[name](df)


def test_density_cdf_and_quantiles_match_scipy(pair):
    dist, ref = pair
    x = np.array([1e-6, 0.01, 0.3, 1.0, 2.5, 6.0, 20.0])
    np.testing.assert_allclose(dist.pdf(x), 2 * ref.pdf(x), rtol=1e-12)
    np.testing.assert_allclose(dist.sf(x), 2 * ref.sf(x), rtol=1e-9)
    np.testing.assert_allclose(np.exp(dist.log_cdf(x)), 2 * ref.cdf(x) - 1, rtol=1e-9)
    p = np.array([1e-13, 1e-6, 0.1, 0.5, 0.9])
    np.testing.assert_allclose(np.exp(dist.log_cdf(dist.ppf(p))), p, rtol=1e-8)  # round trip, small p too
    np.testing.assert_allclose(dist.ppf(p[1:]), ref.ppf(0.5 + p[1:] / 2), rtol=1e-8)
    q = np.array([1e-16, 1e-9, 1e-3, 0.2, 0.7])
    np.testing.assert_allclose(dist.sf(dist.isf(q)), q, rtol=1e-8)
    np.testing.assert_allclose(dist.isf(q), ref.isf(q / 2), rtol=1e-9)


def test_tail_moments_are_the_partial_moments(pair):
    dist, ref = pair
    t0, t1, t2 = dist.tails(np.array([0.0]))
    assert t0[0] == pytest.approx(1.0, rel=1e-14)
    assert t2[0] == pytest.approx(1.0, rel=1e-12)  # unit variance
    assert t1[0] == pytest.approx(2 * ref.expect(lambda z: z, lb=0), rel=1e-8)  # E|Z|
    for x in (0.4, 2.0, 7.0):
        expected = [2 * integrate.quad(lambda z, k=k: z**k * ref.pdf(z), x, np.inf, epsabs=0, epsrel=1e-12)[0]
                    for k in range(3)]
        np.testing.assert_allclose([float(t[0]) for t in dist.tails(np.array([x]))], expected, rtol=1e-9)


@pytest.mark.parametrize(("a", "b", "c"), [
    (0.0, 1e-7, 0.0),  # narrow at zero: P_2 ~ b^3 would cancel from differences of order 1
    (0.0, 3e-3, 2e-3),
    (1.2, 1.2 + 1e-9, 1.2 + 5e-10),  # a tiny cell far from zero
    (2.0, 2.5, 2.25),
    (0.0, 4.0, 0.0),  # wide: closed form
    (3.0, 9.0, 6.0),
    (0.5, np.inf, 1.0),  # saturation cell
])
def test_cell_error_matches_quad(pair, a, b, c):
    dist, ref = pair
    # in u = z - c, so that a tiny cell is not lost to the rounding of z
    expected = 2 * integrate.quad(lambda u: ref.pdf(c + u) * u * u, a - c, b - c, epsabs=0, epsrel=1e-12,
                                  limit=200)[0]
    assert float(cell_error(dist, a, b, c)) == pytest.approx(expected, rel=1e-9)


def test_bad_distribution_arguments():
    with pytest.raises(ValueError, match="unknown dist 'cauchy'"):
        get_distribution("cauchy")
    for df in (None, 2, 1.5, math.inf, True):
        with pytest.raises(ValueError, match=f"df={df!r}"):
            get_distribution("student_t", df)
    with pytest.raises(ValueError, match="df=4 is only for dist='student_t'"):
        get_distribution("normal", 4)
