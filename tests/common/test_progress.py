"""common.progress: bars only when asked or on a terminal, the iteration itself unchanged."""

import io
import sys

import pytest

from common.progress import ENV_VAR, progress, progress_enabled


def test_forced_bar_is_drawn_and_items_are_unchanged(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setenv(ENV_VAR, "1")
    assert list(progress(range(5), "counting", total=5)) == [0, 1, 2, 3, 4]
    assert "counting: 100%" in stream.getvalue()


def test_no_bar_off_a_terminal_or_when_disabled(monkeypatch):
    stream = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert not progress_enabled()
    assert list(progress(iter("abc"), "letters")) == ["a", "b", "c"]
    monkeypatch.setenv(ENV_VAR, "0")
    assert list(progress([1], "one")) == [1]
    assert stream.getvalue() == ""


def test_bad_setting_names_the_value(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "yes")
    with pytest.raises(ValueError, match="LOWBIT_PROGRESS must be 0 or 1, got 'yes'"):
        progress_enabled()
