"""common.uncertainty: the paired bootstrap equals scipy's paired percentile bootstrap, the t-interval equals
scipy.stats.t.interval, the normal interval uses the normal quantile, the Clopper-Pearson interval equals
scipy.stats.binomtest's exact one, and bad input is refused by name; the
workflow's interval settings (:class:`Evidence`) and the circular block bootstrap (block lengths, the draw, its
equality with the paired bootstrap for blocks of one, and wider intervals on serially dependent units)."""

import math

import numpy as np
import pytest
from scipy import stats

from common.uncertainty import (
    MIN_RESAMPLES,
    Estimate,
    Evidence,
    binomial_interval,
    block_bootstrap,
    block_length,
    circular_block_counts,
    exact,
    normal_interval,
    paired_bootstrap,
    perplexity,
    perplexity_columns,
    resample_counts,
    seed_estimate,
    seed_interval,
    t_interval,
    trajectory_estimate,
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


@pytest.mark.parametrize(("successes", "trials"), [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (9, 10), (1, 60),
                                                    (59, 60), (30, 60), (250, 1000)])
@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
def test_binomial_interval_equals_scipy_exact(successes, trials, level):
    est = binomial_interval(successes, trials, level)
    ci = stats.binomtest(successes, trials).proportion_ci(confidence_level=level, method="exact")
    assert est.value == successes / trials
    assert (est.low, est.high) == pytest.approx((ci.low, ci.high), rel=1e-9, abs=1e-12)
    assert est.level == level
    assert est.method == f"Clopper-Pearson exact binomial interval over {trials} trials"


def test_binomial_interval_ends_at_no_and_at_all_successes():
    none, every = binomial_interval(0, 60, unit="tensors"), binomial_interval(60, 60, unit="tensors")
    assert (none.value, none.low) == (0.0, 0.0)
    assert (every.value, every.high) == (1.0, 1.0)
    assert none.high == pytest.approx(1 - 0.025 ** (1 / 60), rel=1e-9)  # P(X = 0 | p) = (1 - p)^60 = 0.025
    assert every.low == pytest.approx(0.025 ** (1 / 60), rel=1e-9)
    assert every.method == "Clopper-Pearson exact binomial interval over 60 tensors"
    assert binomial_interval(np.int64(3), np.int64(10)) == binomial_interval(3, 10)  # numpy counts are counts


@pytest.mark.parametrize(("successes", "trials", "message"), [
    (1, 0, r"at least 1 trial, got trials=0"),
    (-1, 10, r"successes must be in \[0, 10\] \(the trials\), got -1"),
    (11, 10, r"successes must be in \[0, 10\] \(the trials\), got 11"),
    (2.0, 10, r"binomial successes must be an integer, got 2.0"),
    (2, 10.5, r"binomial trials must be an integer, got 10.5"),
    (True, 10, r"binomial successes must be an integer, got True"),
])
def test_binomial_interval_names_bad_counts(successes, trials, message):
    with pytest.raises(ValueError, match=message):
        binomial_interval(successes, trials)


def test_binomial_interval_refuses_a_bad_level():
    with pytest.raises(ValueError, match=r"confidence level must be in \(0, 1\), got 1.0"):
        binomial_interval(3, 10, 1.0)


def test_estimate_validates_and_round_trips():
    est = Estimate(0.5, 0.25, 0.75, "m")
    assert Estimate.from_dict(est.to_dict()) == est
    assert est.format() == "0.5 [0.25, 0.75]"
    assert est.scaled(100).format() == "50 [25, 75]"
    with pytest.raises(ValueError, match="low above high"):
        Estimate(0.5, 0.8, 0.2, "m")
    with pytest.raises(ValueError, match="NaN"):
        Estimate(float("nan"), 0, 1, "m")


def mean(sums):
    return sums["x"] / sums["n"]


def columns(values):
    return {"x": np.asarray(values, dtype=np.float64), "n": np.ones(len(values))}


# --- the workflow's settings -----------------------------------------------------------------------------------------


def test_evidence_from_the_workflow_config():
    settings = Evidence.from_dict({"level": 0.95, "resamples": 2000, "seed": 0})
    assert settings == Evidence(0.95, 2000, 0)
    assert Evidence.from_dict({"level": 0.9, "resamples": 2000, "seed": 3}) == Evidence(0.9, 2000, 3)


@pytest.mark.parametrize(("data", "message"), [
    ({"level": 0.95, "resamples": 2000}, r"missing \['seed'\], unknown nothing"),
    ({"level": 0.9, "seed": 3}, r"missing \['resamples'\], unknown nothing"),
    ({"level": 0.95, "resamples": 2000, "seed": 0, "method": "bca"}, r"missing nothing, unknown \['method'\]"),
    ({"level": 1.0, "resamples": 2000, "seed": 0}, r"evidence level must be in \(0, 1\), got 1.0"),
    ({"level": 0.95, "resamples": 999, "seed": 0}, r"resamples must be an integer >= 1000, got 999"),
    ({"level": 0.95, "resamples": 2000.0, "seed": 0}, r"resamples must be an integer >= 1000, got 2000.0"),
    ({"level": 0.95, "resamples": 2000, "seed": -1}, r"seed must be an integer >= 0, got -1"),
])
def test_evidence_names_a_bad_setting(data, message):
    with pytest.raises(ValueError, match=message):
        Evidence.from_dict(data)


def test_evidence_paired_is_the_paired_bootstrap():
    values = np.random.default_rng(3).normal(size=50)
    settings = Evidence(0.9, 1000, 7)
    expected = paired_bootstrap(columns(values), mean, resamples=1000, seed=7, level=0.9, unit="examples")
    assert settings.paired(columns(values), mean, "examples") == expected


@pytest.mark.parametrize("block", [None, 3])
def test_evidence_blocks_is_the_block_bootstrap(block):
    values = np.random.default_rng(3).normal(size=50)
    settings = Evidence(0.9, 1000, 7)
    expected = block_bootstrap(columns(values), mean, resamples=1000, seed=7, level=0.9, unit="steps", block=block)
    assert settings.blocks(columns(values), mean, "steps", block) == expected


# --- block length and the draw --------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "b"), [(1, 1), (2, 2), (8, 2), (9, 3), (27, 3), (28, 4), (64, 4), (65, 5),
                                      (120, 5), (125, 5), (126, 6), (1000, 10), (1001, 11)])
