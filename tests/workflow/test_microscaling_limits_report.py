"""End to end, microscaling_limits specifics from the session's smoke build (``conftest.py``): every configured
claim is a row of the claims document, the checks passed, the pre-registration has no model input and names both
models' crossovers, our exact theory vs simulation within 2%, the paper's model tested on the authors' whole sigma
grid, one cell (of the base study and of a sweep point) reruns alone, and a wrong config value stops the run before
any work. The checks every report shares are in ``test_reports.py``."""

import json
import re

import pytest

pytestmark = pytest.mark.slow
PAPER = "microscaling_limits"
CELL = "results/smoke/microscaling_limits/ptq/smoke/e2m1-ue5m3-b8.json"
SWEEP_CELL = "results/smoke/microscaling_limits/ptq/smoke-c0.25/e2m1-ue4m3-b16-weights.json"
PREREGISTERED = "results/smoke/microscaling_limits/sweep/preregistered.json"


def test_the_paper_claims_are_all_rows(smoke_build):
    from papers.microscaling_limits.claims import CLAIM_IDS

    document = json.loads((smoke_build / f"results/smoke/{PAPER}/claims.json").read_text())
    rows = {c["id"]: c for c in document["claims"]}
    assert list(rows) == list(CLAIM_IDS)
    assert all(c["passed"] for c in document["checks"])
    assert {c["id"] for c in document["checks"]} == {"theory_parts_sum_to_total",
                                                     "zero_block_probability_reconstruction",
                                                     "exact_theory_matches_simulation",
                                                     "sweep_preserves_function", "sweep_moves_sigma_by_factor"}
    assert rows["paper_model_matches_simulation"]["estimate"]["value"] > 0.05  # truncation at +-6s: off by ~10%
    assert rows["exact_model_beats_paper_model"]["verdict"] == "reproduced"
    for onset in ("sweep_inversion_onset", "sweep_inversion_onset_exact"):
        assert rows[onset]["estimate"] is not None  # never untestable: no onset is beyond the grid
    assert sum(sum(counts.values()) for counts in document["counts_by_kind"].values()) == len(CLAIM_IDS)


def test_the_preregistration_has_no_model_input(smoke_build, plan_snakemake):
    dry = plan_snakemake(smoke_build, "--forcerun", PREREGISTERED, "--", PREREGISTERED)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"msl_preregister": "1", "total": "1"}
    prereg = json.loads((smoke_build / PREREGISTERED).read_text())
    assert 0.0161 < prereg["crossover"]["ue4m3"] < 0.0162  # ours
    assert 0.0158 < prereg["crossover_paper"]["ue4m3"] < 0.0159  # the paper's model


def test_theory_matches_simulation_within_two_percent(smoke_build):
    validation = json.loads((smoke_build / f"results/smoke/{PAPER}/validation.json").read_text())
    assert {p["scale"] for p in validation["points"]} == {"ue4m3", "ue5m3"}
    assert max(p["relative_error"] for p in validation["points"]) <= 0.02


def test_the_papers_model_is_tested_on_the_authors_grid(smoke_build):
    from common.theory import paper_sigmas

    comparison = json.loads((smoke_build / f"results/smoke/{PAPER}/paper_model/comparison.json").read_text())
    blocks = sorted({p["block_size"] for p in comparison["points"]})
    assert blocks == [4, 8, 16, 32]
    for n in blocks:
        assert [p["sigma"] for p in comparison["points"] if p["block_size"] == n] == paper_sigmas().tolist()
    assert max(abs(p["exact_error"]) for p in comparison["points"]) <= 0.02


@pytest.mark.parametrize(("cell", "rule"), [(CELL, "msl_ptq_cells"), (SWEEP_CELL, "msl_ptq_sweep_cells")])
def test_one_cell_reruns_its_model_alone(smoke_build, plan_snakemake, cell, rule):
    """Asking for one cell reruns the one job of its model (or sweep point), nothing upstream or downstream."""
    dry = plan_snakemake(smoke_build, "--forcerun", cell, "--", cell)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {rule: "1", "total": "1"}


def test_a_wrong_config_value_stops_before_any_work(smoke_build, plan_snakemake, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("microscaling_limits:\n  model:\n    variants: [ue4m3, ue6m2]\n")
    run = plan_snakemake(smoke_build, "--configfile", str(bad), "--", f"reports/smoke/{PAPER}.html")
    assert run.returncode != 0
    assert "ue6m2" in run.stdout + run.stderr
