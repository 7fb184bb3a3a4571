"""The study summary: curves, gradient norms, steps to the same seed's baseline's final quality, speedups,
improvements, seed means per run, Hessian rows with the masses at the absolute thresholds, and the diagnostics
(mechanism per period against the same seed's baseline, the stagnation statistic by quarter)."""

import pytest
from winq_testing import (
    BASE_PERPLEXITY,
    MECHANISM,
    STAGNATION,
    build_study,
    hessian_cell,
    mechanism_records,
    stagnation_records,
)

from papers.winq.study import (
    cell_of,
    grad_norm_means,
    mechanism_summary,
    read_curve,
    read_grad_norms,
    read_records,
    row_of,
    run_table,
    stagnation_summary,
    steps_to_reach,
    study_summary,
    threshold_masses,
    value_at_half,
)


@pytest.fixture
def study(tmp_path):
    return build_study(tmp_path, seed_factor=0.1)


def test_read_curve_counts_steps_taken(tmp_path):
    path = tmp_path / "eval_log.csv"
    path.write_text("step,val_loss,val_perplexity,val_tokens\n9,1,30.5,64\n4,1,40.0,64\n")
    assert read_curve(path) == [(5, 40.0), (10, 30.5)]


def test_read_curve_rejects_an_empty_log(tmp_path):
    path = tmp_path / "eval_log.csv"
    path.write_text("step,val_loss,val_perplexity,val_tokens\n")
    with pytest.raises(ValueError, match=r"eval_log\.csv' has no row"):
        read_curve(path)


def test_grad_norms_by_quarter(tmp_path):
    path = tmp_path / "train_log.csv"
    path.write_text("step,loss,lr,grad_norm,tokens,seconds\n" + "".join(f"{s},1,1,{s + 1},1,1\n" for s in range(8)))
    norms = read_grad_norms(path)
    assert norms == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert grad_norm_means(norms) == {"second_quarter": 3.5, "last_quarter": 7.5, "last_half": 6.5}
    path.write_text("step,loss,lr,grad_norm,tokens,seconds\n0,1,1,1,1,1\n2,1,1,1,1,1\n")
    with pytest.raises(ValueError, match="a step missing"):
        read_grad_norms(path)
    with pytest.raises(ValueError, match="a run of 3 steps has no quarters"):
        grad_norm_means([1.0, 1.0, 1.0])


def test_steps_to_reach_and_the_half_point():
    curve = [(4, 120.0), (8, 90.0), (12, 95.0)]
    assert steps_to_reach(curve, 90.0) == 8
    assert steps_to_reach(curve, 100.0) == 8
    assert steps_to_reach(curve, 120.0) == 4
    assert steps_to_reach(curve, 89.9) is None
    assert value_at_half(curve, 16) == 90.0  # the last point at or before 8 steps
    assert value_at_half(curve, 12) == 120.0
    assert value_at_half(curve, 4) == 120.0  # none before: the first


