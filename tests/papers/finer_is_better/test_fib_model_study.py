"""Model study: the perplexity-gap summary of a model's cells (the evaluation itself is covered in tests/eval)."""

from papers.finer_is_better.model_study import UNQUANTIZED, gap_summary


def record(perplexity, wall_time_s, tokens=8192, **cell):
    return {**cell, "metrics": {"perplexity": {"perplexity": perplexity, "nll": 2.0}},
            "data": {"split": {"tokens": tokens}}, "wall_time_s": wall_time_s}


def cell(name, scale, variant, block_size, perplexity):
    return record(perplexity, 1.5, cell=name, element="e2m1", scale=scale, variant=variant, block_size=block_size)


def test_gap_summary_rows_and_totals():
    base = record(10.5, 2.0, tokens=4096, cell=UNQUANTIZED)
    cells = [cell("e2m1-ue4m3-b4-absmax", "ue4m3", "absmax", 4, 11.25),
             cell("e2m1-ue4m3-b8-absmax", "ue4m3", "absmax", 8, 10.75),
             cell("e2m1-ue5m3-b4-four_over_six", "ue5m3", "four_over_six", 4, 10.25)]
    out = gap_summary("small", base, iter(cells))  # any iterable, consumed once
    assert out == {
        "model": "small", "perplexity": 10.5, "tokens": 4096, "wall_time_s": 6.5,
        "rows": [
            {"cell": "e2m1-ue4m3-b4-absmax", "scale": "ue4m3", "variant": "absmax", "block_size": 4,
             "perplexity": 11.25, "gap": 0.75},
            {"cell": "e2m1-ue4m3-b8-absmax", "scale": "ue4m3", "variant": "absmax", "block_size": 8,
             "perplexity": 10.75, "gap": 0.25},
            {"cell": "e2m1-ue5m3-b4-four_over_six", "scale": "ue5m3", "variant": "four_over_six", "block_size": 4,
             "perplexity": 10.25, "gap": -0.25},  # a quantized model may score better
        ],
    }


def test_gap_summary_without_cells():
    out = gap_summary("small", record(10.5, 2.0), [])
    assert out["rows"] == []
    assert out["wall_time_s"] == 2.0

