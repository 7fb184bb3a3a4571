"""End to end, finer_is_better specifics from the session's smoke build (``conftest.py``): the claims it must
check, the checksums cover the cells, one cell reruns alone, and a wrong config key stops the run before any
work. The checks every report shares are in ``test_reports.py``."""

import json
import re

import pytest

pytestmark = pytest.mark.slow
PAPER = "finer_is_better"
CELL = "results/finer_is_better/ptq/smoke/e2m1-ue4m3-b4-four_over_six.json"


def test_the_paper_claims_are_all_checked(smoke_build):
    claims = json.loads((smoke_build / f"results/{PAPER}/claims.json").read_text())
    assert {c["id"] for c in claims} >= {"absmax_reversal", "prevent_zero_region_a", "four_over_six_region_b",
                                         "brute_force_monotone", "heuristics_above_brute_force",
                                         "four_over_six_gap_block4", "u_shape", "hierarchical_vs_ue5m3"}


def test_checksums_cover_the_cells(smoke_build):
    listed = {line.split("  ", 1)[1] for line in (smoke_build / f"reports/{PAPER}.SHA256SUMS").read_text().splitlines()}
    assert {CELL, "results/finer_is_better/mse/summary.json",
            "results/finer_is_better/mse/e2m1-ue4m3-b4-brute_force.json"} <= listed


def test_one_cell_reruns_alone(smoke_build, run_snakemake):
    dry = run_snakemake(smoke_build, "-n", "--forcerun", CELL, "--", CELL)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"fib_ptq_cell": "1", "total": "1"}


def test_a_wrong_config_key_stops_before_any_work(smoke_build, run_snakemake):
    bad = smoke_build / "bad.yaml"
    bad.write_text("finer_is_better:\n  numerical:\n    sampels: 10\n")
    run = run_snakemake(smoke_build, "-n", "--configfile", str(bad), "--", f"reports/{PAPER}.html")
    assert run.returncode != 0
    assert "sampels" in run.stdout + run.stderr