def test_cells_against_the_same_seeds_baseline(study):
    summary = study_summary(*study)
    assert [r["cell"] for r in summary["cells"]][:4] == ["w1-baseline/seed0", "w1-baseline/seed1", "w1-winq/seed0",
                                                         "w1-winq/seed1"]
    baseline, winq = cell_of(summary, "w1-baseline/seed1"), cell_of(summary, "w1-winq/seed1")
    assert baseline["baseline_final_val_perplexity"] == pytest.approx(99.0)  # 90 x 1.1: seed 1's own baseline
    assert (baseline["steps_to_baseline"], baseline["speedup"]) == (12, 1.0)
    assert (winq["steps_to_baseline"], winq["speedup"]) == (6, 2.0)
    assert cell_of(summary, "w1-interpolation/seed0")["speedup"] == 1.5  # 90 <= 90 after 8 steps: at or below
    assert cell_of(summary, "w1-noise/seed0")["speedup"] is None  # never at or below 90
    assert winq["improvement"] == pytest.approx(0.08)  # (110 - 101.2) / 110
    assert baseline["improvement"] == 0.0
    assert str(baseline["improvement"]) == "0.0"  # not -0.0: the report prints +0.00%
    assert (winq["first_val_perplexity"], winq["half_val_perplexity"]) == pytest.approx((137.5, 96.8))
    assert baseline["grad_norm"] == pytest.approx({"second_quarter": 0.8, "last_quarter": 0.2, "last_half": 0.3})
    assert (winq["every"], winq["interpolations"], baseline["interpolations"]) == (3, 4, 0)  # 12 // 3
    assert (winq["seed"], winq["data_seed"], winq["noise_seed"]) == (1, 1, 1)
    assert winq["metrics"]["cloze_acc_se"] == pytest.approx((0.25 / 64) ** 0.5)
    assert summary["base"]["perplexity"] == BASE_PERPLEXITY
    assert summary["curves"]["w1-winq/seed0"] == {"steps": [2, 4, 6, 8, 10, 12],
                                                 "perplexity": [125.0, 110.0, 88.0, 84.0, 81.0, 80.0]}
    assert len(summary["grad_norms"]["w1-noise/seed1"]) == 12
    assert (winq["bits_per_weight"], winq["train_seconds"], winq["lr"]) == (1.25, 2.0, 4e-3)


def test_runs_are_seed_means(study):
    summary = study_summary(*study)
    winq = row_of(summary, "w1-winq")
    assert winq["seeds"] == [0, 1]
    assert winq["compared"] is True
    assert winq["test_perplexity"] == pytest.approx(92.0 * 1.05)
    assert winq["test_perplexity_sd"] == pytest.approx(92.0 * 0.1 / 2**0.5)
    assert winq["improvement"] == pytest.approx(0.08)
    assert (winq["speedup"], winq["speedups"]) == (2.0, [2.0, 2.0])
    assert row_of(summary, "w1-noise")["speedup"] is None
    assert winq["train_seconds"] == 4.0
    assert summary["seeds"]["w2-winq"] == [0, 1]
    assert summary["compared"] == {"w1": ["baseline", "winq", "interpolation", "noise"], "w2": ["baseline", "winq"]}
    assert summary["pooled_settings"] == ["w1", "w2"]
    assert summary["interpolation"] == {"strength": 0.8, "every": {"low_bit": 3, "a8": 3, "high_bit": 6}}
    assert summary["eval_every"] == 2
    assert {r["max_steps"] for r in summary["cells"]} == {winq["max_steps"]} == {12}  # every group's length


def test_hessian_rows(study):
    summary = study_summary(*study)
    assert [h["cell"] for h in summary["hessian"]] == [
        *(f"w1-{m}/seed{k}" for m in ("baseline", "interpolation", "noise") for k in (0, 1)),
        "w2-baseline/seed0", "w2-baseline/seed1"]
    row = summary["hessian"][0]
    assert (row["run"], row["seed"], row["setting"], row["bits"], row["method"]) == ("w1-baseline", 0, "w1", 1,
                                                                                     "baseline")
    assert row["near_zero_mass"] == pytest.approx(0.5)
    assert (row["abs_threshold"], row["notebook_threshold"]) == (1e-3, 1.5e-3)
    assert row["abs_masses"] == pytest.approx({"near_zero": 0.5, "negative": 0.25, "positive": 0.25})


def test_threshold_masses_are_strict_near_zero():
    cell = {"nodes": [[-2e-3, -1e-3, 0.0, 5e-4, 1e-3]], "weights": [[0.1, 0.2, 0.3, 0.15, 0.25]]}
    assert threshold_masses(cell, 1e-3) == pytest.approx({"near_zero": 0.45, "negative": 0.3, "positive": 0.25})
    assert threshold_masses(cell, 1.5e-3) == pytest.approx({"near_zero": 0.9, "negative": 0.1, "positive": 0.0})


