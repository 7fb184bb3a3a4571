"""amax observers of delayed scaling: exact predictions step by step on hand-made traces."""

import math

import pytest

from common.observers import OBSERVER_NAMES, OBSERVERS, delayed_scale, make_observer


def trace(observer, amaxes):
    """The prediction before each update (delayed scaling: predict FIRST, then append), then the final one."""
    predictions = []
    for amax in amaxes:
        predictions.append(observer.predict())
        observer.update(amax)
    return [*predictions, observer.predict()]


def test_registry_names():
    assert OBSERVER_NAMES == ("most_recent", "max_window", "exp_smooth", "current")
    assert set(OBSERVERS) == set(OBSERVER_NAMES)


def test_most_recent_lags_one_step():
    assert trace(make_observer("most_recent"), [2.0, 5.0, 3.0]) == [None, 2.0, 5.0, 3.0]


def test_max_window_takes_the_max_of_the_last_window_amaxes_and_forgets_older_ones():
    observer = make_observer("max_window", window=3)
    assert trace(observer, [1.0, 4.0, 2.0, 3.0, 0.5, 0.25, 0.125]) == [None, 1.0, 4.0, 4.0, 4.0, 3.0, 3.0, 0.5]


def test_max_window_default_window_is_64():
    observer = make_observer("max_window")
    assert observer.window == 64
    predictions = trace(observer, [100.0] + [1.0] * 64)
    assert predictions[64] == 100.0  # the spike is the oldest of the last 64
    assert predictions[65] == 1.0  # and has left the window one step later


def test_exp_smooth_is_the_textbook_ema_seeded_with_the_first_amax():
    observer = make_observer("exp_smooth", alpha=0.25)
    # p1 = 4; p2 = 0.25*8 + 0.75*4 = 5; 0 is skipped; p3 = 0.25*2 + 0.75*5 = 4.25
    assert trace(observer, [4.0, 8.0, 0.0, 2.0]) == [None, 4.0, 5.0, 5.0, 4.25]
    assert make_observer("exp_smooth").alpha == 0.1


def test_current_returns_the_amax_passed_in():
    observer = make_observer("current")
    assert observer.predict() is None
    assert observer.predict(current=3.5) == 3.5
    observer.update(3.5)
    assert observer.predict() is None
    assert observer.predict(current=0.25) == 0.25


def test_history_observers_ignore_current():
    for name in ("most_recent", "max_window", "exp_smooth"):
        observer = make_observer(name)
        assert observer.predict(current=7.0) is None
        observer.update(2.0)
        assert observer.predict(current=7.0) == 2.0


@pytest.mark.parametrize("name", OBSERVER_NAMES)
def test_zero_and_non_finite_amaxes_are_skipped_and_counted(name):
    observer = make_observer(name)
    observer.update(2.0)
    for bad in (0.0, -0.0, math.nan, math.inf):
        observer.update(bad)
    assert observer.skipped == 4
    assert observer.predict() == (None if name == "current" else 2.0)


@pytest.mark.parametrize("name", OBSERVER_NAMES)
def test_reset_clears_history_and_skipped(name):
    observer = make_observer(name)
    observer.update(2.0)
    observer.update(math.nan)
    observer.reset()
    assert observer.predict() is None
    assert observer.skipped == 0


@pytest.mark.parametrize(("name", "options"), [("most_recent", {}), ("max_window", {"window": 2}),
                                                ("exp_smooth", {"alpha": 0.3}), ("current", {})])
def test_state_dict_round_trip(name, options):
    observer = make_observer(name, **options)
    for amax in (1.0, 3.0, 0.0, 2.0):
        observer.update(amax)
    restored = make_observer(name, **options)
    restored.load_state_dict(observer.state_dict())
    assert restored.predict() == observer.predict()
    assert restored.skipped == observer.skipped == 1
    observer.update(0.5)
    restored.update(0.5)
    assert restored.predict() == observer.predict()


def test_negative_amax_is_rejected():
    with pytest.raises(ValueError, match=r"amax must be >= 0 .*, got -1.0"):
        make_observer("most_recent").update(-1.0)


def test_delayed_scale():
    assert delayed_scale(7.5) == 15.0 / (7.5 + 1e-12)
    assert delayed_scale(0.0) == 15.0 / 1e-12
    assert delayed_scale(3.0, max_val=6.0) == 6.0 / (3.0 + 1e-12)
    with pytest.raises(ValueError, match="amax_pred must be finite and >= 0, got nan"):
        delayed_scale(math.nan)
    with pytest.raises(ValueError, match=r"amax_pred must be finite and >= 0, got -2\.0"):
        delayed_scale(-2.0)
    with pytest.raises(ValueError, match=r"max_val must be finite and > 0, got 0\.0"):
        delayed_scale(1.0, max_val=0.0)


def test_bad_names_and_options():
    with pytest.raises(ValueError, match="unknown observer 'max'; valid observers: most_recent, max_window"):
        make_observer("max")
    with pytest.raises(ValueError, match="unknown option 'alpha' for observer 'max_window'; valid options: window"):
        make_observer("max_window", alpha=0.5)
    with pytest.raises(ValueError, match="unknown option 'window' for observer 'current'; valid options: none"):
        make_observer("current", window=3)
    with pytest.raises(ValueError, match="window must be an integer >= 1, got 0"):
        make_observer("max_window", window=0)
    with pytest.raises(ValueError, match=r"alpha must be a number in \(0, 1\], got 1.5"):
        make_observer("exp_smooth", alpha=1.5)
