"""Report context: the regions and gap tables, and a full context that the shared renderer accepts."""

import json
import math

import matplotlib
import pytest
from fib_testing import CONFIG, GRID, SPECS, THRESHOLDS, planted_cells, point_summary

matplotlib.use("Agg")

from common.report import claims_document, verify_sha256sums
from common.report.__main__ import main as report_main
from papers.finer_is_better.authors import load_results, load_source
from papers.finer_is_better.claims import numerical_checks, numerical_claims
from papers.finer_is_better.context import (
    build_context,
    mse_table,
    numerics_table,
    our_setup,
    paper_cells_table,
    regions_table,
    shape_table,
    sweep_table,
)
from papers.finer_is_better.figures import caption, mse_figure
from papers.finer_is_better.numerical import summary

POINT = {("ue4m3", "absmax", 4): 0.05, ("ue4m3", "absmax", 16): 0.02}


@pytest.fixture(scope="module")
def planted():
    planted = summary(planted_cells(), THRESHOLDS)
    planted["claim_sigmas"] = {"sigma_A": GRID[0], "sigma_B": GRID[6]}
    return planted


def test_regions_table(planted):
    table = regions_table(planted)
    assert table["columns"] == ["region", "sigma intervals", "points", "detection rule"]
    assert table["rows"] == [
        ["A", "[1e-05, 0.0001], [0.001, 0.001]", 4, planted["regions"]["A"]["rule"]],
        ["B", "[0.001, 0.001], [0.01, 0.03], [0.3, 0.3]", 4, planted["regions"]["B"]["rule"]],
    ]


def test_regions_table_without_regions():
    empty = summary(planted_cells({("ue4m3", "absmax"): {}, ("ue4m3", "prevent_zero"): {}}), THRESHOLDS)
    assert [row[:3] for row in regions_table(empty)["rows"]] == [["A", "none", 0], ["B", "none", 0]]


def test_sweep_table():
    table = sweep_table([point_summary("small-c1", 0.028, POINT, operands=("w",)),
                         point_summary("small-c0.5", 0.014, POINT, operands=("w",))])
    assert table["columns"] == ["sigma", "model", "ppl", "operands", "scale", "variant", "b4", "b16"]
    w = "w (our extension)"
    assert table["rows"] == [["0.014", "small-c0.5", "10.000", w, "UE4M3", "absmax", "0.513", "0.202"],
                             ["0.028", "small-c1", "10.000", w, "UE4M3", "absmax", "0.513", "0.202"]]
    assert table["caption"].endswith("w: weights only; our extension: the authors' repository has no weights-only run")


def test_mse_table_at_reference_sigmas(planted):
    table = mse_table(planted, targets=(1e-5, 1.0))
    assert table["columns"] == ["scale", "variant", "sigma", "b4", "b8", "b16"]
    assert len(table["rows"]) == 6 * 2
    assert table["rows"][0] == ["UE4M3", "absmax", "1e-05", "3e+10", "2e+10", "4e+10"]
    assert table["rows"][1] == ["UE4M3", "absmax", "1", "1", "2", "4"]



