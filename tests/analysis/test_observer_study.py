"""Synthetic observer study: traces, the delayed replay, the saturation metrics, the spike claim, the study rows."""

import math

import numpy as np
import pytest

from common.analysis import amax_trace, observer_study, run_observer, saturation_metrics, spike_steps
from common.analysis.observer_study import DEFAULT_OBSERVERS, METRICS, SPIKE_KINDS, TRACE_KINDS

SPIKY = [1.0, 1.0, 10.0, 1.0, 1.0, 10.0]


# -- run_observer on hand-made traces --------------------------------------------------------------------------

def test_most_recent_saturates_at_every_spike():
    result = run_observer(SPIKY, "most_recent", spikes=[2, 5])
    np.testing.assert_array_equal(result["prediction"], [1.0, 1.0, 1.0, 10.0, 1.0, 1.0])
    np.testing.assert_array_equal(result["saturated"], [False, False, True, False, False, True])
    assert result["saturation_events"] == 2
    assert result["saturation_rate"] == 2 / 6
    assert result["worst_overshoot"] == 10.0
    assert result["headroom_lost_bits"] == np.log2(10.0) / 4  # steps 0, 1, 3, 4; only step 3 wastes log2(10)
    assert (result["spike_count"], result["spike_saturations"], result["recurring_spike_saturations"]) == (2, 2, 1)


def test_max_window_saturates_only_at_the_first_spike():
    result = run_observer(SPIKY, "max_window", spikes=[2, 5], window=64)
    np.testing.assert_array_equal(result["prediction"], [1.0, 1.0, 1.0, 10.0, 10.0, 10.0])
    assert result["saturation_events"] == 1
    assert result["worst_overshoot"] == 10.0
    assert result["headroom_lost_bits"] == np.log2(10.0) * 2 / 5  # steps 3 and 4 of the 5 unsaturated
    assert (result["spike_saturations"], result["recurring_spike_saturations"]) == (1, 0)


def test_max_window_shorter_than_the_spike_gap_saturates_again():
    result = run_observer(SPIKY, "max_window", spikes=[2, 5], window=2)
    np.testing.assert_array_equal(result["prediction"], [1.0, 1.0, 1.0, 10.0, 10.0, 1.0])
    assert result["saturation_events"] == 2
    assert result["recurring_spike_saturations"] == 1


def test_exp_smooth_replay():
    result = run_observer(SPIKY, "exp_smooth", alpha=0.5)
    np.testing.assert_array_equal(result["prediction"], [1.0, 1.0, 1.0, 5.5, 3.25, 2.125])
    np.testing.assert_array_equal(result["saturated"], [False, False, True, False, False, True])
    assert result["worst_overshoot"] == 10.0
    assert result["recurring_spike_saturations"] is None  # no spikes given


def test_cold_start_uses_the_current_amax():
    for name in ("most_recent", "exp_smooth", "max_window"):
        result = run_observer([100.0, 1.0, 0.5], name)
        assert result["prediction"][0] == 100.0
        assert not result["saturated"][0]
        assert result["saturation_events"] == 0  # a falling trace: only a cold start could hide a rise
    single = run_observer([7.0], "most_recent")
    assert (single["saturation_events"], single["worst_overshoot"], single["headroom_lost_bits"]) == (0, 1.0, 0.0)


def test_headroom_one_bit_when_the_prediction_is_twice_the_amax():
    result = run_observer([8.0, 4.0, 2.0, 1.0], "most_recent")
    np.testing.assert_array_equal(result["prediction"], [8.0, 8.0, 4.0, 2.0])
    assert result["headroom_lost_bits"] == 0.75  # (0 + 1 + 1 + 1) / 4: the cold start wastes nothing
    assert saturation_metrics([1.0, 3.0], [2.0, 6.0])["headroom_lost_bits"] == 1.0


def test_headroom_averages_only_unsaturated_steps():
    metrics = saturation_metrics([1.0, 4.0, 1.0], [4.0, 1.0, 1.0])
    assert metrics["saturation_events"] == 1
    assert metrics["worst_overshoot"] == 4.0
    assert metrics["headroom_lost_bits"] == 1.0  # (2 + 0) / 2, the saturated step left out