def test_block_length_is_the_integer_cube_root_rounded_up(n, b):
    assert block_length(n) == b
    assert b**3 >= n
    assert (b - 1) ** 3 < n


def test_block_length_needs_a_unit():
    with pytest.raises(ValueError, match="at least 1 unit, got 0"):
        block_length(0)


def test_circular_block_counts_draw_whole_blocks_modulo_n():
    n, block, resamples, seed = 10, 3, MIN_RESAMPLES, 5
    counts = circular_block_counts(n, block, resamples, seed)
    assert counts.shape == (resamples, n)
    np.testing.assert_array_equal(counts.sum(axis=1), np.full(resamples, n))
    # the first resample by hand: ceil(10 / 3) = 4 starts, blocks of 3 wrapping around, truncated to 10 steps
    starts = np.random.default_rng(seed).integers(0, n, (resamples, 4))[0]
    steps = [(s + i) % n for s in starts for i in range(block)][:n]
    np.testing.assert_array_equal(counts[0], np.bincount(steps, minlength=n))


def test_circular_block_counts_give_every_step_the_same_chance():
    counts = circular_block_counts(20, 4, 20000, 0)
    # ends included (a moving-block bootstrap without wrapping under-draws them)
    np.testing.assert_allclose(counts.mean(axis=0), np.ones(20), atol=0.03)


def test_one_block_of_every_step_resamples_a_rotation():
    counts = circular_block_counts(7, 7, MIN_RESAMPLES, 1)
    np.testing.assert_array_equal(counts, np.ones((MIN_RESAMPLES, 7)))


