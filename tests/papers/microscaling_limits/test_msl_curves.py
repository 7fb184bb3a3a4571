"""Theory and simulation cells, their validation (exact arithmetic on hand-made cells), crossovers, drivers and
the zero-block check."""

import math

import pytest
from msl_testing import PARTS, fake_block_mse, sim_cell, tiny_config

from common.analysis import block_stats, mse_sweep, sigma_grid
from common.theory import block_mse, crossover, zero_block_probability
from papers.microscaling_limits import curves


@pytest.fixture(scope="module")
def config():
    return tiny_config()


# ------------------------------------------------------------------------------------------------- theory cell
def test_theory_cell_rows_for_every_distribution_block_and_sigma(config):
    cell = curves.theory_cell(config, "ue4m3", "absmax")
    assert (cell["element"], cell["scale"], cell["rule"]) == ("e2m1", "ue4m3", "absmax")
    sigmas = [float(s) for s in sigma_grid(1e-3, 1e-1, 3)]
    assert [(r["dist"], r["block_size"], r["sigma"]) for r in cell["rows"]] == [
        (d, n, s) for d in ("normal", "laplace") for n in (4, 8) for s in sigmas]
    for row in cell["rows"]:
        assert row["total"] == row["non_max"] + row["max_element"] + row["zero_blocks"]
        expected = block_mse(row["sigma"], row["block_size"], "e2m1", "ue4m3", "absmax", dist=row["dist"])
        assert {k: row[k] for k in (*PARTS, "total")} == expected
    assert cell["wall_time_s"] > 0


def test_theory_cell_zero_blocks_only_with_absmax(config):
    absmax = curves.theory_cell(config, "ue4m3", "absmax")
    prevent = curves.theory_cell(config, "ue4m3", "prevent_zero")
    # sigma 1e-3, n = 4: almost every block flushes under abs-max (P(s = 0) = erf(3 * 2^-9 / (1e-3 sqrt 2))^4)
    first = absmax["rows"][0]
    assert (first["dist"], first["block_size"], first["sigma"]) == ("normal", 4, pytest.approx(1e-3, rel=1e-12))
    assert first["zero_blocks"] > 0.5 * first["total"]
    assert all(r["zero_blocks"] == 0.0 for r in prevent["rows"])
    assert all(r["total"] > 0 for r in prevent["rows"])


@pytest.mark.parametrize(("rule", "message"), [
    ("four_over_six", r"unknown rule 'four_over_six'; the theory covers absmax, prevent_zero"),
    ("brute_force", r"unknown rule 'brute_force'; the theory covers absmax, prevent_zero"),
])
def test_unknown_rule_is_named(config, rule, message):
    with pytest.raises(ValueError, match=message):
        curves.theory_cell(config, "ue4m3", rule)
    with pytest.raises(ValueError, match=message):
        curves.simulation_cell(config, "ue4m3", 4, rule)


# --------------------------------------------------------------------------------------------- simulation cell
def test_simulation_cell_is_the_seeded_sweep(config):
    cell = curves.simulation_cell(config, "ue4m3", 8, "absmax")
    assert {k: cell[k] for k in ("element", "scale", "block_size", "rule", "samples", "seed")} == {
        "element": "e2m1", "scale": "ue4m3", "block_size": 8, "rule": "absmax", "samples": 4096, "seed": 0}
    expected = mse_sweep(sigma_grid(1e-3, 1e-1, 3), [8], {"absmax": {"elem": "e2m1", "scale": "ue4m3",
                                                                    "rule": "absmax"}}, samples=4096, seed=0)
    assert cell["rows"] == expected
    assert len(cell["rows"]) == 3
    for row in cell["rows"]:
        assert row["mse_standard_error"] > 0
        assert row["mse_standard_error"] < row["mse"]
    one = block_stats(cell["rows"][1]["sigma"], 8, elem="e2m1", scale="ue4m3", samples=4096, seed=0)
    assert {k: cell["rows"][1][k] for k in one} == one


