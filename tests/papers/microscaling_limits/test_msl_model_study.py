"""Model study: cell names and the perplexity-gap summary (the evaluation itself is covered in tests/eval)."""

import re

import pytest

from papers.microscaling_limits.model_study import UNQUANTIZED, gap_summary, parse_cell


@pytest.mark.parametrize(("cell", "parts"), [
    ("e2m1-ue4m3-b4", {"element": "e2m1", "variant": "ue4m3", "block_size": 4}),
    ("e2m1-ue4m3s-b256", {"element": "e2m1", "variant": "ue4m3s", "block_size": 256}),
    ("int4-ue5m3-b32", {"element": "int4", "variant": "ue5m3", "block_size": 32}),
])
def test_parse_cell(cell, parts):
    assert parse_cell(cell) == parts


@pytest.mark.parametrize("name", [
    "e2m1-ue4m3-4", "e2m1-ue4m3", "E2M1-ue4m3-b4", "e2m1-ue4m3-b4-absmax", "e2m1_ue4m3-b4", "e2m1-ue4m3-bx", "",
    UNQUANTIZED, " e2m1-ue4m3-b4", "e2m1-ue4m3-b4\n", "e2m1-ue-4m3-b4",
])
def test_malformed_cell_names(name):
    with pytest.raises(ValueError, match=rf"cell name {re.escape(repr(name))} is not <element>-<variant>-b<block>"):
        parse_cell(name)


def record(perplexity, wall_time_s, tokens=8192, **cell):
    return {**cell, "metrics": {"perplexity": {"perplexity": perplexity, "nll": 2.0}},
            "data": {"split": {"tokens": tokens}}, "wall_time_s": wall_time_s}


def cell(name, perplexity):
    return record(perplexity, 1.5, cell=name, **parse_cell(name))


def test_gap_summary_rows_and_totals():
    base = record(10.5, 2.0, tokens=4096, cell=UNQUANTIZED)
    cells = [cell("e2m1-ue4m3-b4", 11.25), cell("e2m1-ue4m3s-b4", 10.75), cell("e2m1-ue5m3-b4", 10.25)]
    out = gap_summary("small", base, iter(cells))  # any iterable, consumed once
    assert out == {
        "model": "small", "perplexity": 10.5, "tokens": 4096, "wall_time_s": 6.5,
        "rows": [
            {"cell": "e2m1-ue4m3-b4", "variant": "ue4m3", "block_size": 4, "perplexity": 11.25, "gap": 0.75},
            {"cell": "e2m1-ue4m3s-b4", "variant": "ue4m3s", "block_size": 4, "perplexity": 10.75, "gap": 0.25},
            {"cell": "e2m1-ue5m3-b4", "variant": "ue5m3", "block_size": 4, "perplexity": 10.25, "gap": -0.25},
        ],
    }


def test_gap_summary_without_cells():
    out = gap_summary("small", record(10.5, 2.0), [])
    assert out["rows"] == []
    assert out["wall_time_s"] == 2.0
    assert out["tokens"] == 8192


def test_gap_summary_needs_the_variant_and_block():
    with pytest.raises(KeyError, match=r"variant"):
        gap_summary("small", record(10.5, 2.0), [record(11.0, 1.0, cell="e2m1-ue4m3-b4")])
