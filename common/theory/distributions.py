"""Standardized (unit-variance) symmetric distributions, described through the magnitude ``|X|``.

The theory works in units of the data's standard deviation: ``X = sigma * Z`` with ``Var Z = 1``, and only the
law of ``|Z|`` enters (the quantizers are symmetric). Every distribution gives, for ``x >= 0``:

* ``pdf(x)``: the density ``g`` of ``|Z|`` (twice the density of ``Z``);
* ``log_cdf(x)``, ``sf(x)``: ``log G(x)`` and ``1 - G(x)``, ``G(x) = P(|Z| <= x)``, each without cancellation;
* ``ppf(p)`` / ``isf(q)``: ``G^-1(p)`` and ``G^-1(1 - q)``;
* ``tails(x)``: the upper partial moments ``T_k(x) = int_x^inf g(t) t^k dt`` for ``k = 0, 1, 2`` in closed form
  (``T_0 = sf``, ``T_2(0) = 1``);
* ``slope(x)``: ``|d log g / dx|``, the rate at which the density changes (sets the width below which an interval
  counts as narrow for :func:`cell_error`).

Closed forms (``phi`` the standard normal density):

* normal, ``Z ~ N(0, 1)``: ``T_0 = erfc(x / sqrt 2)``, ``T_1 = 2 phi(x)``, ``T_2 = x T_1 + T_0``.
* laplace, ``Z ~ Laplace(0, b)`` with ``b = 1 / sqrt 2`` (so ``|Z| ~ Exp`` with mean ``b``):
  ``T_0 = e^(-x/b)``, ``T_1 = e^(-x/b) (x + b)``, ``T_2 = e^(-x/b) (x^2 + 2 b x + 2 b^2)``.
* student_t, ``Z = kappa T`` with ``T ~ t_nu``, ``kappa = sqrt((nu - 2) / nu)`` (``nu > 2``); with
  ``y = x / kappa``, ``f_nu`` the t density and ``S_nu(y) = P(|T| > y) = I_{nu / (nu + y^2)}(nu / 2, 1 / 2)``
  (regularized incomplete beta): ``T_0 = S_nu(y)``, ``T_1 = 2 kappa (nu + y^2) f_nu(y) / (nu - 1)``,
  ``T_2 = kappa^2 [nu (nu - 1) / (nu - 2) S_{nu-2}(y r) - nu S_nu(y)]``, ``r = sqrt((nu - 2) / nu)``. The last one
  uses ``(nu + t^2) f_nu(t) = nu (nu - 1) / (nu - 2) r f_{nu-2}(t r)`` (the bracket is a t_{nu-2} density in
  disguise); at ``x = 0`` it gives ``kappa^2 nu / (nu - 2) = 1``.

``cell_error(dist, a, b, c) = int_a^b g(x) (x - c)^2 dx`` is the error integral of one quantizer cell (values in
``[a, b]`` all rounding to ``c``). On *wide* intervals it is ``P_2 - 2 c P_1 + c^2 P_0`` with
``P_k = T_k(a) - T_k(b)``; the cancellation there costs at most ``log10(c^2 / mean (x - c)^2)`` digits, a few.
On *narrow* intervals (width below 2 density lengths ``1 / max(1, slope)``) the moment differences would cancel
catastrophically (``P_2(0, b) ~ b^3`` from terms of order 1), so the integral is taken by 16-point
Gauss-Legendre instead, whose error on an integrand that is a quadratic times a density varying by less than
``e^2`` over the interval is far below double rounding. Both branches are exact to rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

SQRT2 = math.sqrt(2.0)
TWO_PHI0 = math.sqrt(2.0 / math.pi)  # density of |Z| at 0 for the standard normal
NARROW_LENGTHS = 2.0  # intervals narrower than this many density lengths are integrated by Gauss-Legendre
CELL_NODES = 16
_CELL_X, _CELL_W = np.polynomial.legendre.leggauss(CELL_NODES)


@dataclass(frozen=True)
class Normal:
    """Standard normal ``N(0, 1)``."""

    name: str = "normal"

    def pdf(self, x: np.ndarray) -> np.ndarray:
        return TWO_PHI0 * np.exp(-0.5 * x * x)

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(x < 1.0, np.log(special.erf(x / SQRT2)), np.log1p(-special.erfc(x / SQRT2)))

    def sf(self, x: np.ndarray) -> np.ndarray:
        return special.erfc(x / SQRT2)

    def ppf(self, p: np.ndarray) -> np.ndarray:
        return SQRT2 * special.erfinv(p)

    def isf(self, q: np.ndarray) -> np.ndarray:
        return SQRT2 * special.erfcinv(q)

    def tails(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t0 = special.erfc(x / SQRT2)
        t1 = TWO_PHI0 * np.exp(-0.5 * x * x)
        return t0, t1, x * t1 + t0

    def slope(self, x: np.ndarray) -> np.ndarray:
        return np.abs(x)


@dataclass(frozen=True)
class Laplace:
    """Laplace with unit variance: scale ``b = 1 / sqrt 2``; ``|Z|`` is exponential with mean ``b``."""

    name: str = "laplace"
    b: float = 1.0 / SQRT2

    def pdf(self, x: np.ndarray) -> np.ndarray:
        return np.exp(-x / self.b) / self.b

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(-np.expm1(-x / self.b))

    def sf(self, x: np.ndarray) -> np.ndarray:
        return np.exp(-x / self.b)

    def ppf(self, p: np.ndarray) -> np.ndarray:
        return -self.b * np.log1p(-p)

    def isf(self, q: np.ndarray) -> np.ndarray:
        return -self.b * np.log(q)

    def tails(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        b = self.b
        t0 = np.exp(-x / b)
        return t0, t0 * (x + b), t0 * (x * x + 2 * b * x + 2 * b * b)

    def slope(self, x: np.ndarray) -> np.ndarray:
        return np.full_like(x, 1.0 / self.b, dtype=np.float64)


@dataclass(frozen=True)
class StudentT:
    """Student-t with ``df`` > 2 degrees of freedom, scaled by ``kappa = sqrt((df - 2) / df)`` to unit variance."""

    df: float
    name: str = "student_t"

    @property
    def kappa(self) -> float:
        return math.sqrt((self.df - 2.0) / self.df)

    def _two_sided_sf(self, nu: float, y: np.ndarray) -> np.ndarray:
        """``P(|T_nu| > y)`` via the regularized incomplete beta (accurate in both tails)."""
        return special.betainc(nu / 2, 0.5, nu / (nu + y * y))

    def _t_pdf(self, y: np.ndarray) -> np.ndarray:
        nu = self.df
        log_norm = special.gammaln((nu + 1) / 2) - special.gammaln(nu / 2) - 0.5 * math.log(nu * math.pi)
        return np.exp(log_norm - (nu + 1) / 2 * np.log1p(y * y / nu))

    def pdf(self, x: np.ndarray) -> np.ndarray:
        return 2.0 * self._t_pdf(x / self.kappa) / self.kappa

    def log_cdf(self, x: np.ndarray) -> np.ndarray:
        y = x / self.kappa
        with np.errstate(divide="ignore"):
            return np.log(special.betainc(0.5, self.df / 2, y * y / (self.df + y * y)))

    def sf(self, x: np.ndarray) -> np.ndarray:
        return self._two_sided_sf(self.df, x / self.kappa)

    def ppf(self, p: np.ndarray) -> np.ndarray:
        u = special.betaincinv(0.5, self.df / 2, p)  # u = y^2 / (nu + y^2)
        return self.kappa * np.sqrt(self.df * u / (1.0 - u))

    def isf(self, q: np.ndarray) -> np.ndarray:
        w = special.betaincinv(self.df / 2, 0.5, q)  # w = nu / (nu + y^2)
        return self.kappa * np.sqrt(self.df * (1.0 / w - 1.0))

    def tails(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nu, kappa = self.df, self.kappa
        y = x / kappa
        t0 = self._two_sided_sf(nu, y)
        t1 = 2.0 * kappa * (nu + y * y) * self._t_pdf(y) / (nu - 1.0)
        r = math.sqrt((nu - 2.0) / nu)
        t2 = kappa * kappa * (nu * (nu - 1.0) / (nu - 2.0) * self._two_sided_sf(nu - 2.0, y * r) - nu * t0)
        return t0, t1, np.maximum(t2, 0.0)

    def slope(self, x: np.ndarray) -> np.ndarray:
        y = x / self.kappa
        return (self.df + 1.0) * y / ((self.df + y * y) * self.kappa)


Distribution = Normal | Laplace | StudentT
DISTRIBUTIONS = ("normal", "laplace", "student_t")


def get_distribution(name: str, df: float | None = None) -> Distribution:
    """The standardized distribution ``name`` (``df`` only, and always, for ``student_t``)."""
    if not isinstance(name, str) or name not in DISTRIBUTIONS:
        raise ValueError(f"unknown dist {name!r}; valid dists: {', '.join(DISTRIBUTIONS)}")
    if name != "student_t":
        if df is not None:
            raise ValueError(f"df={df!r} is only for dist='student_t', not {name!r}")
        return Normal() if name == "normal" else Laplace()
    if df is None or isinstance(df, bool) or not isinstance(df, int | float) or not 2.0 < df < math.inf:
        raise ValueError(f"student_t needs a finite df > 2 (finite variance), got df={df!r}")
    return StudentT(float(df))


def cell_error(dist: Distribution, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``int_a^b g(x) (x - c)^2 dx`` elementwise (``0 <= a <= b``; ``b`` may be ``inf``); see module docstring."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64))
    width = b - a
    length = 1.0 / np.maximum(1.0, np.maximum(dist.slope(a), dist.slope(np.where(np.isfinite(b), b, a))))
    narrow = width <= NARROW_LENGTHS * length
    out = np.empty(a.shape)
    wide = ~narrow
    if wide.any():
        aw, bw, cw = a[wide], b[wide], c[wide]
        finite = np.isfinite(bw)
        ta, tb = dist.tails(aw), dist.tails(np.where(finite, bw, aw))
        p0, p1, p2 = (x - np.where(finite, y, 0.0) for x, y in zip(ta, tb, strict=True))
        out[wide] = np.maximum(p2 - 2.0 * cw * p1 + cw * cw * p0, 0.0)
    if narrow.any():
        an, half, cn = a[narrow], 0.5 * width[narrow], c[narrow]
        x = (an + half)[:, None] + half[:, None] * _CELL_X
        out[narrow] = half * ((dist.pdf(x) * (x - cn[:, None]) ** 2) @ _CELL_W)
    return out