def test_simulation_prevent_zero_flushes_no_block(config):
    absmax = curves.simulation_cell(config, "ue4m3", 4, "absmax")
    prevent = curves.simulation_cell(config, "ue4m3", 4, "prevent_zero")
    assert absmax["rows"][0]["zero_scale_fraction"] > 0.5  # sigma 1e-3: most blocks of 4 flush
    assert [r["zero_scale_fraction"] for r in prevent["rows"]] == [0.0, 0.0, 0.0]
    assert prevent["rows"][0]["mse"] < absmax["rows"][0]["mse"]


# -------------------------------------------------------------------------------------------------- validation
# theory (fake, exact) and simulation per point: relative error, z, relative SE, chi2 term (sigma^4 = 1/16 or 1)
TOTALS = {("ue4m3", 4, 0.5): 1.25, ("ue4m3", 4, 1.0): 2.0625, ("ue4m3", 8, 0.5): 1.0, ("ue4m3", 8, 1.0): 3.5,
          ("ue5m3", 4, 0.5): 1.0, ("ue5m3", 8, 0.5): 0.5}
CELLS = [
    sim_cell("ue4m3", 4, [(0.5, 1.0, 0.0625, 0.25),  # rel 0.25, z 4, rse 1/16 (unresolved), chi2 term 1
                          (1.0, 2.0, 0.0078125)]),  # rel 1/32, z 8, rse 2^-8 (resolved), chi2 term 1/256
    sim_cell("ue4m3", 8, [(0.5, 1.0, 0.005),  # rel 0, z 0, rse exactly RESOLVED_SE (resolved), chi2 term 0
                          (1.0, 4.0, 0.0)]),  # rel 1/8, no standard error: z 0 (resolved), chi2 term 1/4
    sim_cell("ue5m3", 4, [(0.5, 1.0, 0.0050000001)]),  # rel 0, just above RESOLVED_SE: unresolved
    sim_cell("ue5m3", 8, [(0.5, 0.25, 0.125)]),  # rel 1, z 2, rse 1/2, chi2 term 1
]


@pytest.fixture
def exact(monkeypatch):
    """validation() on CELLS with the fake theory, no crossover and no zero-block check."""
    calls = []
    monkeypatch.setattr(curves, "block_mse", fake_block_mse(TOTALS, calls))
    monkeypatch.setattr(curves, "crossover", lambda *args, **kwargs: None)
    monkeypatch.setattr(curves, "zero_block_check", lambda config, scales: [{"scales": list(scales)}])
    return curves.validation({"element": "e2m1"}, CELLS), calls


