"""common.uncertainty: the paired bootstrap equals scipy's paired percentile bootstrap, the t-interval equals
scipy.stats.t.interval, the normal interval uses the normal quantile, and bad input is refused by name."""

import math

import numpy as np
import pytest
from scipy import stats

from common.uncertainty import (
    Estimate,
    exact,
    normal_interval,
    paired_bootstrap,
    perplexity,
    perplexity_columns,
    resample_counts,
    t_interval,
)


def _pair(n=40, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, x + rng.normal(0.2, 0.5, size=n)


@pytest.mark.parametrize(("seed", "level"), [(0, 0.95), (7, 0.9)])
def test_paired_bootstrap_equals_scipy_paired_percentile(seed, level):
    x, y = _pair()
    ours = paired_bootstrap({"x": x, "y": y}, lambda s: (s["y"] - s["x"]) / x.size, resamples=1500, seed=seed,
                            level=level)
    theirs = stats.bootstrap((x, y), lambda a, b, axis=-1: (b - a).mean(axis=axis), paired=True, vectorized=True,
                             n_resamples=1500, method="percentile", confidence_level=level,
                             rng=np.random.default_rng(seed))
    assert ours.value == pytest.approx(float((y - x).mean()), rel=1e-12)
    assert ours.low == pytest.approx(theirs.confidence_interval.low, rel=1e-12)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, rel=1e-12)
    assert ours.level == level
    assert "40 units" in ours.method
    assert f"seed {seed}" in ours.method


def test_paired_bootstrap_of_a_perplexity_ratio_equals_scipy():
    rng = np.random.default_rng(3)
    tokens = rng.integers(100, 128, size=30).astype(float)
    base = tokens * rng.normal(3.0, 0.2, size=30)
    quant = base + tokens * rng.normal(0.05, 0.02, size=30)
    columns = {**perplexity_columns("b", base, tokens), **perplexity_columns("q", quant, tokens)}
    ours = paired_bootstrap(columns, lambda s: perplexity(s, "q") / perplexity(s, "b") - 1, resamples=1000, seed=5)

    def ratio(b, q, t, axis=-1):
        return np.exp(q.sum(axis) / t.sum(axis)) / np.exp(b.sum(axis) / t.sum(axis)) - 1

    theirs = stats.bootstrap((base, quant, tokens), ratio, paired=True, vectorized=True, n_resamples=1000,
                             method="percentile", rng=np.random.default_rng(5)).confidence_interval
    assert ours.value == pytest.approx(math.exp((quant.sum() - base.sum()) / tokens.sum()) - 1, rel=1e-12)
    assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high), rel=1e-10)
    assert ours.low > 0  # the planted 0.05 nats per token is far outside the noise


def test_the_same_resampled_units_serve_every_column():
    counts = resample_counts(5, 1000, seed=2)
    assert counts.shape == (1000, 5)
    assert (counts.sum(axis=1) == 5).all()
    x = np.arange(5.0)
    est = paired_bootstrap({"a": x, "b": x}, lambda s: s["a"] - s["b"], resamples=1000)
    assert (est.value, est.low, est.high) == (0.0, 0.0, 0.0)  # identical columns: every replicate is 0


def test_paired_bootstrap_refuses_bad_input():
    x = np.ones(4)
    with pytest.raises(ValueError, match="one length"):
        paired_bootstrap({"a": x, "b": np.ones(5)}, lambda s: s["a"])
    with pytest.raises(ValueError, match="resamples must be >= 1000, got 10"):
        paired_bootstrap({"a": x}, lambda s: s["a"], resamples=10)
    with pytest.raises(ValueError, match="at least 2 units, got 1"):
        paired_bootstrap({"a": np.ones(1)}, lambda s: s["a"])
    with pytest.raises(ValueError, match="not finite"):
        paired_bootstrap({"a": np.zeros(4)}, lambda s: s["a"] / s["a"])
    with pytest.raises(ValueError, match="one value per resample"):
        paired_bootstrap({"a": x}, lambda s: np.zeros(3))
    with pytest.raises(ValueError, match="confidence level must be in"):
        paired_bootstrap({"a": x}, lambda s: s["a"], level=1.5)
    with pytest.raises(ValueError, match="window_nll"):
        perplexity_columns("m", [1.0, 2.0], [1.0])


def test_t_interval_equals_scipy():
    values = [0.012, 0.018, 0.009, 0.015]
    est = t_interval(values)
    low, high = stats.t.interval(0.95, 3, loc=np.mean(values), scale=stats.sem(values))
    assert (est.value, est.low, est.high) == pytest.approx((np.mean(values), low, high), rel=1e-12)
    assert est.method == "t-interval over 4 seeds"
    with pytest.raises(ValueError, match="at least 2 values, got 1"):
        t_interval([1.0])


def test_normal_and_exact_intervals():
    est = normal_interval(2.0, 0.5)
    assert est.high - est.value == pytest.approx(0.5 * stats.norm.ppf(0.975), rel=1e-12)
    assert est.value - est.low == pytest.approx(est.high - est.value, rel=1e-12)
    with pytest.raises(ValueError, match="standard error must be >= 0, got -1"):
        normal_interval(1.0, -1.0)
    assert exact(3.0).low == exact(3.0).high == 3.0


def test_estimate_validates_and_round_trips():
    est = Estimate(0.5, 0.25, 0.75, "m")
    assert Estimate.from_dict(est.to_dict()) == est
    assert est.format() == "0.5 [0.25, 0.75]"
    assert est.scaled(100).format() == "50 [25, 75]"
    with pytest.raises(ValueError, match="low above high"):
        Estimate(0.5, 0.8, 0.2, "m")
    with pytest.raises(ValueError, match="NaN"):
        Estimate(float("nan"), 0, 1, "m")
