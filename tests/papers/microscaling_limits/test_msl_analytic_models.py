"""The two analytic models against simulation on the authors' grid: the simulation cells, the comparison (exact
arithmetic with planted theory), the simulated crossover, the real crossovers, and the command-line steps."""

import json

import pytest
from msl_testing import fake_models, sim_cell, tiny_config

from common.analysis import mse_sweep
from common.theory import crossover, paper_sigmas
from papers.microscaling_limits import analytic_models
from papers.microscaling_limits.__main__ import main


@pytest.fixture(scope="module")
def config():
    return tiny_config()


def test_simulation_cell_is_the_seeded_sweep_on_the_authors_grid(config):
    cell = analytic_models.simulation_cell(config, "ue4m3", 8)
    assert {k: cell[k] for k in ("element", "scale", "block_size", "rule", "samples", "seed")} == {
        "element": "e2m1", "scale": "ue4m3", "block_size": 8, "rule": "absmax", "samples": 4096, "seed": 0}
    assert [r["sigma"] for r in cell["rows"]] == paper_sigmas().tolist()
    expected = mse_sweep(paper_sigmas(), [8], {"absmax": {"elem": "e2m1", "scale": "ue4m3", "rule": "absmax"}},
                         samples=4096, seed=0)
    assert cell["rows"] == expected
    assert cell["wall_time_s"] > 0


# ---------------------------------------------------------------------------------------------- the comparison
# planted totals per (model, scale, n, sigma) and simulation (sigma, mse, standard error): every ratio is exact
TOTALS = {("exact", "ue4m3", 4, 0.5): 1.0, ("paper", "ue4m3", 4, 0.5): 1.25,
          ("exact", "ue4m3", 4, 1.0): 2.25, ("paper", "ue4m3", 4, 1.0): 1.5,
          ("exact", "ue4m3", 8, 0.5): 1.0, ("paper", "ue4m3", 8, 0.5): 0.5,
          ("exact", "ue4m3", 8, 1.0): 4.0, ("paper", "ue4m3", 8, 1.0): 5.0}
CELLS = [sim_cell("ue4m3", 4, [(0.5, 1.0, 0.00390625), (1.0, 2.0, 0.0078125)]),  # relative SE 2^-8: resolved
         sim_cell("ue4m3", 8, [(0.5, 1.0, 0.25), (1.0, 4.0, 0.0)])]  # 1/4: not resolved; 0: resolved, z 0


@pytest.fixture
def planted(monkeypatch):
    calls = []
    monkeypatch.setattr(analytic_models, "block_mse", fake_models(TOTALS, calls))
    monkeypatch.setattr(analytic_models, "crossover", lambda n, element, scale, rule, *, model: {
        "exact": 0.5, "paper": 0.25}[model] * n)
    return analytic_models.compare({"element": "e2m1"}, reversed(CELLS)), calls


def test_comparison_points_exact(planted):
    result, calls = planted
    assert calls == [(s, n, "ue4m3", m) for n in (4, 8) for s in (0.5, 1.0) for m in ("exact", "paper")]
    points = result["points"]
    assert [(p["block_size"], p["sigma"]) for p in points] == [(4, 0.5), (4, 1.0), (8, 0.5), (8, 1.0)]
    assert [p["exact_error"] for p in points] == [0.0, 0.125, 0.0, 0.0]
    assert [p["paper_error"] for p in points] == [0.25, -0.25, -0.5, 0.25]
    assert [p["paper_z"] for p in points] == [64.0, 64.0, 2.0, 0.0]
    assert [p["exact_z"] for p in points] == [0.0, 32.0, 0.0, 0.0]
    assert [p["relative_se"] for p in points] == [0.00390625, 0.00390625, 0.25, 0.0]
    assert [p["resolved"] for p in points] == [True, True, False, True]
    assert (result["element"], result["rule"], result["resolved_se"]) == ("e2m1", "absmax", 0.005)
    assert result["wall_time_s"] >= 2 * 0.5