def test_validation_points_exact(exact):
    result, calls = exact
    assert calls == [(0.5, 4, "e2m1", "ue4m3", "absmax"), (1.0, 4, "e2m1", "ue4m3", "absmax"),
                     (0.5, 8, "e2m1", "ue4m3", "absmax"), (1.0, 8, "e2m1", "ue4m3", "absmax"),
                     (0.5, 4, "e2m1", "ue5m3", "absmax"), (0.5, 8, "e2m1", "ue5m3", "absmax")]
    points = result["points"]
    assert [(p["scale"], p["block_size"], p["sigma"]) for p in points] == [
        ("ue4m3", 4, 0.5), ("ue4m3", 4, 1.0), ("ue4m3", 8, 0.5), ("ue4m3", 8, 1.0), ("ue5m3", 4, 0.5),
        ("ue5m3", 8, 0.5)]
    assert [p["theory"] for p in points] == [1.25, 2.0625, 1.0, 3.5, 1.0, 0.5]
    assert [p["simulation"] for p in points] == [1.0, 2.0, 1.0, 4.0, 1.0, 0.25]
    assert [p["zero_blocks"] for p in points] == [0.3125, 0.515625, 0.25, 0.875, 0.25, 0.125]
    assert [p["relative_error"] for p in points] == [0.25, 0.03125, 0.0, 0.125, 0.0, 1.0]
    assert [p["z"] for p in points] == [4.0, 8.0, 0.0, 0.0, 0.0, 2.0]
    assert [p["simulation_relative_se"] for p in points] == [0.0625, 0.00390625, 0.005, 0.0, 0.0050000001, 0.5]
    assert [p["simulated_zero_scale_fraction"] for p in points] == [0.25, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert {p["rule"] for p in points} == {"absmax"}


def test_validation_fits_exact(exact):
    result, _ = exact
    assert result["fits"] == {
        "ue4m3": {"max_relative_error": 0.25, "max_relative_error_resolved": 0.125, "resolved_points": 3,
                  "max_z": 8.0, "chi2": (1 + 1 / 256 + 0 + 1 / 4) / 4, "points": 4},
        "ue5m3": {"max_relative_error": 1.0, "max_relative_error_resolved": None, "resolved_points": 0,
                  "max_z": 2.0, "chi2": 0.5, "points": 2},
    }
    assert result["fits"]["ue4m3"]["chi2"] == 0.3134765625


def test_validation_collects_crossovers_zero_blocks_and_time(exact):
    result, _ = exact
    assert result["zero_block"] == [{"scales": ["ue4m3", "ue5m3"]}]
    assert [(c["scale"], c["block_size"], c["sigma"], c["simulation_agrees"], c["drivers"])
            for c in result["crossovers"]] == [("ue4m3", 4, None, None, None), ("ue5m3", 4, None, None, None)]
    assert result["wall_time_s"] >= 4 * 0.5


def test_validation_with_the_real_theory(monkeypatch):
    """Wiring: the theory is block_mse at the cell's block size, scale and rule (prevent_zero reaches it)."""
    monkeypatch.setattr(curves, "crossover", lambda *args, **kwargs: None)
    monkeypatch.setattr(curves, "zero_block_check", lambda config, scales: [])
    theory = {(s, n, r): block_mse(0.01, n, "e2m1", s, r)
              for s in ("ue4m3", "ue5m3") for n in (4, 8) for r in ("absmax", "prevent_zero")}
    cells = [sim_cell(s, n, [(0.01, theory[(s, n, r)]["total"] * 1.25, 1e-9)], rule=r) for (s, n, r) in theory]
    result = curves.validation({"element": "e2m1"}, cells)
    for point, (key, expected) in zip(result["points"], theory.items(), strict=True):
        assert (point["scale"], point["block_size"], point["rule"]) == key
        assert point["theory"] == expected["total"]
        assert point["zero_blocks"] == expected["zero_blocks"]
        assert point["relative_error"] == pytest.approx(0.2, rel=1e-12)
    # the rule reaches the theory: at sigma 0.01 UE4M3 flushes some blocks of 4 (P ~ 0.04), prevent_zero none
    by_key = {(p["scale"], p["block_size"], p["rule"]): p for p in result["points"]}
    assert by_key[("ue4m3", 4, "absmax")]["zero_blocks"] > 0
    assert by_key[("ue4m3", 4, "prevent_zero")]["zero_blocks"] == 0.0
    assert by_key[("ue4m3", 4, "absmax")]["theory"] != by_key[("ue5m3", 4, "absmax")]["theory"]
    assert by_key[("ue4m3", 4, "absmax")]["theory"] != by_key[("ue4m3", 8, "absmax")]["theory"]


# -------------------------------------------------------------------------------------------------- crossovers
GRID = [0.125, 0.25, 0.5, 1.0]


def pair(small, large, scale="ue4m3", n=4, rule="absmax"):
    return [sim_cell(scale, n, [(s, m, 0.0) for s, m in zip(GRID, small, strict=True)], rule=rule),
            sim_cell(scale, 2 * n, [(s, m, 0.0) for s, m in zip(GRID, large, strict=True)], rule=rule)]


@pytest.fixture
def at(monkeypatch):
    """Make the theory's crossover ``sigma`` (recording its calls); drivers stay real."""
    calls = []

    def choose(sigma):
        def fake(n, elem, scale, rule):
            calls.append((n, elem, scale, rule))
            return sigma
        monkeypatch.setattr(curves, "crossover", fake)
        return calls
    return choose


@pytest.mark.parametrize(("sigma", "small", "large", "agrees"), [
    (0.375, [4.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], True),  # below (0.25): 3 > 2; above (0.5): 1 <= 2
    (0.375, [4.0, 3.0, 2.0, 1.0], [2.0, 2.0, 2.0, 2.0], True),  # a tie one step above still agrees
    (0.375, [4.0, 2.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], False),  # no sign change below: a tie is not worse
    (0.375, [4.0, 3.0, 3.0, 1.0], [2.0, 2.0, 2.0, 2.0], False),  # still worse one step above
    (0.375, [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], False),  # never worse
    (0.25, [4.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], True),  # on a grid point: its neighbours 0.125 and 0.5
    (0.25, [1.0, 3.0, 3.0, 1.0], [2.0, 2.0, 2.0, 2.0], False),
    (0.125, [4.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], None),  # the grid's ends are outside
    (1.0, [4.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], None),
    (2.0, [4.0, 3.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], None),
])
def test_crossover_simulation_agreement(at, sigma, small, large, agrees):
    calls = at(sigma)
    [row] = curves.crossovers({"element": "e2m1"}, pair(small, large))
    assert calls == [(4, "e2m1", "ue4m3", "absmax")]
    assert (row["scale"], row["rule"], row["block_size"], row["next_block_size"]) == ("ue4m3", "absmax", 4, 8)
    assert row["sigma"] == sigma
    assert row["simulation_agrees"] is agrees
    assert row["drivers"] == curves.drivers("e2m1", "ue4m3", "absmax", 4, sigma)


def test_no_crossover_has_no_check_and_no_drivers(at):
    at(None)
    [row] = curves.crossovers({"element": "e2m1"}, pair([4.0, 3.0, 1.0, 1.0], [2.0] * 4))
    assert (row["sigma"], row["simulation_agrees"], row["drivers"]) == (None, None, None)


def test_crossovers_pair_only_doubling_block_sizes_per_scale_and_rule(at):
    calls = at(0.375)
    cells = [*pair([4.0, 3.0, 1.0, 1.0], [2.0] * 4, n=4),
             sim_cell("ue4m3", 32, [(s, 1.0, 0.0) for s in GRID]),  # 8 -> 32 is not a doubling: skipped
             *pair([1.0] * 4, [2.0] * 4, n=4, rule="prevent_zero"),
             *pair([1.0] * 4, [2.0] * 4, scale="ue5m3")]
    rows = curves.crossovers({"element": "e2m1"}, cells)
    assert calls == [(4, "e2m1", "ue4m3", "absmax"), (4, "e2m1", "ue4m3", "prevent_zero"),
                     (4, "e2m1", "ue5m3", "absmax")]
    assert [(r["scale"], r["rule"], r["block_size"], r["simulation_agrees"]) for r in rows] == [
        ("ue4m3", "absmax", 4, True), ("ue4m3", "prevent_zero", 4, False), ("ue5m3", "absmax", 4, False)]


def test_missing_simulation_cell_is_named(at):
    at(None)
    cells = [*pair([1.0] * 4, [2.0] * 4), pair([1.0] * 4, [2.0] * 4, scale="ue5m3")[0]]
    with pytest.raises(KeyError, match=r"no simulation cell for scale 'ue5m3', rule 'absmax', block size 8"):
        curves.crossovers({"element": "e2m1"}, cells)


def test_real_crossover_is_checked_on_a_bracketing_grid():
    """The theory's UE4M3 crossover of 4 vs 8 (sigma ~ 0.024) against hand-made simulated MSEs taken from the
    theory one grid step either side: the check is the sign change of the theory itself."""
    sigma = crossover(4, "e2m1", "ue4m3", "absmax")
    assert 0.02 < sigma < 0.03
    grid = [sigma / 2, sigma / 1.2, sigma * 1.2, sigma * 2]
    small = [block_mse(s, 4)["total"] for s in grid]
    large = [block_mse(s, 8)["total"] for s in grid]
    assert small[1] > large[1]
    assert small[2] < large[2]
    cells = [sim_cell("ue4m3", 4, [(s, m, 0.0) for s, m in zip(grid, small, strict=True)]),
             sim_cell("ue4m3", 8, [(s, m, 0.0) for s, m in zip(grid, large, strict=True)])]
    [row] = curves.crossovers({"element": "e2m1"}, cells)
    assert row["sigma"] == sigma
    assert row["simulation_agrees"] is True


# ----------------------------------------------------------------------------------------------------- drivers
@pytest.mark.parametrize(("scale", "n"), [("ue4m3", 4), ("ue4m3", 16), ("ue5m3", 8)])
def test_drivers_shares_of_the_difference(scale, n):
    sigma_crossover = crossover(n, "e2m1", scale, "absmax")
    out = curves.drivers("e2m1", scale, "absmax", n, sigma_crossover)
    assert out["sigma"] == sigma_crossover / 1.2
    assert sum(out[p] for p in PARTS) == pytest.approx(1.0, abs=1e-12)
    small, large = block_mse(out["sigma"], n, "e2m1", scale), block_mse(out["sigma"], 2 * n, "e2m1", scale)
    difference = small["total"] - large["total"]
    assert difference > 0  # just inside the reversal, block n is worse
    for part in PARTS:
        assert out[part] == (small[part] - large[part]) / difference


def test_first_reversal_is_driven_by_the_max_element_not_zero_blocks():
    """What the theory says about the fact sheet's driver at the first (largest-sigma) crossover."""
    out = curves.drivers("e2m1", "ue4m3", "absmax", 4, crossover(4, "e2m1", "ue4m3", "absmax"))
    assert out["max_element"] > 1
    assert out["non_max"] < 0
    assert 0 < out["zero_blocks"] < 0.5


def test_drivers_with_fake_parts(monkeypatch):
    totals = {("ue4m3", 4, 0.5): 3.0, ("ue4m3", 8, 0.5): 1.0}
    monkeypatch.setattr(curves, "block_mse", fake_block_mse(totals))
    out = curves.drivers("e2m1", "ue4m3", "absmax", 4, 0.6)
    assert out == {"sigma": 0.5, "non_max": 0.5, "max_element": 0.25, "zero_blocks": 0.25}


# ------------------------------------------------------------------------------------------ zero-block check
def test_zero_block_check(config):
    rows = curves.zero_block_check(config, ["ue4m3", "ue5m3"], samples=1 << 16)
    assert [(r["scale"], r["block_size"], r["sigma"]) for r in rows] == [
        (s, n, 0.005) for s in ("ue4m3", "ue5m3") for n in (4, 8, 16, 32)]
    assert [r["reconstruction"] for r in rows] == [0.33, 0.11, 0.012, 1.5e-4, None, None, None, None]
    for r in rows:
        assert r["theory"] == zero_block_probability(0.005, r["block_size"], scale=r["scale"], elem="e2m1")
        assert r["simulation"] == block_stats(0.005, r["block_size"], elem="e2m1", scale=r["scale"],
                                              samples=1 << 16, seed=0)["zero_scale_fraction"]
    ue4 = rows[:4]
    assert [f"{r['theory']:.2g}" for r in ue4] == ["0.33", "0.11", "0.012", "0.00015"]
    # erf(t / (sigma sqrt 2))^n with t = 3 * 2^-9
    assert ue4[0]["theory"] == pytest.approx(math.erf(3 * 2**-9 / (0.005 * math.sqrt(2))) ** 4, rel=1e-12)
    for r in ue4[:2]:  # 2^16 values: within 4 binomial standard errors
        blocks = (1 << 16) / r["block_size"]
        assert abs(r["simulation"] - r["theory"]) <= 4 * math.sqrt(r["theory"] * (1 - r["theory"]) / blocks)
    assert all(r["theory"] < 1e-9 for r in rows[4:])  # UE5M3's smallest scale is 2^8 lower: nothing flushes
    assert [r["simulation"] for r in rows[4:]] == [0.0] * 4


def test_validation_sorts_scales_whatever_the_cell_order(monkeypatch):
    seen = []
    monkeypatch.setattr(curves, "block_mse", fake_block_mse(TOTALS))
    monkeypatch.setattr(curves, "crossover", lambda *args, **kwargs: None)
    monkeypatch.setattr(curves, "zero_block_check", lambda config, scales: seen.append(scales) or [])
    result = curves.validation({"element": "e2m1"}, reversed(CELLS))  # any iterable
    assert seen == [["ue4m3", "ue5m3"]]
    assert list(result["fits"]) == ["ue4m3", "ue5m3"]
    assert [p["scale"] for p in result["points"]] == ["ue5m3", "ue5m3", "ue4m3", "ue4m3", "ue4m3", "ue4m3"]
    assert result["fits"]["ue4m3"]["chi2"] == 0.3134765625