def test_a_missing_artifact_is_named(study):
    config, curves, logs, evaluations, hessians, records, seconds, bits, *_ = study
    without = lambda d, key: {k: v for k, v in d.items() if k != key}  # noqa: E731
    with pytest.raises(ValueError, match="missing evaluation of 'w2-winq/seed1'"):
        study_summary(config, curves, logs, without(evaluations, "w2-winq/seed1"), hessians, records, seconds, bits)
    with pytest.raises(ValueError, match="missing evaluation of 'base'"):
        study_summary(config, curves, logs, without(evaluations, "base"), hessians, records, seconds, bits)
    with pytest.raises(ValueError, match=r"cell 'w1-winq/seed0' has no evaluation log"):
        study_summary(config, without(curves, "w1-winq/seed0"), logs, evaluations, hessians, records, seconds, bits)
    with pytest.raises(ValueError, match=r"cell 'w1-noise/seed1' has no training log"):
        study_summary(config, curves, without(logs, "w1-noise/seed1"), evaluations, hessians, records, seconds, bits)
    with pytest.raises(ValueError, match=r"cell 'w2-baseline/seed0' has no checkpoint record"):
        study_summary(config, curves, logs, evaluations, hessians, without(records, "w2-baseline/seed0"), seconds,
                      bits)


def test_run_table_is_flat(study):
    table = run_table(study_summary(*study))
    assert table[2]["cell"] == "w1-winq/seed0"
    assert table[2]["speedup"] == 2.0
    assert table[2]["test ppl"] == 92.0
    assert table[0]["grad norm last/second quarter"] == pytest.approx(0.25)


def test_hessian_cell_helper_masses_sum_to_one():
    cell = hessian_cell(2, "baseline", near_zero=0.4, largest=2.0)
    assert cell["near_zero_mass"] + cell["negative_mass"] + cell["positive_mass"] == pytest.approx(1.0)


def test_mechanism_summary_means_over_periods():
    summary = mechanism_summary(mechanism_records(MECHANISM["interpolation"]))
    assert summary["steps"] == [3, 6, 9, 12]
    assert summary["interpolated"] is True
    assert summary["near_boundary_after"] == [0.25, 0.25, 0.25, None]
    mean = summary["mean"]
    assert mean["codes_changed"] == 0.078125  # (0.125 + 3 x 0.0625) / 4
    assert mean["codes_changed_after_first"] == 0.0625
    assert mean["near_boundary_before"] == pytest.approx(1.25 / 3)  # the boundaries with a next period
    assert (mean["near_boundary_after"], mean["clipped_before"], mean["clipped_after"]) == (0.25, 0.25, 0.125)
    assert mean["codes_changed_by_interpolation_max"] == 0.0
    assert mechanism_summary([]) is None
    assert mechanism_summary(mechanism_records(MECHANISM["baseline"])[:1])["mean"]["codes_changed_after_first"] is None


def test_stagnation_summary_by_quarter():
    records = stagnation_records(STAGNATION)
    summary = stagnation_summary(records, 12)
    assert summary["steps"] == [2, 4, 6, 8, 10, 12]
    # second quarter (3, 6]: after 4 and 6 steps; last quarter (9, 12]: after 10 and 12 steps
    assert (summary["second_quarter"], summary["last_quarter"], summary["last_over_second"]) == (0.25, 0.0625, 0.25)
    sparse = stagnation_summary(records[-1:], 12)
    assert (sparse["second_quarter"], sparse["last_over_second"]) == (None, None)
    with pytest.raises(ValueError, match="no stagnation record"):
        stagnation_summary([], 12)