def test_current_never_saturates_and_loses_no_headroom():
    for kind in TRACE_KINDS:
        trace = amax_trace(kind, 200, seed=3)
        result = run_observer(trace, "current", spikes=spike_steps(kind, 200, seed=3))
        np.testing.assert_array_equal(result["prediction"], trace)
        assert result["saturation_events"] == 0
        assert result["worst_overshoot"] == 1.0
        assert result["headroom_lost_bits"] == 0.0


# -- traces ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", TRACE_KINDS)
def test_traces_are_positive_finite_and_seeded(kind):
    trace = amax_trace(kind, 300, seed=5)
    assert trace.shape == (300,)
    assert trace.dtype == np.float64
    assert np.all(np.isfinite(trace))
    assert np.all(trace > 0)
    np.testing.assert_array_equal(trace, amax_trace(kind, 300, seed=5))
    np.testing.assert_array_equal(spike_steps(kind, 300, seed=5), spike_steps(kind, 300, seed=5))


def test_seed_changes_the_noise():
    assert not np.array_equal(amax_trace("steady", 50, seed=0), amax_trace("steady", 50, seed=1))


def test_steady_formula():
    z = np.random.default_rng(4).standard_normal(10)
    np.testing.assert_array_equal(amax_trace("steady", 10, seed=4, level=2.0, noise=0.1), 2.0 * np.exp(0.1 * z))
    np.testing.assert_array_equal(amax_trace("steady", 10, noise=0.0), np.ones(10))


def test_periodic_spikes():
    trace = amax_trace("spikes", 100, seed=2, period=20, offset=5, factor=8.0, level=0.5)
    np.testing.assert_array_equal(spike_steps("spikes", 100, seed=2, period=20, offset=5), [5, 25, 45, 65, 85])
    np.testing.assert_array_equal(trace[[5, 25, 45, 65, 85]], np.full(5, 4.0))  # factor * level, noise-free
    others = np.delete(trace, [5, 25, 45, 65, 85])
    z = np.random.default_rng(2).standard_normal(100)
    np.testing.assert_array_equal(others, np.delete(0.5 * np.exp(0.05 * z), [5, 25, 45, 65, 85]))
    np.testing.assert_array_equal(spike_steps("spikes", 100), np.arange(10, 100, 20))  # default offset period // 2


def test_random_spikes_follow_the_uniform_draw():
    rng = np.random.default_rng(7)
    rng.standard_normal(400)
    expected = np.flatnonzero(rng.random(400) < 1 / 20)
    np.testing.assert_array_equal(spike_steps("random_spikes", 400, seed=7), expected)
    assert expected.size > 5
    np.testing.assert_array_equal(amax_trace("random_spikes", 400, seed=7)[expected], np.full(expected.size, 10.0))


def test_kinds_without_spikes_have_none():
    for kind in set(TRACE_KINDS) - set(SPIKE_KINDS):
        assert spike_steps(kind, 100).size == 0


def test_drift_is_geometric_and_monotone():
    trace = amax_trace("drift", 200, rate=0.01, level=3.0)
    np.testing.assert_array_equal(trace, 3.0 * np.power(1.01, np.arange(200.0)))
    assert np.all(np.diff(trace) > 0)


def test_oscillation_is_periodic_and_non_monotone():
    trace = amax_trace("oscillation", 200, amplitude=0.5, period=40)
    np.testing.assert_allclose(trace[:160], trace[40:], rtol=1e-12)
    assert trace.max() == pytest.approx(1.5, rel=1e-12)
    assert trace.min() == pytest.approx(0.5, rel=1e-12)
    rising = np.diff(trace) > 0
    assert rising.any()
    assert (~rising).any()


def test_step_change_goes_up_then_down():
    trace = amax_trace("step_change", 30, factor=4.0, start=10, stop=20)
    np.testing.assert_array_equal(trace, [1.0] * 10 + [4.0] * 10 + [1.0] * 10)
    np.testing.assert_array_equal(amax_trace("step_change", 9), [1.0] * 3 + [4.0] * 3 + [1.0] * 3)


# -- claims on the synthetic traces ----------------------------------------------------------------------------