def test_comparison_fits_exact(planted):
    fits = planted[0]["fits"]["ue4m3"]
    assert fits["paper"] == {"points": 4, "resolved_points": 3, "worst": 0.25, "worst_signed": 0.25, "sigma": 0.5,
                             "block_size": 4, "relative_se": 0.00390625, "mean": 0.25,
                             "chi2": (1 / 16 * 16 + 0.25 + 1 / 4 * 16 + 1) / 4}
    assert fits["exact"]["worst"] == 0.125
    assert (fits["exact"]["sigma"], fits["exact"]["block_size"], fits["exact"]["worst_signed"]) == (1.0, 4, 0.125)
    assert fits["exact"]["mean"] == 0.125 / 3
    assert fits["exact"]["chi2"] == 0.0625 / 4


def test_comparison_crossovers_per_doubling_pair(planted):
    assert planted[0]["crossovers"] == [{"scale": "ue4m3", "block_size": 4, "next_block_size": 8, "exact": 2.0,
                                         "paper": 1.0, "simulation": None}]


def test_fit_with_nothing_resolved():
    points = [{"resolved": False, "exact": 2.0, "simulation": 1.0, "sigma": 1.0, "exact_error": 1.0}]
    assert analytic_models.fit(points, "exact") == {"points": 1, "resolved_points": 0, "worst": None, "mean": None,
                                                    "chi2": 1.0}


@pytest.mark.parametrize(("small", "large", "expected"), [
    ([3.0, 2.0, 1.0, 1.0], [2.0, 2.5, 2.0, 2.0], 0.5 + 0.5 * 1 / 1.5),  # d = 1, -0.5, -1, -1: one change
    ([1.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], 1.0 + 0.5 * 1 / 2),  # d = -1, 1, -1, -1: the widest change
    ([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], None),  # n better everywhere
    ([2.0, 2.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], None),  # d = 0 is no step from n better to n worse
])
def test_simulated_crossover(small, large, expected):
    assert analytic_models.simulated_crossover([0.5, 1.0, 1.5, 2.0], small, large) == expected


def test_crossovers_need_the_same_grid_and_pair_doubling_blocks():
    cells = [sim_cell("ue4m3", 4, [(0.5, 1.0, 0.1)]), sim_cell("ue4m3", 8, [(1.0, 1.0, 0.1)]),
             sim_cell("ue4m3", 32, [(1.0, 1.0, 0.1)])]
    with pytest.raises(ValueError, match=r"simulation cells ue4m3 b4 and b8 have different sigma grids"):
        analytic_models.crossovers("e2m1", cells)
    assert analytic_models.crossovers("e2m1", cells[1:]) == []  # 8 and 32: no pair


def test_real_crossovers_of_16_and_32():
    cells = [analytic_models.simulate("e2m1", "ue4m3", n, "absmax", [0.0155, 0.0165], 4096, 0) for n in (16, 32)]
    (row,) = analytic_models.crossovers("e2m1", cells)
    assert row["paper"] == crossover(16, model="paper") == pytest.approx(0.015828, rel=1e-4)
    assert row["exact"] == crossover(16) == pytest.approx(0.016136, rel=1e-4)


# ------------------------------------------------------------------------------------------- command-line steps
def test_paper_simulation_and_comparison_steps(tmp_path):
    config = {"element": "e2m1", "paper_model": {"samples": 4096, "seed": 0}}
    cells = [str(tmp_path / f"b{n}.json") for n in (16, 32)]
    assert main(["paper-simulation", "--config-json", json.dumps(config), "--scale", "ue4m3", "--blocks", "16", "32",
                 "--out", *cells]) == 0
    assert json.loads((tmp_path / "b32.json").read_text())["block_size"] == 32
    cell = json.loads((tmp_path / "b16.json").read_text())
    assert (cell["block_size"], len(cell["rows"])) == (16, 51)
    assert main(["compare-models", "--config-json", json.dumps({"element": "e2m1"}), "--cells", *cells, "--out",
                 str(tmp_path / "comparison.json")]) == 0
    result = json.loads((tmp_path / "comparison.json").read_text())
    assert len(result["points"]) == 102
    assert set(result["fits"]["ue4m3"]) == {"exact", "paper"}
    assert [(c["block_size"], c["next_block_size"]) for c in result["crossovers"]] == [(16, 32)]