def test_the_diagnostics_per_cell_and_run(study):
    """The planted diagnostics (``winq_testing.MECHANISM``, ``STAGNATION``; seed 1 scales them by 1.1)."""
    assert read_records(study[-2]["w1-noise/seed0"]) == []
    summary = study_summary(*study)
    interpolation = cell_of(summary, "w1-interpolation/seed1")
    assert interpolation["mechanism"]["mean"]["codes_changed_after_first"] == pytest.approx(0.0625 * 1.1)
    assert interpolation["mechanism_vs_baseline"] == pytest.approx({
        "codes_changed": (0.078125 - 0.125) * 1.1, "codes_changed_after_first": -0.0625 * 1.1,
        "near_boundary_before": (1.25 / 3 - 0.5) * 1.1, "near_boundary_after": -0.25 * 1.1, "clipped_before": 0.0,
        "clipped_after": -0.125 * 1.1})
    assert cell_of(summary, "w1-baseline/seed0")["mechanism_vs_baseline"] == dict.fromkeys(
        interpolation["mechanism_vs_baseline"], 0.0)
    noise = cell_of(summary, "w1-noise/seed0")
    assert (noise["mechanism"], noise["mechanism_vs_baseline"]) == (None, None)
    assert noise["stagnation"]["last_over_second"] == 0.25
    run = row_of(summary, "w1-interpolation")
    assert run["mechanism"]["codes_changed_after_first"] == pytest.approx(0.0625 * 1.05)  # seeds 0, 1: x 1, 1.1
    assert run["mechanism_vs_baseline"]["near_boundary_after"] == pytest.approx(-0.25 * 1.05)
    assert run["stagnation"] == pytest.approx({"second_quarter": 0.25 * 1.05, "last_quarter": 0.0625 * 1.05,
                                               "last_over_second": 0.25})
    assert (row_of(summary, "w1-noise")["mechanism"], row_of(summary, "w1-noise")["mechanism_vs_baseline"]) == (
        None, None)
    plain = study_summary(*study[:-2])  # without the diagnostics: no entries
    assert (cell_of(plain, "w1-winq/seed0")["mechanism"], row_of(plain, "w1-winq")["stagnation"]) == (None, None)


def test_a_cell_without_its_diagnostics_is_named(study):
    *inputs, mechanism, stagnation = study
    del mechanism["w2-winq/seed1"]
    with pytest.raises(ValueError, match=r"cell 'w2-winq/seed1' has no mechanism record \(mechanism\.jsonl\)"):
        study_summary(*inputs, mechanism, stagnation)
    with pytest.raises(ValueError, match=r"cell 'w1-baseline/seed0' has no stagnation record"):
        study_summary(*inputs, stagnation={})


def test_the_summary_step_reads_every_artifact_and_the_diagnostics(tmp_path):
    """``python -m papers.winq summary`` on the artifacts' paths (the cell parsed from each) writes the summary of
    ``study_summary``, the diagnostics included."""
    import json

    from common.io import read_json, write_json
    from papers.winq.__main__ import main

    study = build_study(tmp_path / "runs", seed_factor=0.1)
    config, curves, logs, evaluations, hessians, records, seconds, bits, mechanism, stagnation = study
    paths = {"evaluations": [], "hessians": [], "trained": [], "quantized": []}
    for name, record in evaluations.items():
        paths["evaluations"].append(tmp_path / "eval" / f"{name}.json")
        write_json(paths["evaluations"][-1], record)
    for cell, spectrum in hessians.items():
        paths["hessians"].append(tmp_path / "hessian" / f"{cell}.json")
        write_json(paths["hessians"][-1], spectrum)
    for cell in curves:
        write_json(curves[cell].with_name("train_summary.json"), {"seconds": seconds[cell]})
        paths["trained"].append(tmp_path / "trained" / cell)
        write_json(paths["trained"][-1] / "lowbit_metadata.json", records[cell])
        paths["quantized"].append(tmp_path / "quantized" / cell)
        write_json(paths["quantized"][-1] / "size_report.json", {"bits_per_weight": bits[cell]})
    paths |= {"curves": list(curves.values()), "logs": list(logs.values()), "mechanism": list(mechanism.values()),
              "stagnation": list(stagnation.values())}
    out = tmp_path / "summary.json"
    argv = ["summary", "--config-json", json.dumps(config), "--out", str(out)]
    for flag, files in paths.items():
        argv += [f"--{flag}", *map(str, files)]
    assert main(argv) == 0
    summary = read_json(out)
    assert summary == json.loads(json.dumps(study_summary(*study)))
    assert cell_of(summary, "w1-interpolation/seed0")["mechanism_vs_baseline"]["codes_changed_after_first"] == -0.0625
    assert row_of(summary, "w1-baseline")["stagnation"]["last_over_second"] == pytest.approx(0.25)
