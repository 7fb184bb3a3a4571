"""Model study: cell recipes per operand set and a sweep point's summary (windows kept, sigma, gaps); the
evaluation itself is covered in tests/eval."""

import pytest

from papers.finer_is_better.model_study import UNQUANTIZED, cell_recipe, gap_summary
from papers.finer_is_better.settings import quant_spec

CONFIG = {"element": "e2m1", "hierarchical_target": 448.0, "variants": {"absmax": {"rule": "absmax"}}}


def record(perplexity, wall_time_s, windows=(1.0, 2.0), tokens=(3, 4), **cell):
    return {**cell, "metrics": {"perplexity": {"perplexity": perplexity, "window_nll": list(windows),
                                               "window_tokens": list(tokens)}},
            "data": {"split": {"tokens": sum(tokens)}}, "wall_time_s": wall_time_s}


def cell(name, scale, variant, block_size, perplexity, operands="wa", **kw):
    return record(perplexity, 1.5, cell=name, element="e2m1", scale=scale, variant=variant, block_size=block_size,
                  operands=operands, **kw)


def test_cell_recipe_quantizes_activations_only_under_wa():
    spec = quant_spec(CONFIG, "e2m1-ue4m3-b4-absmax")
    assert cell_recipe(CONFIG, "e2m1-ue4m3-b4-absmax", "wa").activations == spec
    assert cell_recipe(CONFIG, "e2m1-ue4m3-b4-absmax", "w").activations is None
    assert cell_recipe(CONFIG, "e2m1-ue4m3-b4-absmax", "w").weights == spec
    with pytest.raises(ValueError, match="'a'"):
        cell_recipe(CONFIG, "e2m1-ue4m3-b4-absmax", "a")


def test_gap_summary_keeps_windows_sigma_and_gaps():
    base = {**record(10.5, 2.0, windows=(5.0, 6.0), cell=UNQUANTIZED), "sigma": 0.02}
    cells = [cell("e2m1-ue4m3-b4-absmax", "ue4m3", "absmax", 4, 11.25, windows=(5.5, 6.5)),
             cell("e2m1-ue4m3-b4-absmax", "ue4m3", "absmax", 4, 10.25, operands="w", windows=(4.5, 6.0))]
    out = gap_summary("small-c0.5", base, iter(cells))  # any iterable, consumed once
    assert out == {
        "model": "small-c0.5", "sigma": 0.02, "perplexity": 10.5, "tokens": 7, "wall_time_s": 5.0,
        "window_nll": [5.0, 6.0], "window_tokens": [3, 4],
        "rows": [
            {"cell": "e2m1-ue4m3-b4-absmax", "operands": "wa", "scale": "ue4m3", "variant": "absmax",
             "block_size": 4, "perplexity": 11.25, "gap": 0.75, "window_nll": [5.5, 6.5]},
            {"cell": "e2m1-ue4m3-b4-absmax", "operands": "w", "scale": "ue4m3", "variant": "absmax",
             "block_size": 4, "perplexity": 10.25, "gap": -0.25, "window_nll": [4.5, 6.0]},  # may score better
        ],
    }


def test_gap_summary_refuses_cells_on_other_windows():
    base = {**record(10.5, 2.0, cell=UNQUANTIZED), "sigma": 0.02}
    other = cell("e2m1-ue4m3-b4-absmax", "ue4m3", "absmax", 4, 11.0, tokens=(3, 5))
    with pytest.raises(ValueError, match=r"small: cell e2m1-ue4m3-b4-absmax \(wa\) scored other windows"):
        gap_summary("small", base, [other])


def test_activation_prescale_brings_a_sweep_point_s_inputs_back_to_the_model_s_own_scale(tmp_path, tiny_checkpoint):
    from common.models.rescale import rescale_checkpoint
    from papers.finer_is_better.model_study import activation_prescale

    names = ["model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj", "model.layers.1.mlp.down_proj",
             "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj"]
    assert activation_prescale(tiny_checkpoint.model, names) == dict.fromkeys(names, 1.0)  # no rescale record
    point = tmp_path / "c0.5"
    rescale_checkpoint(tiny_checkpoint.model, 0.5, ["mlp_input", "attn_input"], point)
    assert activation_prescale(point, names) == {names[0]: 0.5, names[1]: 0.5, names[2]: 1.0, names[3]: 0.5,
                                                 names[4]: 1.0}  # inputs x / c: quantize c x, divide by c
    inner = tmp_path / "inner"
    rescale_checkpoint(tiny_checkpoint.model, 0.5, ["mlp_input", "mlp_inner"], inner)
    assert activation_prescale(inner, names[:3]) == {names[0]: 0.5, names[1]: 0.5, names[2]: 2.0}  # down: c u


def test_model_cells_load_once_and_match_the_per_cell_evaluation(tiny_checkpoint):
    from common.eval.fake_quant import fake_quant_perplexity
    from papers.finer_is_better.model_study import model_cells

    config = {**CONFIG, "variants": {"absmax": {"rule": "absmax"}, "four_over_six": {"rule": "four_over_six"}},
              "model": {"window": 32, "stride": 32, "max_tokens": 256, "batch_size": 4,
                        "include": r"mlp\.(gate_proj|up_proj|down_proj)$"}}
    names = ["e2m1-ue4m3-b4-absmax", "e2m1-ue4m3-b16-four_over_six"]
    for operands in ("w", "wa"):
        records = model_cells(config, names, operands, tiny_checkpoint.model, tiny_checkpoint.valid)
        for name, rec in zip(names, records, strict=True):
            recipe = cell_recipe(config, name, operands)
            ref = fake_quant_perplexity(tiny_checkpoint.model, tiny_checkpoint.valid, recipe,
                                        include=config["model"]["include"], window=32, stride=32, max_tokens=256,
                                        batch_size=4)
            assert rec["metrics"]["perplexity"]["window_nll"] == ref["metrics"]["perplexity"]["window_nll"]
            assert rec["quantization"]["layers"] == ref["quantization"]["layers"]
            assert ("activation_prescale" in rec["quantization"]) == (operands == "wa")
