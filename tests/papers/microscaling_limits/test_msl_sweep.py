"""The sweep: the moved linears from the transforms, the plan of cells per profile, the pre-registration from
the configuration alone, the points' sigma, sweep steps, paired windows and the summary."""

import json
import math

import numpy as np
import pytest
from msl_testing import EVIDENCE, ppl_record, raw_config, sweep_models, sweep_tensor_cell, zero_shot_record

from common.theory import crossover
from papers.microscaling_limits import curves
from papers.microscaling_limits.__main__ import main
from papers.microscaling_limits.settings import profile_config
from papers.microscaling_limits.sweep import (
    grid_position,
    moved_include,
    preregister,
    ratio_estimate,
    sweep_plan,
    sweep_points,
    sweep_summary,
    windows,
)

WORKFLOW = {"base_model": "small", "sweep": {"transforms": ["mlp_input", "attn_input"],
                                             "factors": [1.0, 0.3, 0.1, 0.03, 0.01]}}
MOVED = r"(mlp\.gate_proj|mlp\.up_proj|self_attn\.k_proj|self_attn\.q_proj|self_attn\.v_proj)$"


def test_moved_include_is_the_five_projections_the_transforms_scale():
    assert moved_include(["mlp_input", "attn_input"]) == MOVED
    with pytest.raises(ValueError, match=r"scale \{'self_attn\.o_proj': -1\}"):  # o_proj would move by 1/c
        moved_include(["attn_value"])
    with pytest.raises(ValueError, match=r"scale \{'mlp\.up_proj': 2, 'mlp\.down_proj': -1\} \(path: power of c\)"):
        moved_include(["mlp_input", "mlp_inner"])
    with pytest.raises(ValueError, match=r"unknown transform 'norm_input'"):
        moved_include(["norm_input"])


def plan(profile="default", workflow=WORKFLOW, **sweep):
    paper = profile_config(raw_config(), profile)
    paper["sweep"].update(sweep)
    return sweep_plan(paper, workflow)


def test_default_plan_every_factor_widest_first():
    out = plan()
    assert out["include"] == MOVED
    assert (out["block_size"], out["pair"], out["tensor_blocks"], out["scales"]) == (16, [16, 32], [16, 32],
                                                                                       ["ue4m3", "ue5m3"])
    assert [p["model"] for p in out["points"]] == ["small-c1", "small-c0.3", "small-c0.1", "small-c0.03",
                                                   "small-c0.01"]
    cells = out["cells"]["small-c0.1"]
    assert cells == ["unquantized", *(f"e2m1-{v}-b{b}-weights" for v in ("ue4m3", "ue4m3s", "ue5m3")
                                      for b in (16, 32)), "e2m1-ue4m3-b16", "e2m1-ue4m3s-b16", "e2m1-ue5m3-b16"]
    assert sum(map(len, out["cells"].values())) == 5 * 10
    assert out["zero_shot"] == {m: ["e2m1-ue4m3s-b16-weights", "e2m1-ue5m3-b16-weights"]
                                for m in ("small-c0.03", "small-c0.01")}
    assert out["model"] == {"include": MOVED, "window": 256, "stride": 256, "batch_size": 8, "max_tokens": 16384}


def test_figure_blocks_add_weights_only_cells():
    cells = plan(figure_blocks=[8])["cells"]["small-c1"]
    assert [c for c in cells if "-b8" in c] == [f"e2m1-{v}-b8-weights" for v in ("ue4m3", "ue4m3s", "ue5m3")]


def test_smoke_plan_fewer_points_and_tokens():
    out = plan("smoke", {**WORKFLOW, "base_model": "smoke"}, points=3)
    assert [p["factor"] for p in out["points"]] == [1.0, 0.1, 0.01]  # the widest, the middle, the narrowest
    assert sum(map(len, out["cells"].values())) == 3 * 10
    assert list(out["zero_shot"]) == ["smoke-c0.01"]
    assert (out["model"]["max_tokens"], out["model"]["window"]) == (8192, 128)


@pytest.mark.parametrize(("edit", "message"), [
    ({"points": 6}, r"microscaling_limits\.sweep\.points 6 is not between 2 and the 5 factors"),
    ({"zero_shot_points": 6}, r"sweep\.zero_shot_points 6 is not between 1 and the 5 sweep points"),
])
def test_plan_names_a_bad_count(edit, message):
    with pytest.raises(ValueError, match=message):
        plan(**edit)


def test_plan_needs_two_factors():
    with pytest.raises(ValueError, match=r"sweep\.factors \[1\.0, 1\.0\] need at least 2 distinct factors"):
        plan(workflow={**WORKFLOW, "sweep": {**WORKFLOW["sweep"], "factors": [1.0, 1.0]}})


