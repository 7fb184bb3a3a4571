"""End to end, finer_is_better specifics from the session's smoke build (``conftest.py``): every configured claim
has a row per operand set with an interval and a rule-made verdict, the implementation checks passed, the sweep
computes one function, the checksums cover the cells, one sweep point's cells rerun alone, and a wrong config
key stops the run before any work. The checks every report shares are in ``test_reports.py``."""

import json
import re

import pytest
import yaml

pytestmark = pytest.mark.slow
PAPER = "finer_is_better"
CELL = "results/smoke/finer_is_better/ptq/smoke-c0.7/wa/e2m1-ue4m3-b4-four_over_six.json"
PAPER_ROWS = "gap_agrees_with_paper"
NUMERICAL = {"absmax_reversal", "prevent_zero_removes_region_a", "region_b_persists", "four_over_six_resolves_region_b",
             "four_over_six_pz_resolves_region_b", "four_over_six_alone_leaves_region_a",
             "brute_force_finer_is_better", "heuristics_short_of_brute_force"}


def test_every_claim_has_its_rows_with_intervals(smoke_build):
    document = json.loads((smoke_build / f"results/smoke/{PAPER}/claims.json").read_text())
    config = yaml.safe_load((smoke_build / f"papers/{PAPER}/config.yaml").read_text())[PAPER]
    sweep_ids = set(config["claims"]) - NUMERICAL - {PAPER_ROWS}
    paper_rows = {f"{PAPER_ROWS}_{v}" for v in config["paper_gaps"]["variants"]}
    expected = NUMERICAL | {f"{cid}_{op}" for cid in sweep_ids for op in ("w", "wa")} | paper_rows
    assert {c["id"] for c in document["claims"]} == expected
    assert sum(sum(counts.values()) for counts in document["counts_by_kind"].values()) == len(expected)
    for row in document["claims"]:
        assert row["estimate"] is not None or row["reason"], row["id"]
        if row["estimate"] is not None:
            assert row["estimate"]["low"] <= row["estimate"]["high"]
    assert {c["id"] for c in document["checks"]} == {
        "brute_force_lowest", "brute_force_monotone", "prevent_zero_no_zero_scale", "prevent_zero_at_most_absmax",
        "sweep_preserves_function"}
    assert all(c["passed"] for c in document["checks"])
    for row in document["claims"]:  # the smoke model is not the paper's Llama-3.1-8B
        if row["id"] in paper_rows:
            assert row["verdict"] == "not testable at this scale"
            assert row["reason"].startswith("needs Llama-3.1-8B as it is"), row["reason"]


def test_the_report_sets_the_paper_beside_ours(smoke_build):
    context = json.loads((smoke_build / f"results/smoke/{PAPER}/report/context.json").read_text())
    tables = {t["caption"].split(":")[0]: t for t in context["tables"]}
    shape = tables["The paper's shape statistics beside ours, weights + activations"]
    assert shape["rows"][0][1].startswith("Llama-3.1-8B: 0.725 -> 0.270 (-62.8%)")  # from the authors' table
    assert shape["rows"][0][2].startswith("smoke-c0.25 (sigma ")  # ours, per sweep point
    numerics = tables["Numerics of the model study"]
    assert {row[-1] for row in numerics["rows"]} == {"different"}  # smoke: ours, beside theirs
    assert not any(t.startswith("Per cell") for t in tables)  # no model of the authors' in the smoke profile
    html = (smoke_build / f"reports/smoke/{PAPER}.html").read_text(encoding="utf-8")
    assert "<caption>The paper&#39;s shape statistics beside ours" in html
    assert "<caption>Numerics of the model study: this run&#39;s convention (lowbit)" in html
    assert "w (our extension)" in html
    sums = (smoke_build / f"reports/smoke/{PAPER}.SHA256SUMS").read_text()
    assert f"papers/{PAPER}/data/authors_results.csv" in sums


def test_sweep_points_share_the_function_and_move_sigma(smoke_build):
    points = {c: json.loads((smoke_build / f"results/smoke/{PAPER}/ptq/smoke-c{c}/summary.json").read_text())
              for c in ("2", "0.7", "0.25")}
    assert points["2"]["perplexity"] == pytest.approx(points["0.7"]["perplexity"], rel=1e-4)
    assert points["0.25"]["perplexity"] == pytest.approx(points["0.7"]["perplexity"], rel=1e-4)
    assert points["2"]["sigma"] == pytest.approx(2 / 0.7 * points["0.7"]["sigma"], rel=1e-5)
    assert points["0.25"]["sigma"] == pytest.approx(0.25 / 0.7 * points["0.7"]["sigma"], rel=1e-5)


def test_checksums_cover_the_cells(smoke_build):
    sums = (smoke_build / f"reports/smoke/{PAPER}.SHA256SUMS").read_text()
    listed = {line.split("  ", 1)[1] for line in sums.splitlines()}
    assert {CELL, "results/smoke/finer_is_better/mse/summary.json",
            "results/smoke/finer_is_better/mse/e2m1-ue4m3-b4-brute_force.json"} <= listed


def test_one_cell_reruns_alone(smoke_build, plan_snakemake):
    dry = plan_snakemake(smoke_build, "--forcerun", CELL, "--", CELL)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"fib_ptq_cells": "1", "total": "1"}


def test_a_wrong_config_key_stops_before_any_work(smoke_build, plan_snakemake, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("finer_is_better:\n  numerical:\n    sampels: 10\n")
    run = plan_snakemake(smoke_build, "--configfile", str(bad), "--", f"reports/smoke/{PAPER}.html")
    assert run.returncode != 0
    assert "sampels" in run.stdout + run.stderr
