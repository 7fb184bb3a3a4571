"""Uncertainty of the estimates a claims table reports: one :class:`Estimate` (value and a two-sided interval)
from six sources, each matched to what varies in the experiment, and :class:`Evidence`, the workflow's interval
settings (``evidence: {level, resamples, seed}`` in ``workflow/config/default.yaml``), the same for every claim.

* :func:`paired_bootstrap` -- a nonparametric bootstrap over *units* (evaluation windows, documents, zero-shot
  examples) shared by every model compared. One resample draws ``n`` unit indices with replacement,
  ``i = rng.integers(0, n, (resamples, n))`` from ``numpy.random.default_rng(seed)``, and the *same* indices
  serve every column: that is the pairing. Each column enters the statistic as its sum over the resampled
  units, ``S_c = sum_j w_j x_{c,j}`` with ``w_j`` the number of times unit ``j`` was drawn, so perplexities
  (``exp(S_nll / S_tokens)``), accuracies (``S_correct / n``) and their differences and ratios are all functions
  of sums. The interval is the percentile interval: the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the
  replicates with linear interpolation. With the same seed this equals
  ``scipy.stats.bootstrap(..., paired=True, method="percentile", rng=default_rng(seed))`` (tested).
* :func:`block_bootstrap` -- the circular block bootstrap of Politis and Romano (1992) over *ordered*, serially
  dependent units (training steps: the loss gap and the saturation of step ``t`` depend on step ``t - 1``, so
  resampling steps one by one would understate the variance). A resample of ``n`` units is ``k = ceil(n / b)``
  blocks with starts ``s ~ U{0, .., n - 1}`` (``rng.integers(0, n, (resamples, k))``), block ``s`` being the units
  ``s, s + 1, .., s + b - 1`` modulo ``n``, truncated to ``n`` units. Wrapping around gives every unit the same
  chance to be drawn, so the resampled sums are centred on the sample's. The block length defaults to
  :func:`block_length`, ``b = ceil(n^(1/3))``, the order of the variance-optimal block length (Hall, Horowitz and
  Jing, 1995). Columns enter as sums and the interval is the percentile interval, as in the paired bootstrap; with
  ``b = 1`` the draw is :func:`resample_counts`'s, so the two give the same estimate (tested). Within one series
  the interval describes the variation of a mean along that series, not between realizations of it (e.g. training
  seeds).
* :func:`normal_interval` -- a Monte Carlo estimate with its standard error: ``value +- z_{(1+level)/2} * se``.
* :func:`binomial_interval` -- a proportion ``k / n`` of independent trials (tensors that do as the theory
  predicts): the Clopper-Pearson (1934) exact interval, ``low = B^{-1}((1 - level)/2; k, n - k + 1)`` and
  ``high = B^{-1}((1 + level)/2; k + 1, n - k)`` with ``B^{-1}(q; a, b)`` the ``q`` quantile of the Beta(a, b)
  distribution, ``low = 0`` when ``k = 0`` and ``high = 1`` when ``k = n``. Each end is the proportion at which
  ``k`` (or a more extreme count) has binomial tail probability ``(1 - level)/2``, so the coverage is at least
  ``level`` for every true proportion; as ``scipy.stats.binomtest(k, n).proportion_ci(level, method="exact")``
  (tested).
* :func:`t_interval` -- over seeds (a trained quantity, one value per seed; paired differences are formed by the
  caller, seed by seed): ``mean +- t_{(1+level)/2, n-1} * sd / sqrt(n)`` with the ``n - 1`` sample sd, as
  ``scipy.stats.t.interval``.
* :func:`seed_interval` -- a paired statistic of trained models over ``n`` seeds, combined with the evaluation
  sampling the seeds share: ``d_s`` per seed (the two models of seed ``s`` share its data order and noise), the
  estimate ``d = mean_s d_s``, and ``d +- t_{(1+level)/2, n-1} * sqrt(sd^2 / n + se_w^2)`` with ``sd`` the ``n - 1``
  sample sd of the ``d_s`` (training variation) and ``se_w`` the standard error of ``d`` from a bootstrap over the
  evaluation units every seed was scored on (``shared``: the paired bootstrap of the seed mean, resampling the
  same windows / examples for every seed, so its spread is the evaluation sampling of ``d``; its interval's
  half-width over ``z_{(1+level)/2}``). Without ``shared`` (trajectory statistics: each seed's steps are its own,
  so ``sd`` holds their variation) it is :func:`t_interval`. One seed gives ``shared`` alone, labelled as lacking
  seed-to-seed variation. :func:`seed_estimate` makes ``d_s`` and ``shared`` from bootstrap columns;
  :func:`trajectory_estimate` is the case without ``shared``.
* :func:`exact` -- a quantity without sampling error (a deterministic computation): the interval is the point.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

LEVEL = 0.95
RESAMPLES = 2000
MIN_RESAMPLES = 1000

EVIDENCE_FIELDS = ("level", "resamples", "seed")

Sums = Mapping[str, np.ndarray]
Columns = Mapping[str, Sequence[float] | np.ndarray]


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its two-sided ``level`` interval ``[low, high]``; ``method`` says how the interval
    was made (shown in the report next to the number)."""

    value: float
    low: float
    high: float
    method: str
    level: float = LEVEL

    def __post_init__(self) -> None:
        for name in ("value", "low", "high"):
            if math.isnan(getattr(self, name)):
                raise ValueError(f"estimate {name} is NaN ({self.method})")
        if not self.low <= self.high:
            raise ValueError(f"estimate interval [{self.low}, {self.high}] has low above high ({self.method})")
        if not 0 < self.level < 1:
            raise ValueError(f"confidence level {self.level} is not in (0, 1)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Estimate:
        return cls(float(data["value"]), float(data["low"]), float(data["high"]), str(data["method"]),
                   float(data.get("level", LEVEL)))

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in other units (``factor > 0``), e.g. a fraction as a percentage."""
        if not factor > 0:
            raise ValueError(f"scale factor must be positive, got {factor}")
        return Estimate(self.value * factor, self.low * factor, self.high * factor, self.method, self.level)

    def format(self, digits: int = 3) -> str:
        """``value [low, high]`` with ``digits`` significant digits."""
        return f"{_g(self.value, digits)} [{_g(self.low, digits)}, {_g(self.high, digits)}]"


def _g(x: float, digits: int) -> str:
    return f"{x:.{digits}g}" if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


@dataclass(frozen=True)
class Evidence:
    """How intervals are made (the workflow config's ``evidence:``): the confidence ``level``, the bootstrap's
    ``resamples`` and the ``seed`` of its draw; ValueError naming a bad value."""

    level: float
    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise ValueError(f"evidence level must be in (0, 1), got {self.level!r}")
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int) or self.resamples < MIN_RESAMPLES:
            raise ValueError(f"evidence resamples must be an integer >= {MIN_RESAMPLES}, got {self.resamples!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"evidence seed must be an integer >= 0, got {self.seed!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        """The settings of ``{"level", "resamples", "seed"}`` (ValueError naming a missing or unknown key)."""
        missing, unknown = [f for f in EVIDENCE_FIELDS if f not in data], [f for f in data if f not in EVIDENCE_FIELDS]
        if missing or unknown:
            raise ValueError(f"evidence settings: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        return cls(float(data["level"]), data["resamples"], data["seed"])

    def paired(self, columns: Columns, statistic: Callable[[Sums], Any], unit: str) -> Estimate:
        """:func:`paired_bootstrap` over exchangeable ``unit`` (evaluation windows, examples, probes)."""
        return paired_bootstrap(columns, statistic, resamples=self.resamples, seed=self.seed, level=self.level,
                                unit=unit)

    def blocks(self, columns: Columns, statistic: Callable[[Sums], Any], unit: str, block: int | None = None
               ) -> Estimate:
        """:func:`block_bootstrap` over ordered, serially dependent ``unit`` (training steps)."""
        return block_bootstrap(columns, statistic, resamples=self.resamples, seed=self.seed, level=self.level,
                               unit=unit, block=block)


def block_length(n: int) -> int:
    """``ceil(n^(1/3))`` in integers: the least ``b >= 1`` with ``b^3 >= n`` (ValueError for ``n < 1``)."""
    if n < 1:
        raise ValueError(f"a block length needs at least 1 unit, got {n}")
    b = max(1, round(n ** (1 / 3)))
    while b**3 < n:
        b += 1
    while b > 1 and (b - 1) ** 3 >= n:
        b -= 1
    return b


def circular_block_counts(n: int, block: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` float64: how often each of ``n`` ordered units is drawn in each circular block resample
    (module docstring: ``ceil(n / block)`` starts from ``rng.integers(0, n, ...)``, blocks wrapping modulo ``n``)."""
    if n < 2:
        raise ValueError(f"a bootstrap needs at least 2 units, got {n}")
    if not 1 <= block <= n:
        raise ValueError(f"block length must be in [1, {n}], got {block}")
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be >= {MIN_RESAMPLES}, got {resamples}")
    blocks = math.ceil(n / block)
    starts = np.random.default_rng(seed).integers(0, n, (resamples, blocks))
    drawn = ((starts[:, :, None] + np.arange(block)) % n).reshape(resamples, blocks * block)[:, :n]
    counts = np.zeros((resamples, n))
    np.add.at(counts, (np.arange(resamples)[:, None], drawn), 1.0)
    return counts


def resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` float64: how often each of ``n`` units is drawn in each bootstrap resample
    (``rng.integers(0, n, (resamples, n))``, the draw scipy's paired bootstrap makes): the circular block draw
    with blocks of one unit."""
    return circular_block_counts(n, 1, resamples, seed)


def _unit_columns(columns: Columns, caller: str, unit: str) -> tuple[dict[str, np.ndarray], int]:
    """``columns`` as float64 arrays and their common length ``n >= 2`` (ValueError naming the shapes)."""
    if not columns:
        raise ValueError(f"{caller} needs at least one column")
    data = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}
    shapes = {name: v.shape for name, v in data.items()}
    first = next(iter(data.values()))
    n = first.shape[0] if first.ndim == 1 else -1
    if any(shape != (n,) for shape in shapes.values()):
        raise ValueError(f"{caller} columns must be 1-D of one length, got {shapes}")
    if n < 2:
        raise ValueError(f"a bootstrap needs at least 2 {unit}, got {n}")
    return data, n


def _percentile(data: Mapping[str, np.ndarray], counts: np.ndarray, statistic: Callable[[Sums], Any], level: float,
                method: str) -> Estimate:
    """The percentile interval of ``statistic`` over the resamples of ``counts`` (``(resamples, n)``: how often
    each unit is drawn): replicate ``r`` gets the sums ``counts[r] @ column``, the point estimate the full sums; the
    interval is the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the replicates. A replicate that is not
    finite (e.g. 0/0) is an error naming the point estimate, never silently dropped."""
    resamples = counts.shape[0]
    with np.errstate(all="ignore"):  # a non-finite replicate is refused below, naming the point estimate
        replicates = np.asarray(statistic({name: counts @ v for name, v in data.items()}), dtype=np.float64)
        if replicates.shape != (resamples,):
            raise ValueError(f"the statistic must return one value per resample, got shape {replicates.shape}")
        point = float(np.asarray(statistic({name: np.asarray(v.sum()) for name, v in data.items()})))
    if not np.isfinite(replicates).all() or not math.isfinite(point):
        raise ValueError(f"the bootstrap statistic is not finite (point estimate {point}); check the columns")
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return Estimate(point, float(low), float(high), method, level)


def paired_bootstrap(columns: Columns, statistic: Callable[[Sums], Any], *, resamples: int = RESAMPLES,
                     seed: int = 0, level: float = LEVEL, unit: str = "units") -> Estimate:
    """Paired percentile bootstrap of ``statistic`` (see the module docstring).

    ``columns`` maps names to per-unit values (all the same length ``n``: unit ``j`` of every column is the
    same window, document or example). ``statistic`` receives the column sums, each an array (shape ``()`` for
    the point estimate, ``(resamples,)`` for the replicates), and returns the statistic elementwise. The point
    estimate is the statistic of the full sample. A replicate that is not finite (e.g. 0/0) is an error naming
    the statistic's value, never silently dropped.
    """
    _check_level(level)
    data, n = _unit_columns(columns, "paired_bootstrap", unit)
    method = f"paired bootstrap over {n} {unit} ({resamples} resamples, seed {seed}, percentile)"
    return _percentile(data, resample_counts(n, resamples, seed), statistic, level, method)


def block_bootstrap(columns: Columns, statistic: Callable[[Sums], Any], *, resamples: int = RESAMPLES,
                    seed: int = 0, level: float = LEVEL, unit: str = "steps", block: int | None = None) -> Estimate:
    """Circular block bootstrap of ``statistic`` (module docstring). ``columns`` are per-unit values in order (all
    the same length ``n``, unit ``j`` of every column the same step: the same blocks serve every column, paired);
    ``block`` defaults to :func:`block_length`. ``statistic`` is as in :func:`paired_bootstrap`."""
    _check_level(level)
    data, n = _unit_columns(columns, "block_bootstrap", unit)
    b = block_length(n) if block is None else block
    rule = " = ceil(n^(1/3))" if block is None else ""
    method = (f"circular block bootstrap over {n} consecutive {unit} (blocks of {b}{rule} {unit}, {resamples} "
              f"resamples, seed {seed}, percentile)")
    return _percentile(data, circular_block_counts(n, b, resamples, seed), statistic, level, method)


def normal_interval(value: float, standard_error: float, *, level: float = LEVEL,
                    method: str = "Monte Carlo standard error") -> Estimate:
    """``value +- z * standard_error`` (z the two-sided normal quantile of ``level``)."""
    _check_level(level)
    if not standard_error >= 0:
        raise ValueError(f"standard error must be >= 0, got {standard_error}")
    z = float(stats.norm.ppf((1 + level) / 2))
    return Estimate(float(value), float(value - z * standard_error), float(value + z * standard_error),
                    f"{method}, normal interval", level)


def binomial_interval(successes: int, trials: int, level: float = LEVEL, unit: str = "trials") -> Estimate:
    """``successes / trials`` with its Clopper-Pearson exact interval at ``level`` (module docstring). ValueError
    naming a count that is not an integer, ``trials < 1`` or ``successes`` outside ``[0, trials]``."""
    _check_level(level)
    for name, count in (("successes", successes), ("trials", trials)):
        if isinstance(count, bool) or not isinstance(count, numbers.Integral):
            raise ValueError(f"binomial {name} must be an integer, got {count!r}")
    k, n = int(successes), int(trials)
    if n < 1:
        raise ValueError(f"a binomial interval needs at least 1 trial, got trials={n}")
    if not 0 <= k <= n:
        raise ValueError(f"binomial successes must be in [0, {n}] (the trials), got {k}")
    alpha = (1 - level) / 2
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return Estimate(k / n, low, high, f"Clopper-Pearson exact binomial interval over {n} {unit}", level)


def t_interval(values: Sequence[float] | np.ndarray, *, level: float = LEVEL, unit: str = "seeds") -> Estimate:
    """Mean of ``values`` (one per seed, or paired differences per seed) with its Student-t interval."""
    _check_level(level)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2:
        raise ValueError(f"a t-interval needs at least 2 values, got {x.size}")
    if not np.isfinite(x).all():
        raise ValueError(f"t-interval values must be finite, got {x.tolist()}")
    mean = float(x.mean())
    half = float(stats.t.ppf((1 + level) / 2, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Estimate(mean, mean - half, mean + half, f"t-interval over {x.size} {unit}", level)


def seed_interval(per_seed: Sequence[float] | np.ndarray, shared: Estimate | None = None, *, level: float = LEVEL
                  ) -> Estimate:
    """The seed mean of ``per_seed`` with its interval over seeds, widened by the shared evaluation sampling
    ``shared`` (the bootstrap :class:`Estimate` of the seed mean; module docstring). One seed: ``shared`` itself,
    its method marked "1 seed" (ValueError without it); ValueError for non-finite values or a ``shared`` whose value
    is not the seed mean (1e-9 relative: it must be the bootstrap of the same statistic)."""
    _check_level(level)
    x = np.asarray(per_seed, dtype=np.float64)
    if x.ndim != 1 or x.size < 1 or not np.isfinite(x).all():
        raise ValueError(f"seed_interval needs finite per-seed values, got {x.tolist()}")
    mean = float(x.mean())
    if shared is not None and not math.isclose(shared.value, mean, rel_tol=1e-9, abs_tol=1e-12):
        raise ValueError(f"the shared estimate {shared.value!r} is not the mean {mean!r} of the per-seed values")
    if x.size == 1:
        if shared is None:
            raise ValueError("one seed and no shared evaluation interval: nothing to make an interval from")
        return Estimate(mean, shared.low, shared.high, f"{shared.method}; 1 seed: no seed-to-seed variation",
                        shared.level)
    if shared is None:
        return t_interval(x, level=level)
    z = float(stats.norm.ppf((1 + shared.level) / 2))
    within = (shared.high - shared.low) / (2 * z)
    se = math.sqrt(float(x.var(ddof=1)) / x.size + within**2)
    half = float(stats.t.ppf((1 + level) / 2, x.size - 1)) * se
    return Estimate(mean, mean - half, mean + half,
                    f"t-interval over {x.size} seeds (paired by seed), widened by the evaluation sampling the seeds "
                    f"share ({shared.method})", level)


def seed_estimate(columns: Columns, per_seed: Callable[[Sums, int], Any], seeds: Sequence[int], evidence: Evidence,
                  unit: str) -> tuple[Estimate, list[float]]:
    """A paired statistic of trained models over ``seeds`` scored on shared evaluation units (the seed pairing of the
    module docstring): ``d_k = per_seed(full sums of columns, k)`` per seed ``k``, and the seed mean ``d = mean_k d_k``
    with :func:`seed_interval` widened by ``shared``, the paired bootstrap of ``d`` itself over ``unit``
    (:meth:`Evidence.paired`: one resample of the shared units serves every seed and model). Returns the estimate
    and the per-seed values ``d_k``."""
    full = {name: np.asarray(np.asarray(values, dtype=np.float64).sum()) for name, values in columns.items()}
    values = [float(per_seed(full, k)) for k in seeds]
    shared = evidence.paired(columns, lambda sums: sum(per_seed(sums, k) for k in seeds) / len(seeds), unit)
    return seed_interval(values, shared, level=evidence.level), values


def trajectory_estimate(values: Sequence[float], evidence: Evidence, single: Callable[[], Estimate] | None = None
                        ) -> Estimate:
    """The interval of a trajectory statistic, one value per seed from that seed's own training run (no evaluation
    units the seeds share, so the spread over seeds holds their variation): :func:`seed_interval` without ``shared``,
    the t-interval over seeds. One seed: ``single()``, the interval along that one run (e.g. :meth:`Evidence.blocks`
    over its steps), marked "1 seed" (ValueError without ``single``: nothing to make an interval from)."""
    shared = single() if len(values) == 1 and single is not None else None
    return seed_interval(values, shared, level=evidence.level)


def exact(value: float, method: str = "exact (no sampling error)") -> Estimate:
    """A deterministic quantity: the interval is the point."""
    return Estimate(float(value), float(value), float(value), method)


def perplexity_columns(name: str, window_nll: Sequence[float], window_tokens: Sequence[float]
                       ) -> dict[str, np.ndarray]:
    """Bootstrap columns of one model's per-window scores: ``<name>.nll`` and ``<name>.tokens``."""
    nll, tokens = np.asarray(window_nll, dtype=np.float64), np.asarray(window_tokens, dtype=np.float64)
    if nll.shape != tokens.shape or nll.ndim != 1:
        raise ValueError(f"{name}: window_nll {nll.shape} and window_tokens {tokens.shape} must be 1-D and match")
    return {f"{name}.nll": nll, f"{name}.tokens": tokens}


def log_perplexity(sums: Sums, name: str) -> np.ndarray:
    """Token-weighted mean NLL of ``name`` from bootstrap sums (:func:`perplexity_columns`)."""
    return np.asarray(sums[f"{name}.nll"]) / np.asarray(sums[f"{name}.tokens"])


def perplexity(sums: Sums, name: str) -> np.ndarray:
    """``exp`` of :func:`log_perplexity`: the perplexity of ``name`` on the resampled windows."""
    return np.exp(log_perplexity(sums, name))