def test_preregistration_from_the_configuration_alone():
    out = preregister({"element": "e2m1", "sweep": {"block_size": 16}})
    assert out["pair"] == [16, 32]
    assert out["crossover"] == {"ue4m3": crossover(16, "e2m1", "ue4m3"), "ue5m3": crossover(16, "e2m1", "ue5m3")}
    assert out["crossover"]["ue4m3"] == pytest.approx(0.0161, rel=0.01)
    assert out["crossover"]["ue5m3"] == pytest.approx(6.3e-5, rel=0.01)
    drivers = out["drivers"]["ue4m3"]
    assert drivers["sigma"] == out["crossover"]["ue4m3"] / 1.2
    assert drivers["non_max"] + drivers["max_element"] + drivers["zero_blocks"] == pytest.approx(1.0)
    assert out["inputs"] == "the configuration only (no model, no data)"


def test_preregistration_under_the_papers_model():
    out = preregister({"element": "e2m1", "sweep": {"block_size": 16}})
    assert out["crossover_paper"] == {"ue4m3": crossover(16, "e2m1", "ue4m3", model="paper"),
                                      "ue5m3": crossover(16, "e2m1", "ue5m3", model="paper")}
    assert out["crossover_paper"]["ue4m3"] == pytest.approx(0.015828, rel=1e-4)  # ours: 0.016136
    drivers = out["drivers_paper"]["ue4m3"]
    assert drivers == curves.drivers("e2m1", "ue4m3", "absmax", 16, out["crossover_paper"]["ue4m3"], "paper")
    assert drivers["sigma"] == out["crossover_paper"]["ue4m3"] / 1.2
    assert drivers != curves.drivers("e2m1", "ue4m3", "absmax", 16, out["crossover_paper"]["ue4m3"])  # non-max


def test_sweep_points_median_sigma_widest_first():
    cells = [sweep_tensor_cell("m-c0.5", None, [("a", "ue4m3", 0.01, False, False), ("b", "ue4m3", 0.03, False, False),
                                               ("c", "ue4m3", 0.02, False, False), ("a", "ue5m3", 0.01, False, False)]),
             sweep_tensor_cell("m-c1", 0.04)]
    points = sweep_points(sweep_models([0.5, 1.0]), cells)
    assert [(p["model"], p["sigma"], p["sigma_low"], p["sigma_high"], p["tensors"]) for p in points] == [
        ("m-c1", 0.04, 0.04, 0.04, 1), ("m-c0.5", 0.02, 0.01, 0.03, 3)]
    with pytest.raises(ValueError, match=r"sweep point 'm-c0\.25' has no tensor study"):
        sweep_points(sweep_models([0.25]), cells)
    with pytest.raises(ValueError, match=r"sweep points share a sigma"):
        sweep_points(sweep_models([1.0, 0.5]), [sweep_tensor_cell("m-c1", 0.04), sweep_tensor_cell("m-c0.5", 0.04)])


@pytest.mark.parametrize(("sigma", "position"), [
    (0.04, 0.0), (0.02, 1.0), (0.01, 2.0), (0.016, 1 + math.log2(0.02 / 0.016)),
    (0.08, -1.0),  # beyond the widest: the first step continues
    (0.0025, 2.0 + math.log(0.01 / 0.0025) / math.log(0.01 / 0.005)),  # beyond the narrowest: the last step
])
def test_grid_position(sigma, position):
    assert grid_position([0.04, 0.02, 0.01, 0.005], sigma) == pytest.approx(position)


@pytest.mark.parametrize("grid", [[0.04], [0.02, 0.04], [0.04, 0.04], [0.04, -0.01]])
def test_grid_position_refuses_a_bad_grid(grid):
    with pytest.raises(ValueError, match=r"grid_position needs >= 2 strictly decreasing positive sigmas"):
        grid_position(grid, 0.01)


def test_windows_pair_the_cells_and_refuse_other_windows():
    a, b = ppl_record("m", "unquantized"), ppl_record("m", "e2m1-ue4m3-b16-weights", 0.05, 0.01)
    data = windows([a, b])
    estimate = ratio_estimate(data, ("m", "e2m1-ue4m3-b16-weights"), ("m", "unquantized"), EVIDENCE)
    assert estimate.value == pytest.approx(math.expm1(0.05))
    assert estimate.method == "paired bootstrap over 64 windows (1000 resamples, seed 0, percentile)"
    other = ppl_record("m", "e2m1-ue5m3-b16-weights")
    other["metrics"]["perplexity"]["window_tokens"][0] = 15
    with pytest.raises(ValueError, match=r"cell 'e2m1-ue5m3-b16-weights' of 'm' scores other windows"):
        windows([a, other])
    with pytest.raises(ValueError, match=r"perplexity cell 'unquantized' of 'm' given twice"):
        windows([a, a])
    with pytest.raises(KeyError, match=r"no perplexity cell 'e2m1-ue5m3-b16' of sweep point 'm'"):
        data.columns([("m", "e2m1-ue5m3-b16")])
    assert data.sources([("m", "unquantized")]) == []  # no paths given
    cited = windows([a, b], ["a.json", "b.json"])
    assert cited.sources([("m", "e2m1-ue4m3-b16-weights"), ("m", "unquantized"), ("m", "unquantized")]) == [
        "b.json", "a.json"]
    with pytest.raises(ValueError, match=r"1 paths for 2 perplexity cells"):
        windows([a, b], ["a.json"])