@pytest.mark.parametrize(("args", "message"), [
    ((1, 1, MIN_RESAMPLES, 0), "at least 2 units, got 1"),
    ((10, 0, MIN_RESAMPLES, 0), r"block length must be in \[1, 10\], got 0"),
    ((10, 11, MIN_RESAMPLES, 0), r"block length must be in \[1, 10\], got 11"),
    ((10, 2, 999, 0), "resamples must be >= 1000, got 999"),
])
def test_circular_block_counts_refuse_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        circular_block_counts(*args)


# --- the block bootstrap --------------------------------------------------------------------------------------


def test_blocks_of_one_step_are_the_paired_bootstrap():
    values = np.random.default_rng(0).exponential(size=40)
    blocks = block_bootstrap(columns(values), mean, resamples=1000, seed=4, level=0.95, unit="steps", block=1)
    paired = paired_bootstrap(columns(values), mean, resamples=1000, seed=4, level=0.95, unit="steps")
    assert (blocks.value, blocks.low, blocks.high) == (paired.value, paired.low, paired.high)
    assert blocks.method == ("circular block bootstrap over 40 consecutive steps (blocks of 1 steps, 1000 resamples, "
                             "seed 4, percentile)")


def test_block_bootstrap_default_block_and_method():
    values = np.arange(60.0)
    estimate = block_bootstrap(columns(values), mean, resamples=1000, seed=0, level=0.95, unit="training steps")
    assert estimate.value == 29.5
    assert estimate.low < 29.5 < estimate.high
    assert estimate.method == ("circular block bootstrap over 60 consecutive training steps (blocks of 4 = "
                               "ceil(n^(1/3)) training steps, 1000 resamples, seed 0, percentile)")
    assert estimate.level == 0.95


def test_blocks_widen_the_interval_of_dependent_steps():
    # a slowly varying series: neighbouring steps are alike, so resampling steps one by one understates the spread
    values = np.sin(np.arange(120) * 2 * math.pi / 60)
    iid = block_bootstrap(columns(values), mean, resamples=2000, seed=0, level=0.95, block=1)
    blocks = block_bootstrap(columns(values), mean, resamples=2000, seed=0, level=0.95)
    assert blocks.high - blocks.low > 1.5 * (iid.high - iid.low)


def test_block_bootstrap_pairs_the_columns():
    # two runs whose per-step values differ by a constant: the same blocks for both, so the difference is exact
    a = np.random.default_rng(1).normal(size=30)
    data = {"a": a, "b": a + 0.25, "n": np.ones(30)}
    estimate = block_bootstrap(data, lambda s: (s["b"] - s["a"]) / s["n"], resamples=1000, seed=0, level=0.95)
    assert estimate.low == pytest.approx(0.25)
    assert estimate.high == pytest.approx(0.25)


@pytest.mark.parametrize(("data", "message"), [
    ({}, "at least one column"),
    ({"x": [1.0, 2.0], "n": [1.0]}, "1-D of one length"),
    ({"x": [1.0], "n": [1.0]}, "at least 2 steps, got 1"),
    ({"x": [0.0, 0.0], "n": [0.0, 0.0]}, r"not finite \(point estimate nan\)"),
])
def test_block_bootstrap_refuses_bad_columns(data, message):
    with pytest.raises(ValueError, match=message), np.errstate(invalid="ignore"):
        block_bootstrap(data, mean, resamples=1000, seed=0, level=0.95)


def test_block_bootstrap_refuses_a_bad_level():
    with pytest.raises(ValueError, match=r"level must be in \(0, 1\), got 0"):
        block_bootstrap(columns([1.0, 2.0]), mean, resamples=1000, seed=0, level=0)