def test_spikes_max_window_has_no_recurring_saturation_most_recent_saturates_at_each():
    trace = amax_trace("spikes", 500, seed=0)
    spikes = spike_steps("spikes", 500, seed=0)
    assert spikes.size == 25  # steps 10, 30, ..., 490
    assert np.all(np.delete(trace, spikes) < 10.0)  # every base amax below the spike height
    most_recent = run_observer(trace, "most_recent", spikes=spikes)
    max_window = run_observer(trace, "max_window", spikes=spikes)
    # the step before every spike is not a spike (period 20 >= 2) and the first spike is not step 0
    assert (most_recent["spike_saturations"], most_recent["recurring_spike_saturations"]) == (25, 24)
    assert (max_window["spike_saturations"], max_window["recurring_spike_saturations"]) == (1, 0)
    assert max_window["headroom_lost_bits"] > most_recent["headroom_lost_bits"]  # the price: over-conservatism


def test_spikes_beyond_the_window_saturate_max_window_too():
    spikes = spike_steps("spikes", 500, period=100)
    result = run_observer(amax_trace("spikes", 500, period=100), "max_window", spikes=spikes)
    assert result["recurring_spike_saturations"] == spikes.size - 1 == 4


@pytest.mark.parametrize(("seed", "window"), [(0, 64), (1, 64), (2, 10), (3, 5)])
def test_random_spikes_saturations_derived_from_the_gaps(seed, window):
    trace = amax_trace("random_spikes", 500, seed=seed)
    spikes = spike_steps("random_spikes", 500, seed=seed)
    gaps = np.diff(spikes)
    first_saturates = int(spikes[0] > 0)
    max_window = run_observer(trace, "max_window", spikes=spikes, window=window)
    assert max_window["recurring_spike_saturations"] == int(np.sum(gaps > window))  # no equal spike in the window
    assert max_window["spike_saturations"] == first_saturates + int(np.sum(gaps > window))
    most_recent = run_observer(trace, "most_recent", spikes=spikes)
    assert most_recent["recurring_spike_saturations"] == int(np.sum(gaps > 1))  # the step before is no spike


def test_random_spikes_short_window_saturates():
    spikes = spike_steps("random_spikes", 500, seed=3)
    result = run_observer(amax_trace("random_spikes", 500, seed=3), "max_window", spikes=spikes, window=5)
    assert result["recurring_spike_saturations"] > 0


def test_monotone_drift_saturates_every_delayed_observer():
    trace = amax_trace("drift", 100, rate=0.01)
    most_recent = run_observer(trace, "most_recent")
    max_window = run_observer(trace, "max_window")
    np.testing.assert_array_equal(max_window["prediction"], most_recent["prediction"])  # the max is the last one
    assert most_recent["saturation_events"] == 99
    assert most_recent["worst_overshoot"] == pytest.approx(1.01, rel=1e-12)
    assert most_recent["headroom_lost_bits"] == 0.0
    assert run_observer(trace, "exp_smooth")["saturation_events"] == 99


def test_step_change_exact_counts():
    trace = amax_trace("step_change", 300, start=100, stop=200)
    most_recent = run_observer(trace, "most_recent")
    assert (most_recent["saturation_events"], most_recent["worst_overshoot"]) == (1, 4.0)
    assert most_recent["headroom_lost_bits"] == 2 / 299  # step 200 predicts 4 for an amax of 1
    max_window = run_observer(trace, "max_window")
    assert max_window["saturation_events"] == 1
    assert max_window["headroom_lost_bits"] == 64 * 2 / 299  # steps 200..263 still see the 4
    exp_smooth = run_observer(trace, "exp_smooth")
    assert exp_smooth["saturation_events"] == 100  # 4 - 3 * 0.9^k stays below 4 for k < 100


def test_exp_smooth_lags_on_oscillation():
    trace = amax_trace("oscillation", 500)
    exp_smooth = run_observer(trace, "exp_smooth")
    most_recent = run_observer(trace, "most_recent")
    assert exp_smooth["worst_overshoot"] > most_recent["worst_overshoot"] + 0.2


# -- observer_study --------------------------------------------------------------------------------------------

