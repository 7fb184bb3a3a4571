"""End to end, microscaling_limits specifics from the session's smoke build (``conftest.py``): the claims it must
check, theory vs simulation within 2%, one cell reruns alone, and a wrong config value stops the run before any
work. The checks every report shares are in ``test_reports.py``."""

import json
import re

import pytest

pytestmark = pytest.mark.slow
PAPER = "microscaling_limits"
CELL = "results/microscaling_limits/ptq/smoke/e2m1-ue5m3-b8.json"


def test_the_paper_claims_are_all_checked(smoke_build):
    claims = {c["id"]: c for c in json.loads((smoke_build / f"results/{PAPER}/claims.json").read_text())}
    assert set(claims) >= {"theory_matches_simulation", "zero_block_probability", "narrow_tensors_invert",
                           "ue5m3_removes_tensor_inversion", "perplexity_inversion",
                           "ue5m3_removes_perplexity_inversion", "ue5m3_matches_ue4m3s"}
    assert claims["theory_matches_simulation"]["verdict"] == "reproduced"
    assert claims["zero_block_probability"]["verdict"] == "reproduced"


def test_theory_matches_simulation_within_two_percent(smoke_build):
    validation = json.loads((smoke_build / f"results/{PAPER}/validation.json").read_text())
    assert {p["scale"] for p in validation["points"]} == {"ue4m3", "ue5m3"}
    assert max(p["relative_error"] for p in validation["points"]) <= 0.02


def test_one_cell_reruns_alone(smoke_build, run_snakemake):
    dry = run_snakemake(smoke_build, "-n", "--forcerun", CELL, "--", CELL)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"msl_ptq_cell": "1", "total": "1"}


def test_a_wrong_config_value_stops_before_any_work(smoke_build, run_snakemake):
    bad = smoke_build / "bad.yaml"
    bad.write_text("microscaling_limits:\n  model:\n    variants: [ue4m3, ue6m2]\n")
    run = run_snakemake(smoke_build, "-n", "--configfile", str(bad), "--", f"reports/{PAPER}.html")
    assert run.returncode != 0
    assert "ue6m2" in run.stdout + run.stderr