def test_seed_interval_combines_seed_and_shared_sampling():
    values = [0.01, 0.03, 0.02]
    # no shared sampling: exactly the t-interval over seeds (scipy)
    plain = seed_interval(values)
    low, high = stats.t.interval(0.95, 2, loc=0.02, scale=np.std(values, ddof=1) / np.sqrt(3))
    assert plain.value == pytest.approx(0.02)
    assert (plain.low, plain.high) == (pytest.approx(low), pytest.approx(high))
    # a shared bootstrap interval of half-width z * 0.005 adds se_w = 0.005 in quadrature
    z = stats.norm.ppf(0.975)
    shared = Estimate(0.02, 0.02 - z * 0.005, 0.02 + z * 0.005, "paired bootstrap", 0.95)
    combined = seed_interval(values, shared)
    half = stats.t.ppf(0.975, 2) * np.sqrt(np.var(values, ddof=1) / 3 + 0.005**2)
    assert (combined.low, combined.high) == (pytest.approx(0.02 - half), pytest.approx(0.02 + half))
    assert combined.method.startswith("t-interval over 3 seeds (paired by seed), widened")
    # one seed: the shared interval alone, marked
    single = seed_interval([0.02], shared)
    assert (single.low, single.high) == (shared.low, shared.high)
    assert "1 seed" in single.method
    with pytest.raises(ValueError, match="one seed and no shared"):
        seed_interval([0.02])
    with pytest.raises(ValueError, match="is not the mean"):
        seed_interval([0.0, 0.1], shared)
    with pytest.raises(ValueError, match="finite per-seed values"):
        seed_interval([0.0, float("nan")])


def test_seed_estimate_pairs_the_seeds_on_one_resample_of_the_shared_units():
    """Two seeds, each a model and its reference scored on the same 8 windows: ``d_k`` is the per-seed perplexity
    ratio minus 1 from the full sums, and the interval widens the seed spread by the paired bootstrap of their mean
    (the same draw for every column)."""
    rng = np.random.default_rng(3)
    tokens = rng.integers(50, 100, size=8).astype(float)
    nll = {name: tokens * (3.0 + rng.normal(0, 0.1, size=8)) for name in ("m0", "r0", "m1", "r1")}
    columns = {col: values for name in nll for col, values in perplexity_columns(name, nll[name], tokens).items()}
    evidence = Evidence(0.95, 1000, 7)

    def ratio(sums, k):
        return perplexity(sums, f"m{k}") / perplexity(sums, f"r{k}") - 1

    estimate, values = seed_estimate(columns, ratio, [0, 1], evidence, "windows")
    assert values == pytest.approx([math.exp(nll[f"m{k}"].sum() / tokens.sum() - nll[f"r{k}"].sum() / tokens.sum())
                                    - 1 for k in (0, 1)], rel=1e-12)
    shared = evidence.paired(columns, lambda sums: (ratio(sums, 0) + ratio(sums, 1)) / 2, "windows")
    assert estimate == seed_interval(values, shared)
    assert estimate.method.endswith("(paired bootstrap over 8 windows (1000 resamples, seed 7, percentile))")
    one, [value] = seed_estimate(columns, ratio, [1], evidence, "windows")  # one seed: the bootstrap alone
    alone = evidence.paired(columns, lambda sums: ratio(sums, 1), "windows")
    assert (one.value, one.low, one.high) == (value, alone.low, alone.high)
    assert one.method.endswith("; 1 seed: no seed-to-seed variation")


def test_trajectory_estimate_is_the_t_interval_over_seeds_or_the_one_run_s_own():
    evidence = Evidence(0.9, 1000, 0)
    assert trajectory_estimate([0.1, 0.3, 0.2], evidence) == t_interval([0.1, 0.3, 0.2], level=0.9)
    along = Estimate(0.2, 0.15, 0.25, "circular block bootstrap over 12 steps", 0.9)
    assert trajectory_estimate([0.1, 0.3], evidence, lambda: along) == t_interval([0.1, 0.3], level=0.9)  # unused
    single = trajectory_estimate([0.2], evidence, lambda: along)
    assert (single.value, single.low, single.high) == (0.2, 0.15, 0.25)
    assert single.method == "circular block bootstrap over 12 steps; 1 seed: no seed-to-seed variation"
    with pytest.raises(ValueError, match="one seed and no shared evaluation interval"):
        trajectory_estimate([0.2], evidence)
