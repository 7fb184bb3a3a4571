"""The authors' published table as data: its provenance, the values the paper quotes, its shape, the loader's
refusals, and the statistics the report cites from it."""

import pandas as pd
import pytest

from papers.finer_is_better.authors import (
    MODELS,
    best_block,
    gap,
    gap_change,
    gap_table,
    load_results,
    load_source,
    paper_model,
)
from papers.finer_is_better.claims import PAPER_CUT

VARIANTS = ["absmax", "prevent_zero", "four_over_six", "four_over_six_pz", "hierarchical", "hierarchical_pz",
            "hierarchical_four_over_six", "hierarchical_four_over_six_pz"]
BLOCKS = [4, 8, 16, 32, 64, 128, 256]


@pytest.fixture(scope="module")
def table():
    return load_results()


def test_source_names_the_commit_and_the_file():
    source = load_source()
    assert source["repository"] == "https://github.com/clee1994/finer_is_better"
    assert (source["path"], source["commit"]) == ("results/results.csv", "482918d5aab17aee2d23e39e795f638ca7c7645c")
    assert len(source["sha256"]) == 64
    assert "no licence file" in source["licence"]
    assert "no weights-only run" in source["setting"]


@pytest.mark.parametrize(("variant", "expected", "row"), [
    ("absmax", 0.725, "Llama_e4m3_no_pz"),
    ("four_over_six", 0.270, "Llama_4over6_no_pz"),
    ("prevent_zero", 0.591, "Llama_e4m3_pz"),
    ("hierarchical", 0.208, "Llama_e4m3 + H"),
])
def test_llama_block4_gaps_the_paper_quotes(table, variant, expected, row):
    assert gap(table, "llama31_8b", "ue4m3", variant, 4) == pytest.approx(expected, abs=5e-4)
    cell = table[(table["model"] == "llama31_8b") & (table["variant"] == variant) & (table["scale"] == "ue4m3")
                 & (table["block_size"] == 4)]
    assert cell["authors_row"].tolist() == [row]
    assert cell["bf16_perplexity"].tolist() == [6.33]


def test_the_precise_row_wins_over_the_rounded_one(table):
    # Qwen's UE5M3 prevent-zero block 4: short row 0.279, long row 0.2815296173095696 (kept)
    assert gap(table, "qwen25_14b", "ue5m3", "prevent_zero", 4) == 0.2815296173095696
    # Qwen's UE5M3 4/6: the long row is empty at blocks 4-32, so those come from the short row
    rows = table[(table["model"] == "qwen25_14b") & (table["scale"] == "ue5m3")
                 & (table["variant"] == "four_over_six")].set_index("block_size")["authors_row"]
    assert rows.to_dict() == {4: "Qwen_4over6_ue5m3", 8: "Qwen_4over6_ue5m3", 16: "Qwen_4over6_ue5m3",
                              32: "Qwen_4over6_ue5m3", 64: "Qwen_ue5m3 + 4o6", 128: "Qwen_ue5m3 + 4o6",
                              256: "Qwen_ue5m3 + 4o6"}


def test_every_model_has_every_variant_at_every_block(table):
    assert table.groupby("model").size().to_dict() == dict.fromkeys(MODELS, 112)
    assert len(table) == 448
    for model in MODELS:
        part = table[table["model"] == model]
        assert sorted(part["block_size"].unique()) == BLOCKS
        for scale in ("ue4m3", "ue5m3"):
            assert set(part[part["scale"] == scale]["variant"]) == set(VARIANTS)
    assert table.groupby("model")["bf16_perplexity"].unique().map(list).to_dict() == {
        "deepseek_7b": [12.39], "granite33_8b": [4.91], "llama31_8b": [6.33], "qwen25_14b": [5.358388710021973]}


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.drop(columns="authors_row"), r"columns \[.*\], expected"),
    (lambda t: t.assign(model=t["model"].replace("llama31_8b", "llama3")), r"unknown model 'llama3'"),
    (lambda t: t.assign(scale=t["scale"].replace("ue5m3", "e8m0")), r"unknown scale 'e8m0'"),
    (lambda t: pd.concat([t, t.iloc[[0]]]), r"cell \('llama31_8b', 'ue4m3', 'absmax', 4\) appears more than once"),
    (lambda t: t.assign(gap=t["gap"].where(t.index != 3)),
     r"gap nan of \('llama31_8b', 'ue4m3', 'absmax', 32\) is not a finite number"),
])
def test_loader_names_a_broken_table(table, tmp_path, edit, message):
    path = tmp_path / "broken.csv"
    edit(table).to_csv(path, index=False)
    with pytest.raises(ValueError, match=message):
        load_results(path)


@pytest.mark.parametrize(("point", "model"), [
    ("llama31_8b-c1", "llama31_8b"), ("qwen25_14b-c1", "qwen25_14b"), ("llama31_8b-c0.5", None),
    ("small-c1", None), ("llama31_8b", None),
])
def test_paper_model_of_a_sweep_point(point, model):
    assert paper_model(point) == model


def test_four_over_six_cut_and_the_claims_constant(table):
    before, after, change = gap_change(table, "llama31_8b", ("ue4m3", "absmax"), ("ue4m3", "four_over_six"), 4)
    assert (before, after) == (0.725, 0.27)
    assert change == pytest.approx(0.27 / 0.725 - 1)
    assert round(change, 2) == PAPER_CUT  # the claim's typed -0.63 is this number, rounded as the paper states it
    assert gap_change(table, "llama31_8b", ("ue4m3", "absmax"), ("ue4m3", "brute_force"), 4) is None


def test_absmax_minimum_block(table):
    best = {m: best_block(table, m, "ue4m3", "absmax", BLOCKS) for m in MODELS}
    assert best == {"llama31_8b": 16, "granite33_8b": 16, "deepseek_7b": 4, "qwen25_14b": 4}
    assert best_block(table, "llama31_8b", "ue4m3", "absmax", [4, 8]) == 8
    assert best_block(table, "llama31_8b", "ue4m3", "absmax", [4, 512]) is None
    assert best_block(table, "llama31_8b", "ue4m3", "absmax", []) is None


def test_gap_table_of_our_summaries():
    summary = {"model": "small-c1", "rows": [
        {"operands": "w", "scale": "ue4m3", "variant": "absmax", "block_size": 4, "gap": 0.5},
        {"operands": "wa", "scale": "ue4m3", "variant": "absmax", "block_size": 4, "gap": 0.75}]}
    ours = gap_table([summary])
    assert ours.to_dict("records") == [{"model": "small-c1", "scale": "ue4m3", "variant": "absmax",
                                        "block_size": 4, "gap": 0.75}]
    assert gap(gap_table([summary], "w"), "small-c1", "ue4m3", "absmax", 4) == 0.5
    assert gap_table([]).empty
