"""The study summary: curves, steps to the baseline's final quality, speedups, improvements, Hessian rows."""

import pytest
from winq_testing import BASE_PERPLEXITY, PLANTED, build_study, hessian_cell

from papers.winq.study import read_curve, row_of, run_table, steps_to_reach, study_summary


@pytest.fixture
def study(tmp_path):
    return build_study(tmp_path)


def test_read_curve_counts_steps_taken(tmp_path):
    path = tmp_path / "eval_log.csv"
    path.write_text("step,val_loss,val_perplexity,val_tokens\n9,1,30.5,64\n4,1,40.0,64\n")
    assert read_curve(path) == [(5, 40.0), (10, 30.5)]


def test_read_curve_rejects_an_empty_log(tmp_path):
    path = tmp_path / "eval_log.csv"
    path.write_text("step,val_loss,val_perplexity,val_tokens\n")
    with pytest.raises(ValueError, match=r"eval_log\.csv' has no row"):
        read_curve(path)


def test_steps_to_reach_is_the_first_point_at_or_below():
    curve = [(4, 120.0), (8, 90.0), (12, 95.0)]
    assert steps_to_reach(curve, 90.0) == 8
    assert steps_to_reach(curve, 100.0) == 8
    assert steps_to_reach(curve, 120.0) == 4
    assert steps_to_reach(curve, 89.9) is None


def test_speedups_and_improvements(study):
    summary = study_summary(*study)
    assert [r["run"] for r in summary["runs"]] == [f"{s}-{m}" for s in ("w2", "w4") for m in PLANTED]
    baseline, winq = row_of(summary, "w2-baseline"), row_of(summary, "w2-winq")
    assert baseline["baseline_final_val_perplexity"] == 90.0
    assert (baseline["steps_to_baseline"], baseline["speedup"]) == (12, 1.0)
    assert (winq["steps_to_baseline"], winq["speedup"]) == (8, 1.5)  # 88 <= 90 after 8 steps
    assert row_of(summary, "w4-interpolation")["speedup"] == 1.5  # 90 <= 90 after 8 steps: at or below counts
    assert row_of(summary, "w4-noise")["speedup"] is None  # never at or below 90
    assert winq["improvement"] == pytest.approx(0.08)  # (100 - 92) / 100
    assert row_of(summary, "w2-noise")["improvement"] == pytest.approx(0.02)
    assert baseline["improvement"] == 0.0
    assert str(baseline["improvement"]) == "0.0"  # not -0.0: the report prints +0.00%
    assert winq["metrics"]["cloze_acc_se"] == pytest.approx((0.25 / 64) ** 0.5)
    assert summary["base"]["perplexity"] == BASE_PERPLEXITY
    assert summary["curves"]["w2-winq"] == {"steps": [4, 8, 12], "perplexity": [110.0, 88.0, 80.0]}
    assert (winq["bits_per_weight"], winq["train_seconds"], winq["lr"]) == (2.25, 2.0, 2e-4)


def test_hessian_rows(study):
    summary = study_summary(*study)
    assert [h["run"] for h in summary["hessian"]] == ["w2-baseline", "w2-winq", "w4-baseline", "w4-winq"]
    row = summary["hessian"][0]
    assert (row["setting"], row["bits"], row["method"], row["largest_abs_eigenvalue"]) == ("w2", 2, "baseline", 2.0)
    assert row["near_zero_mass"] == pytest.approx(0.4)


def test_a_missing_evaluation_or_baseline_is_named(study):
    config, curves, evaluations, hessians, seconds, bits = study
    with pytest.raises(ValueError, match="missing evaluation of 'w4-noise'"):
        study_summary(config, curves, {k: v for k, v in evaluations.items() if k != "w4-noise"}, hessians, seconds,
                      bits)
    with pytest.raises(ValueError, match="missing evaluation of 'base'"):
        study_summary(config, curves, {k: v for k, v in evaluations.items() if k != "base"}, hessians, seconds, bits)
    with pytest.raises(ValueError, match="run 'w2-winq' has no evaluation log"):
        study_summary(config, {k: v for k, v in curves.items() if k != "w2-winq"}, evaluations, hessians, seconds,
                      bits)
    no_baseline = {**config, "methods": ["winq"]}
    with pytest.raises(ValueError, match="setting 'w2' has no baseline run"):
        study_summary(no_baseline, curves, evaluations, hessians, seconds, bits)


def test_run_table_is_flat(study):
    table = run_table(study_summary(*study))
    assert table[1]["run"] == "w2-winq"
    assert table[1]["speedup"] == 1.5
    assert table[1]["test ppl"] == 92.0


def test_hessian_cell_helper_masses_sum_to_one():
    cell = hessian_cell(2, "baseline", near_zero=0.4, largest=2.0)
    assert cell["near_zero_mass"] + cell["negative_mass"] + cell["positive_mass"] == pytest.approx(1.0)
