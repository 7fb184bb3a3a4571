import math

from common.eval import accuracy_standard_error, metric_entry, relative_drop


def test_relative_drop_is_positive_when_worse():
    assert relative_drop(0.375, 0.5, higher_is_better=True) == 0.25  # accuracy fell
    assert relative_drop(0.625, 0.5, higher_is_better=True) == -0.25
    assert relative_drop(20.0, 16.0, higher_is_better=False) == 0.25  # perplexity rose
    assert relative_drop(12.0, 16.0, higher_is_better=False) == -0.25
    assert relative_drop(16.0, 16.0, higher_is_better=False) == 0.0


def test_relative_drop_is_undefined_against_zero():
    assert relative_drop(0.25, 0.0, higher_is_better=True) is None


def test_accuracy_standard_error():
    assert accuracy_standard_error(0.5, 1024) == 1 / 64
    assert accuracy_standard_error(0.25, 3) == 0.25
    assert accuracy_standard_error(0.0, 10) == 0.0
    assert accuracy_standard_error(1.0, 10) == 0.0
    assert math.isclose(accuracy_standard_error(0.1, 100), 0.03)


def test_metric_entry():
    assert metric_entry("perplexity", {"perplexity": 12.5, "tokens": 64}, "perplexity", accuracy=False) == {
        "perplexity": 12.5}
    assert metric_entry("cloze_acc", {"acc": 0.25, "examples": 3}, "acc", accuracy=True) == {
        "cloze_acc": 0.25, "cloze_acc_n": 3, "cloze_acc_se": 0.25}
