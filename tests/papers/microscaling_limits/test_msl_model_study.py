"""Model study: cell names and recipes, perplexity and zero-shot cells on a tiny model (weights only or weights
and activations, per-window and per-example scores kept), and the perplexity-gap summary (the evaluation itself
is covered in tests/eval)."""

import re

import pytest
from paper_testing import build_tiny_setup

from common.io import write_jsonl
from common.models import load_causal_lm
from common.ptq import select_linears
from papers.microscaling_limits.model_study import (
    UNQUANTIZED,
    cell_recipe,
    gap_summary,
    model_cell,
    parse_cell,
    zero_shot_cell,
)
from papers.microscaling_limits.settings import variant_spec

MOVED = r"(self_attn\.(q|k|v)_proj|mlp\.(gate|up)_proj)$"


@pytest.mark.parametrize(("cell", "parts"), [
    ("e2m1-ue4m3-b4", {"element": "e2m1", "variant": "ue4m3", "block_size": 4, "activations": True}),
    ("e2m1-ue4m3s-b256", {"element": "e2m1", "variant": "ue4m3s", "block_size": 256, "activations": True}),
    ("int4-ue5m3-b32", {"element": "int4", "variant": "ue5m3", "block_size": 32, "activations": True}),
    ("e2m1-ue5m3-b16-weights", {"element": "e2m1", "variant": "ue5m3", "block_size": 16, "activations": False}),
])
def test_parse_cell(cell, parts):
    assert parse_cell(cell) == parts


@pytest.mark.parametrize("name", [
    "e2m1-ue4m3-4", "e2m1-ue4m3", "E2M1-ue4m3-b4", "e2m1-ue4m3-b4-absmax", "e2m1_ue4m3-b4", "e2m1-ue4m3-bx", "",
    UNQUANTIZED, " e2m1-ue4m3-b4", "e2m1-ue4m3-b4\n", "e2m1-ue-4m3-b4", "e2m1-ue4m3-b4-weight",
    "e2m1-ue4m3-b4-weights-weights",
])
def test_malformed_cell_names(name):
    with pytest.raises(ValueError, match=rf"cell name {re.escape(repr(name))} is not "
                                         r"<element>-<variant>-b<block>\[-weights\]"):
        parse_cell(name)


def test_cell_recipe_quantizes_activations_unless_weights_only():
    both, weights = cell_recipe("e2m1-ue4m3s-b16"), cell_recipe("e2m1-ue4m3s-b16-weights")
    assert both.weights == both.activations == variant_spec("e2m1", "ue4m3s", 16)
    assert (weights.weights, weights.activations) == (variant_spec("e2m1", "ue4m3s", 16), None)
    assert (both.name, weights.name) == ("e2m1-ue4m3s-b16", "e2m1-ue4m3s-b16-weights")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = build_tiny_setup(tmp_path_factory.mktemp("msl"))
    write_jsonl(root / "cloze.jsonl", [{"id": str(i), "context": "the quick brown fox jumps over the",
                                        "target": " lazy"} for i in range(3)])
    write_jsonl(root / "choice.jsonl", [{"id": str(i), "context": "seven bold geese", "gold": i % 2,
                                         "choices": ["jump over dogs", "while the fox"]} for i in range(4)])
    return root


CONFIG = {"model": {"include": MOVED, "window": 32, "stride": 32, "max_tokens": 128, "batch_size": 2}}


def test_perplexity_cell_of_the_moved_weights(tiny):
    record = model_cell(CONFIG, "e2m1-ue4m3-b16-weights", tiny / "base", tiny / "valid.jsonl", "tiny-c0.5")
    assert (record["name"], record["cell"], record["activations"]) == ("tiny-c0.5", "e2m1-ue4m3-b16-weights", False)
    assert record["model"]["class"] == "LlamaForCausalLM"  # the evaluation record's model block is kept
    assert record["quantization"]["recipe"]["activations"] is None
    assert record["quantization"]["layers"] == select_linears(load_causal_lm(tiny / "base"), include=MOVED)
    assert all(re.search(MOVED, name) for name in record["quantization"]["layers"])
    scores = record["metrics"]["perplexity"]
    assert len(scores["window_nll"]) == len(scores["window_tokens"]) == scores["windows"]
    reference = model_cell(CONFIG, UNQUANTIZED, tiny / "base", tiny / "valid.jsonl", "tiny-c0.5")
    assert reference["metrics"]["perplexity"]["window_tokens"] == scores["window_tokens"]  # the same windows
    assert reference["quantization"] is None


def test_zero_shot_cell_keeps_each_example(tiny):
    record = zero_shot_cell(CONFIG, "e2m1-ue5m3-b16", tiny / "base", tiny / "cloze.jsonl", tiny / "choice.jsonl",
                            "tiny-c0.5")
    assert (record["name"], record["cell"], record["variant"], record["activations"]) == (
        "tiny-c0.5", "e2m1-ue5m3-b16", "ue5m3", True)
    assert record["quantization"]["recipe"]["activations"] is not None
    cloze, choice = record["metrics"]["cloze"], record["metrics"]["choice"]
    assert len(cloze["example_correct"]) == cloze["examples"] == record["data"]["cloze"]["examples"] == 3
    assert len(choice["example_correct_norm"]) == choice["examples"] == 4
    assert choice["acc_norm"] == sum(choice["example_correct_norm"]) / 4


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