def test_summary_rows_ratios_and_zero_shot():
    points = sweep_models([1.0, 0.5])
    cells = [sweep_tensor_cell("m-c1", 0.04), sweep_tensor_cell("m-c0.5", 0.02)]
    records = [ppl_record(m["model"], c, lr) for m in points
               for c, lr in (("unquantized", 0.0), ("e2m1-ue4m3-b16-weights", 0.25), ("e2m1-ue4m3-b32-weights", 0.125),
                             ("e2m1-ue5m3-b16", 0.5))]
    zero = [zero_shot_record("m-c0.5", "e2m1-ue5m3-b16-weights", [1, 0, 1, 1], [0, 1, 0, 0])]
    prereg = {"pair": [16, 32], "crossover": {"ue4m3": 0.03, "ue5m3": None}}
    out = sweep_summary("e2m1", points, prereg, cells, records, zero, EVIDENCE)
    assert [p["model"] for p in out["points"]] == ["m-c1", "m-c0.5"]
    assert out["position"] == {"ue4m3": pytest.approx(math.log2(0.04 / 0.03)), "ue5m3": None}
    assert out["unquantized"]["m-c1"] == pytest.approx(math.exp(3.0))
    gaps = {(c["model"], c["cell"]): c["gap"] for c in out["cells"]}
    assert gaps[("m-c0.5", "e2m1-ue5m3-b16")] == pytest.approx(math.expm1(0.5))
    assert len(gaps) == 6
    assert [(r["model"], r["variant"]) for r in out["ratios"]] == [("m-c1", "ue4m3"), ("m-c0.5", "ue4m3")]
    assert out["ratios"][0]["value"] == pytest.approx(math.expm1(0.125))
    assert out["zero_shot"] == [{"model": "m-c0.5", "cell": "e2m1-ue5m3-b16-weights", "variant": "ue5m3",
                                 "block_size": 16, "examples": 4, "cloze": 0.75, "choice": 0.25}]
    assert out["wall_time_s"] == pytest.approx(8 * 0.5 + 0.25 + 2 * 1.5)
    assert np.isfinite(out["ratios"][1]["low"])


def summary_argv(tmp_path, evidence):
    """``python -m papers.microscaling_limits sweep-summary`` on two planted points written under ``tmp_path``."""
    points = sweep_models([1.0, 0.5])
    files = {"preregistered": {"pair": [16, 32], "crossover": {"ue4m3": 0.03, "ue5m3": None}},
             "zero_shot": zero_shot_record("m-c0.5", "e2m1-ue5m3-b16-weights", [1, 0], [0, 1])}
    files |= {f"tensors-{p['model']}": sweep_tensor_cell(p["model"], 0.04 * p["factor"]) for p in points}
    files |= {f"{p['model']}-{cell}": ppl_record(p["model"], cell, lr, 0.01) for p in points for cell, lr in (
        ("unquantized", 0.0), ("e2m1-ue4m3-b16-weights", 0.25), ("e2m1-ue4m3-b32-weights", 0.125))}
    for name, content in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(content))

    def paths(prefix):
        return [str(tmp_path / f"{name}.json") for name in files if name.startswith(prefix)]

    config = {"element": "e2m1", "points": points}
    return ["sweep-summary", "--config-json", json.dumps(config), "--evidence-json", json.dumps(evidence),
            "--preregistered", *paths("preregistered"), "--tensors", *paths("tensors-"), "--cells", *paths("m-c"),
            "--zero-shot", *paths("zero_shot"), "--out", str(tmp_path / "summary.json")]


def test_summary_step_reads_the_evidence_settings(tmp_path):
    assert main(summary_argv(tmp_path, {"level": 0.9, "resamples": 1000, "seed": 3})) == 0
    ratios = json.loads((tmp_path / "summary.json").read_text())["ratios"]
    assert [r["model"] for r in ratios] == ["m-c1", "m-c0.5"]
    assert {r["level"] for r in ratios} == {0.9}
    assert {r["method"] for r in ratios} == {"paired bootstrap over 64 windows (1000 resamples, seed 3, percentile)"}


def test_summary_step_names_bad_evidence_settings(tmp_path, capsys):
    assert main(summary_argv(tmp_path, {"level": 0.95, "resamples": 100, "seed": 0})) == 2
    assert "evidence resamples must be an integer >= 1000, got 100" in capsys.readouterr().err
    assert not (tmp_path / "summary.json").exists()