def test_context_renders_with_the_shared_cli(planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    models = [point_summary("small-c1", 0.028, POINT)]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.json").write_text(json.dumps(planted))
    claims = claims_document(numerical_claims(planted, SPECS, "results/summary.json"),
                             numerical_checks(planted, "results/summary.json"))
    mse_figure(planted, "ue4m3", "absmax", "results/mse-ue4m3-absmax.png", "results/mse-ue4m3-absmax.pdf")
    figure = {"id": "mse-ue4m3-absmax", "caption": caption("mse-ue4m3-absmax"),
              "png": "results/mse-ue4m3-absmax.png", "pdf": "results/mse-ue4m3-absmax.pdf"}
    context = build_context(config=CONFIG, profile="smoke", numerical=planted, models=models,
                            claims=claims, figures=[figure],
                            artifacts=["results/summary.json", figure["png"], figure["pdf"],
                                       "results/summary.json"],
                            rerun_examples=[], seeds={"numerical": 0}, stage_seconds={"mse": 1.0})
    assert context["artifacts"] == ["results/mse-ue4m3-absmax.pdf", "results/mse-ue4m3-absmax.png",
                                    "results/summary.json"]
    assert [t["caption"].split(" ")[0] for t in context["tables"]] == ["Regions", "Where", "Relative", "The", "The",
                                                                       "Numerics"]
    assert len(context["claims"]) == 8
    assert [r["aspect"] for r in context["setup"]] == list(CONFIG["paper_setup"])
    assert context["setup"][3] == {"aspect": "Sequence length", "paper": "2048 tokens a window, stride 2048, batch 1",
                                   "ours": "256 tokens a window, stride 256, batch 8"}
    assert len(context["checks"]) == 4
    (tmp_path / "context.json").write_text(json.dumps(context))
    assert report_main(["render", "--context", "context.json", "--html", "r.html", "--tex", "r.tex",
                        "--sums", "r.SHA256SUMS"]) == 0
    html = (tmp_path / "r.html").read_text()
    for verdict in claims["counts"]:  # every row of every kind shows its verdict cell once
        shown = sum(counts[verdict] for counts in claims["counts_by_kind"].values())
        assert html.count(f'class="verdict verdict-{verdict.replace(" ", "-")}"') == shown
    assert claims["counts"]["reproduced"] == 6  # the paper's rows; brute force's planted floor tie inconclusive
    assert 'src="http' not in html
    assert "<th>Sequence length</th><td>2048 tokens a window" in html
    assert verify_sha256sums("r.SHA256SUMS") == []


SMALL = {"parameters": 9876543, "train_split": "data/corpora/sotu/train.jsonl", "init": "small"}


def test_our_setup_from_the_config_and_the_points(planted):
    models = [point_summary("small-c2", 0.056, POINT), point_summary("small-c0.5", 0.014, POINT)]
    ours = our_setup(CONFIG, planted, models, {"small": SMALL})
    assert list(ours) == list(CONFIG["paper_setup"])
    assert ours["Models"] == ("small (9.88M parameters) at c = 2, 0.5 (c: the moved linears' weight sigma times "
                              "c, the same function)")
    assert ours["Data"] == "sotu (the base model's pretraining corpus), test split"
    assert ours["Tokens evaluated"] == "the first 32768 tokens of the split; 3200 scored a point"
    assert ours["Sequence length"] == "256 tokens a window, stride 256, batch 8"
    assert ours["Block sizes"] == "model study 4, 8, 16, 32; numerical study 4, 8, 16"
    assert ours["Scale rules"] == ("model study UE4M3: absmax, prevent_zero, four_over_six, four_over_six_pz, "
                                   "hierarchical, hierarchical_four_over_six; UE5M3: four_over_six; numerical study "
                                   "UE4M3: absmax, prevent_zero, four_over_six, four_over_six_pz, brute_force, "
                                   "hierarchical, hierarchical_four_over_six; UE5M3: absmax, four_over_six")
    assert ours["Layers quantized"] == ("the linears matching mlp\\.(gate_proj|up_proj|down_proj)\\$ (weights only "
                                        "and weights and activations; activations at the model's own scale at every "
                                        "sweep point); a point's sigma: the median over mlp\\.(gate_proj|up_proj)\\$")
    assert ours["Numerics"].startswith("the model study under our convention (lowbit; ")
    assert ours["Numerical study"] == ("1048576 Normal samples a sigma (seed 0), 41 sigmas log-spaced in [1e-05, 1], "
                                       "blocks 4, 8, 16")


def test_our_setup_of_the_paper_s_models_as_they_are(planted):
    paper = {**CONFIG, "numerics": "finer_is_better_authors",
             "model": {**CONFIG["model"], "corpus": "wikitext2", "max_tokens": None}}
    models = [point_summary("llama31_8b-c1", 0.017, POINT), point_summary("qwen25_14b-c1", 0.03, POINT)]
    ours = our_setup(paper, planted, models, {})
    assert ours["Models"] == "llama31_8b as it is; qwen25_14b as it is"
    assert ours["Data"] == "wikitext2, test split"
    assert ours["Tokens evaluated"] == "the whole split; 3200 scored a point"
    assert ours["Numerics"].startswith("the model study under the authors' convention (finer_is_better_authors; ")
    empty = our_setup(CONFIG, planted, [], {})
    assert empty["Models"] == "no model study in this run"
    assert empty["Data"] == "the pretraining corpus (the base model's pretraining corpus), test split"
    with pytest.raises(ValueError, match="'small' is not a sweep point"):
        our_setup(CONFIG, planted, [{**models[0], "model": "small"}], {})


def test_context_refuses_a_typed_verdict(planted):
    document = claims_document(numerical_claims(planted, SPECS, "s.json"), [])
    document["claims"][0] = {**document["claims"][0], "verdict": "contradicted"}
    with pytest.raises(ValueError, match=r"claim 'absmax_reversal': verdict 'contradicted' does not follow"):
        build_context(config=CONFIG, profile="smoke", numerical=planted, models=[], claims=document, figures=[],
                      artifacts=[], rerun_examples=[], seeds={}, stage_seconds={})


# --- the paper beside ours --------------------------------------------------------------------------------------

def gaps_point(model, sigma, gaps, operands=("wa",)):
    """A point whose cell (scale, variant, block) has exactly the perplexity gap ``gaps[...]`` (reference ppl 10)."""
    return point_summary(model, sigma, {k: math.log1p(g / 10.0) for k, g in gaps.items()}, operands=operands)


def test_shape_table_computes_the_papers_statistics_from_its_table():
    ours = gaps_point("small-c1", 0.028, {("ue4m3", "absmax", 4): 0.5, ("ue4m3", "absmax", 16): 0.25,
                                         ("ue4m3", "four_over_six", 4): 0.2, ("ue4m3", "prevent_zero", 4): 0.4})
    table = shape_table([ours], load_results(), [4, 16], load_source())
    assert table["columns"] == ["statistic", "the paper (the authors' table)", "ours (this run)"]
    assert "clee1994/finer_is_better results/results.csv at commit 482918d" in table["caption"]
    cut, pz, hierarchical, best = table["rows"]
    assert cut[0] == "4/6's change of the block-4 gap (UE4M3 abs-max -> 4/6)"
    assert cut[1].startswith("Llama-3.1-8B: 0.725 -> 0.270 (-62.8%); Granite-3.3-8B: 0.865 -> 0.434 (-49.8%)")
    assert cut[2] == "small-c1 (sigma 0.028): 0.500 -> 0.200 (-60.0%)"
    assert pz[1].startswith("Llama-3.1-8B: 0.725 -> 0.591 (-18.5%)")
    assert pz[2] == "small-c1 (sigma 0.028): 0.500 -> 0.400 (-20.0%)"
    assert hierarchical[1].startswith("Llama-3.1-8B: 0.109 -> 0.115 (+5.9%); Granite-3.3-8B: -0.081 -> -0.065 "
                                      "(difference +0.016)")  # a gap at or below zero: no relative change
    assert hierarchical[2] == "not in these cells"
    assert best[0] == "abs-max (UE4M3): the block size of the smallest gap, of blocks 4, 16"
    assert best[1] == ("Llama-3.1-8B: block 16; Granite-3.3-8B: block 16; DeepSeek-LLM-7B-Base: block 4; "
                       "Qwen2.5-14B: block 4")
    assert best[2] == "small-c1 (sigma 0.028): block 16"


def test_paper_cells_table_per_cell_of_the_authors_models():
    llama = gaps_point("llama31_8b-c1", 0.02, {("ue4m3", "absmax", 4): 0.75, ("ue4m3", "brute_force", 4): 0.1},
                       operands=("w", "wa"))
    table = paper_cells_table([llama, gaps_point("small-c1", 0.028, {("ue4m3", "absmax", 4): 0.5})], load_results(),
                              load_source())
    assert table["columns"] == ["model", "scale", "variant", "block", "ours", "the paper", "ours - paper"]
    assert table["rows"] == [["Llama-3.1-8B", "UE4M3", "absmax", 4, "0.750", "0.725", "+0.025"],
                             ["Llama-3.1-8B", "UE4M3", "brute_force", 4, "0.100",
                              "not in the authors' table (our extension)", ""]]
    assert paper_cells_table([gaps_point("llama31_8b-c0.5", 0.01, {("ue4m3", "absmax", 4): 0.5})], load_results(),
                             load_source()) is None  # a rescaled point is not the authors' model


@pytest.mark.parametrize(("numerics", "same"), [("lowbit", False), ("finer_is_better_authors", True)])
def test_numerics_table_sets_this_run_beside_the_authors(numerics, same):
    table = numerics_table(numerics)
    assert table["caption"].startswith(f"Numerics of the model study: this run's convention ({numerics}) beside the "
                                       "authors' (finer_is_better_authors")
    assert table["columns"] == ["aspect", "this run", "the authors'", "where the authors do it", "same or different"]
    assert len(table["rows"]) >= 5  # one per aspect: scope, ties, arithmetic, E8M0 4/6, UE5M3 target and max
    verdicts = {row[0]: row[-1] for row in table["rows"]}
    assert set(verdicts.values()) == {"same"} if same else "different" in verdicts.values()
    ties = next(row for row in table["rows"] if row[0].startswith("round-to-nearest ties"))
    assert ties[1:3] == (["to the smaller magnitude"] * 2 if same else ["to even", "to the smaller magnitude"])
