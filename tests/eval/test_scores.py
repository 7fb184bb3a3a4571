"""Per-unit scores of evaluation records: the bootstrap columns of the windows, per-example correctness, and the
check that they make the recorded metrics (each mismatch named)."""

import math

import numpy as np
import pytest

from common.eval.scores import ACCURACY, TASK_ACCURACY, example_correct, score_mismatches, window_columns


def record(nll=(6.0, 9.0), tokens=(3, 3), cloze=(1, 0, 1), choice=(0, 1, 1)):
    """A record whose metrics are those of its per-unit scores."""
    return {"metrics": {
        "perplexity": {"perplexity": math.exp(sum(nll) / sum(tokens)), "tokens": sum(tokens),
                       "window_nll": list(nll), "window_tokens": list(tokens)},
        "cloze": {"correct": sum(cloze), "example_correct": list(cloze)},
        "choice": {"correct_norm": sum(choice), "example_correct_norm": list(choice)}}}


def test_window_columns_are_the_perplexity_columns():
    columns = window_columns("m", record())
    assert set(columns) == {"m.nll", "m.tokens"}
    np.testing.assert_array_equal(columns["m.nll"], [6.0, 9.0])
    np.testing.assert_array_equal(columns["m.tokens"], [3.0, 3.0])


def test_window_columns_name_a_record_without_window_scores():
    bare = {"metrics": {"perplexity": {"perplexity": 2.0, "tokens": 6}}}
    with pytest.raises(ValueError, match=r"evaluation of 'm' has no per-window scores \(window_nll, window_tokens\)"):
        window_columns("m", bare)


def test_example_correct_reads_the_accuracy_field():
    assert example_correct("m", record(), "choice", ACCURACY["acc_norm"]).tolist() == [0.0, 1.0, 1.0]
    assert example_correct("m", record(), "cloze", ACCURACY["acc"]).dtype == np.float64
    with pytest.raises(ValueError, match=r"evaluation of 'm' has no choice example_correct \(metric groups: choice, "
                                         r"cloze, perplexity\)"):
        example_correct("m", record(), "choice", ACCURACY["acc"])


def test_scores_that_make_the_metrics_have_no_mismatch():
    assert score_mismatches("m", record(), TASK_ACCURACY) == []
    shift = record()
    del shift["metrics"]["cloze"], shift["metrics"]["choice"]
    assert score_mismatches("m", shift, TASK_ACCURACY) == []  # a record without the tasks: only its perplexity


def test_every_mismatch_is_named():
    bad = record()
    bad["metrics"]["perplexity"]["perplexity"] *= 1.001
    bad["metrics"]["cloze"]["correct"] += 1
    value = math.exp(15 / 6)
    assert score_mismatches("m", bad, TASK_ACCURACY) == [
        f"m: perplexity {value * 1.001:.10g} vs {value:.10g} from 6 window tokens (recorded 6)",
        "m: cloze correct 3 vs 2 from example_correct"]
    tokens = record()
    tokens["metrics"]["perplexity"]["tokens"] = 7
    assert score_mismatches("m", tokens, TASK_ACCURACY) == [
        f"m: perplexity {value:.10g} vs {value:.10g} from 6 window tokens (recorded 7)"]


def test_the_tolerance_is_relative():
    close = record()
    close["metrics"]["perplexity"]["perplexity"] *= 1 + 1e-12
    assert score_mismatches("m", close, TASK_ACCURACY) == []
    assert score_mismatches("m", close, TASK_ACCURACY, rel_tol=1e-14) != []