def test_observer_study_rows():
    rows = observer_study(("spikes", "drift"), ("most_recent", "max_window"), steps=200, seed=1)
    assert [(r["kind"], r["observer"]) for r in rows] == [("spikes", "most_recent"), ("spikes", "max_window"),
                                                          ("drift", "most_recent"), ("drift", "max_window")]
    trace = amax_trace("spikes", 200, seed=1)
    direct = run_observer(trace, "max_window", spikes=spike_steps("spikes", 200, seed=1))
    assert rows[1] == {"kind": "spikes", "observer": "max_window", "steps": 200, "seed": 1,
                       **{m: direct[m] for m in METRICS}}
    assert rows[2]["spike_count"] is None
    assert rows[2]["recurring_spike_saturations"] is None


def test_observer_study_observer_options():
    # spikes every 20 steps: a 16-step window forgets each spike before the next one, a 64-step window does not
    rows = observer_study(["spikes"], ["max_window"], steps=200, observer_options={"max_window": {"window": 16}})
    assert rows[0]["spike_saturations"] == rows[0]["spike_count"] == 10
    assert observer_study(["spikes"], ["max_window"], steps=200)[0]["spike_saturations"] == 1
    with pytest.raises(ValueError, match="window"):
        observer_study(["spikes"], ["max_window"], observer_options={"max_window": {"window": 0}})


def test_observer_study_defaults_and_determinism():
    rows = observer_study(steps=120)
    assert len(rows) == len(TRACE_KINDS) * len(DEFAULT_OBSERVERS)
    assert rows == observer_study(steps=120)
    assert all(r["saturation_events"] == 0 for r in rows if r["observer"] == "current")


# -- errors ----------------------------------------------------------------------------------------------------

def test_bad_kind_and_steps_raise():
    with pytest.raises(ValueError, match="'sawtooth'"):
        amax_trace("sawtooth", 10)
    for steps in (0, -3, 2.5, True, "10"):
        with pytest.raises(ValueError, match=f"steps must be an integer >= 1, got {steps!r}"):
            amax_trace("steady", steps)
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        amax_trace("steady", 10, seed=-1)
    with pytest.raises(ValueError, match="'sawtooth'"):
        observer_study(["sawtooth"])
    with pytest.raises(ValueError, match="'latest'"):
        observer_study(["steady"], ["latest"])


def test_bad_options_raise():
    with pytest.raises(ValueError, match="unknown option 'window' for trace kind 'steady'"):
        amax_trace("steady", 10, window=3)
    with pytest.raises(ValueError, match=r"noise must be .* got -0\.1"):
        amax_trace("steady", 10, noise=-0.1)
    with pytest.raises(ValueError, match=r"level must be .* got 0"):
        amax_trace("drift", 10, level=0)
    with pytest.raises(ValueError, match=r"period must be an integer >= 1, got 2\.5"):
        amax_trace("spikes", 10, period=2.5)
    with pytest.raises(ValueError, match=r"factor must be .* got 1\.0"):
        amax_trace("spikes", 10, factor=1.0)
    with pytest.raises(ValueError, match="amplitude must be < 1"):
        amax_trace("oscillation", 10, amplitude=1.0)
    with pytest.raises(ValueError, match="start=8, stop=4"):
        amax_trace("step_change", 10, start=8, stop=4)
    with pytest.raises(ValueError, match="not finite and positive"):
        amax_trace("drift", 2000, rate=1.0)


def test_bad_traces_raise():
    with pytest.raises(ValueError, match=r"got shape \(0,\)"):
        run_observer([], "most_recent")
    with pytest.raises(ValueError, match=r"got 0\.0 at step 1"):
        run_observer([1.0, 0.0], "most_recent")
    with pytest.raises(ValueError, match="got nan at step 0"):
        run_observer([math.nan], "most_recent")
    with pytest.raises(ValueError, match="spike step 3 is outside"):
        run_observer([1.0, 2.0], "most_recent", spikes=[3])
    with pytest.raises(ValueError, match="'latest'"):
        run_observer([1.0], "latest")
    with pytest.raises(ValueError, match="prediction has 1 steps, the trace 2"):
        saturation_metrics([1.0, 2.0], [1.0])
