"""The interval machinery of the Max-Window claims: the workflow's bootstrap settings and the circular block
bootstrap over training steps (block lengths, the draw, its equality with the paired bootstrap for blocks of one,
and wider intervals on serially dependent steps)."""

import math

import numpy as np
import pytest

from common.uncertainty import MIN_RESAMPLES, paired_bootstrap
from papers.maxwindow_hif8.evidence import Bootstrap, block_bootstrap, block_length, circular_block_counts


def mean(sums):
    return sums["x"] / sums["n"]


def columns(values):
    return {"x": np.asarray(values, dtype=np.float64), "n": np.ones(len(values))}


# --- settings -------------------------------------------------------------------------------------------------


def test_bootstrap_from_the_workflow_config():
    settings = Bootstrap.from_dict({"level": 0.95, "resamples": 2000, "seed": 0})
    assert settings == Bootstrap(0.95, 2000, 0)


@pytest.mark.parametrize(("data", "message"), [
    ({"level": 0.95, "resamples": 2000}, r"missing \['seed'\], unknown nothing"),
    ({"level": 0.95, "resamples": 2000, "seed": 0, "method": "bca"}, r"missing nothing, unknown \['method'\]"),
    ({"level": 1.0, "resamples": 2000, "seed": 0}, r"evidence level must be in \(0, 1\), got 1.0"),
    ({"level": 0.95, "resamples": 999, "seed": 0}, r"resamples must be an integer >= 1000, got 999"),
    ({"level": 0.95, "resamples": 2000.0, "seed": 0}, r"resamples must be an integer >= 1000, got 2000.0"),
    ({"level": 0.95, "resamples": 2000, "seed": -1}, r"seed must be an integer >= 0, got -1"),
])
def test_bootstrap_names_a_bad_setting(data, message):
    with pytest.raises(ValueError, match=message):
        Bootstrap.from_dict(data)


def test_bootstrap_paired_is_the_common_paired_bootstrap():
    values = np.random.default_rng(3).normal(size=50)
    settings = Bootstrap(0.9, 1000, 7)
    expected = paired_bootstrap(columns(values), mean, resamples=1000, seed=7, level=0.9, unit="examples")
    assert settings.paired(columns(values), mean, "examples") == expected


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
