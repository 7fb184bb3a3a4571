"""Report context: every table from synthetic artifacts, and a full context (claims document included) that the
shared renderer accepts."""

import json

import matplotlib
import pytest
from msl_testing import (
    EVIDENCE,
    comparison_result,
    crossover_row,
    fit,
    gap_summary,
    model_fit,
    ppl_record,
    specs,
    sweep_models,
    sweep_tensor_cell,
    tensor_summary,
    tiny_config,
    validation_result,
    zero_block_row,
    zero_shot_record,
)

matplotlib.use("Agg")

from common.config import merged
from common.report import claims_document, verify_sha256sums
from common.report.__main__ import main as report_main
from common.report.figures import save_figure
from papers.microscaling_limits.claims import paper_model_claim, theory_checks, zero_block_claim
from papers.microscaling_limits.context import (
    PAPER,
    analytic_models_table,
    build_context,
    crossover_table,
    fit_table,
    gap_table,
    model_crossover_table,
    our_setup,
    sweep_gap_table,
    sweep_table,
    tensor_table,
    zero_block_table,
    zero_shot_table,
)
from papers.microscaling_limits.figures import caption, plot_fit, plot_gap
from papers.microscaling_limits.sweep import sweep_summary

NARROW, WIDE = 2**-8, 2**-5
GAPS = {"ue4m3": {4: 0.5, 8: 0.25, 16: 0.375}, "ue4m3s": {4: 0.25, 8: 0.25, 16: 0.375},
        "ue5m3": {4: 0.125, 8: 0.25, 16: 0.375}}


@pytest.fixture
def validation():
    return validation_result(
        fits={"ue4m3": fit(max_relative_error=0.25, chi2=3.125e-8, points=41),
              "ue5m3": fit(max_relative_error=0.0125, chi2=1e-9, points=41)},
        crossovers=[crossover_row("ue4m3", 4, 0.02404905, zero_share=0.09), crossover_row("ue4m3", 8, None),
                    crossover_row("ue5m3", 4, 9.394e-5, agrees=False), crossover_row("ue5m3", 8, 7.5e-5, agrees=None)],
        zero_block=[zero_block_row("ue4m3", 4, 0.3313484, 0.33125, 0.33),
                    zero_block_row("ue4m3", 32, 1.5243e-4, 1.5e-4, 1.5e-4),
                    zero_block_row("ue5m3", 4, 1.78e-10, 0.0, None)],
        points=[{"scale": scale, "rule": "absmax", "block_size": n, "sigma": 0.25, "theory": 1.0, "simulation": 0.5,
                 "relative_error": 0.001, "simulation_relative_se": 0.002}
                for scale in ("ue4m3", "ue5m3") for n in (4, 8)])


@pytest.fixture
def comparison():
    crossovers = [{"scale": "ue4m3", "block_size": 8, "next_block_size": 16, "paper": 0.019118, "exact": 0.0193897,
                   "simulation": 0.0194257}, {"scale": "ue4m3", "block_size": 16, "next_block_size": 32, "paper": None,
                                              "exact": 0.016136, "simulation": None}]
    return comparison_result(model_fit(0.125, sigma=0.0075, block_size=32, mean=0.0078125, chi2=2.5e-7),
                             model_fit(0.00390625, signed=0.00390625, sigma=0.004, block_size=8, mean=0.0009765625,
                                       chi2=6e-8), crossovers=crossovers)


@pytest.fixture
def tensors():
    return [tensor_summary("base", [("a.weight", "ue4m3", NARROW, True, True),
                                    ("a.weight", "ue5m3", NARROW, False, False),
                                    ("b.weight", "ue4m3", WIDE, False, False),
                                    ("b.weight", "ue5m3", WIDE, False, False)])]


def test_analytic_models_table(comparison):
    table = analytic_models_table(comparison)
    assert table["caption"].startswith("The two analytic models against simulation of Normal data on the authors' "
                                       "grid")
    assert table["caption"].endswith("(relative standard error <= 0.5%)")
    assert table["columns"] == ["scale", "model", "worst error", "where", "mean |error|", "chi2 (MSE/sigma^2)",
                                "resolved points"]
    assert table["rows"] == [
        ["UE4M3", "ours (exact)", "+0.39%", "sigma 0.004, n 8", "0.10%", "6.00e-08", "10 of 12"],
        ["UE4M3", "the paper's (truncated at +-6s)", "-12.50%", "sigma 0.0075, n 32", "0.78%", "2.50e-07", "10 of 12"]]
    nothing = comparison_result(model_fit(None), model_fit(None))
    assert analytic_models_table(nothing)["rows"][0][2:5] == ["", "", ""]


def test_model_crossover_table(comparison):
    table = model_crossover_table(comparison)
    assert table["columns"] == ["scale", "blocks", "the paper's model", "ours (exact)", "simulation"]
    assert table["rows"] == [["UE4M3", "8 vs 16", "0.01912", "0.01939", "0.01943"],
                             ["UE4M3", "16 vs 32", "none in range", "0.01614", "none in range"]]


def test_fit_table(validation):
    table = fit_table(validation)
    assert table["caption"].startswith("Our exact model vs simulation (an implementation check")
    assert table["columns"] == ["scale", "points", "largest relative error", "chi2 (MSE/sigma^2)"]
    assert table["rows"] == [["UE4M3", 41, "25.000%", "3.12e-08"], ["UE5M3", 41, "1.250%", "1.00e-09"]]


def test_crossover_table(validation):
    table = crossover_table(validation)
    assert table["columns"] == ["scale", "rule", "blocks", "crossover sigma", "simulation agrees"]
    assert table["rows"] == [["UE4M3", "absmax", "4 vs 8", "0.024", "yes"],
                             ["UE4M3", "absmax", "8 vs 16", "none in range", "outside the simulated grid"],
                             ["UE5M3", "absmax", "4 vs 8", "9.39e-05", "no"],
                             ["UE5M3", "absmax", "8 vs 16", "7.5e-05", "outside the simulated grid"]]


def test_zero_block_table(validation):
    table = zero_block_table(validation)
    assert table["caption"].startswith("P(block scale rounds to zero) at sigma = 0.005 (an implementation check; the "
                                       "last column is our reconstruction")
    assert table["columns"] == ["scale", "block size", "theory", "simulation", "our reconstruction"]
    assert table["rows"] == [["UE4M3", 4, "0.331", "0.331", "0.33"],
                             ["UE4M3", 32, "0.000152", "0.00015", "0.00015"],
                             ["UE5M3", 4, "1.78e-10", "0", ""]]


def test_tensor_table(tensors):
    cell = tensors[0]
    cell["rows"][0]["prediction_error"] = 0.5  # a.weight, UE4M3, block 8: the largest at that (scale, block)
    table = tensor_table(cell)
    assert table["caption"] == ("base: 2 linear weights, sigma 0.00391-0.0312; inverting (measured, scale: tensor): "
                                "ue4m3: a.weight (1)")
    assert table["columns"] == ["scale", "block size", "tensors", "median MSE/sigma^2", "median |theory/measured - 1|",
                                "largest"]
    # relative MSE: inverting a.weight (UE4M3) 1/4 at block 8, 1/8 at 16; the others 1/8 and 1/4
    assert table["rows"] == [["UE4M3", 8, 2, "0.1875", "37.50%", "50.00%"],
                             ["UE4M3", 16, 2, "0.1875", "25.00%", "25.00%"],
                             ["UE5M3", 8, 2, "0.125", "25.00%", "25.00%"],
                             ["UE5M3", 16, 2, "0.25", "25.00%", "25.00%"]]


def test_tensor_table_without_inversions():
    cell = tensor_summary("minilm", [("c.weight", "ue4m3", WIDE, False, False)])
    table = tensor_table(cell)
    assert table["caption"] == ("minilm: 1 linear weights, sigma 0.0312-0.0312; inverting (measured, scale: tensor): "
                                "none (0)")
    assert len(table["rows"]) == 2


def test_gap_table():
    table = gap_table(gap_summary("small", GAPS, perplexity=12.3456, tokens=8192))
    assert table["caption"] == "small: perplexity gap to the unquantized model (perplexity 12.346, 8192 tokens)"
    assert table["columns"] == ["variant", "b4", "b8", "b16"]
    assert table["rows"] == [["ue4m3", "0.500", "0.250", "0.375"], ["ue4m3s", "0.250", "0.250", "0.375"],
                             ["ue5m3", "0.125", "0.250", "0.375"]]


def test_gap_table_sorts_blocks_and_keeps_variant_order():
    summary = gap_summary("small", {"ue5m3": {16: 0.5, 4: 0.25}, "ue4m3": {4: 1.0, 16: 0.75}})
    table = gap_table(summary)
    assert table["columns"] == ["variant", "b4", "b16"]
    assert table["rows"] == [["ue5m3", "0.250", "0.500"], ["ue4m3", "1.000", "0.750"]]


@pytest.fixture
def sweep():
    points = sweep_models([1.0, 0.25])
    cells = [sweep_tensor_cell("m-c1", 0.04), sweep_tensor_cell("m-c0.25", 0.01)]
    planted = {"e2m1-ue4m3-b16-weights": (0.0, 0.25), "e2m1-ue5m3-b16-weights": (-0.03125, 0.0),
               "e2m1-ue4m3s-b16": (0.0625, 0.0625)}
    records = [ppl_record(m["model"], c, *planted.get(c, (0.0, 0.0)), seed=1)
               for m in points for c in ("unquantized", "e2m1-ue4m3-b16-weights", "e2m1-ue4m3-b32-weights",
                                         "e2m1-ue5m3-b16-weights", "e2m1-ue5m3-b32-weights", "e2m1-ue4m3s-b16")]
    for r in records:  # the narrow point inverts with UE4M3: ppl(16) / ppl(32) = e^0.25
        if r["name"] == "m-c0.25" and r["cell"] == "e2m1-ue4m3-b16-weights":
            r.update(ppl_record("m-c0.25", r["cell"], 0.25, 0.0))
    zero = [zero_shot_record("m-c0.25", c, [1, 0, 1, 1], [0, 1, 0, 0])
            for c in ("e2m1-ue5m3-b16-weights", "e2m1-ue4m3s-b16-weights")]
    prereg = {"pair": [16, 32], "crossover": {"ue4m3": 0.016, "ue5m3": 6.3e-5},
              "crossover_paper": {"ue4m3": 0.02, "ue5m3": None}}
    return sweep_summary("e2m1", points, prereg, cells, records, zero, EVIDENCE)


def test_sweep_table(sweep):
    table = sweep_table(sweep)
    assert table["columns"] == ["c", "sigma (range)", "ppl unquantized", "ue4m3 b16/b32 - 1", "ue5m3 b16/b32 - 1"]
    assert [row[:3] for row in table["rows"]] == [["1", "0.04 (0.04-0.04)", "20.086"],
                                                   ["0.25", "0.01 (0.01-0.01)", "20.086"]]
    assert table["rows"][1][3].startswith("+28.40% [")
    assert table["rows"][0][4] == "-3.08% [-3.08%, -3.08%]"
    assert table["caption"].endswith("Pre-registered sigma*: the paper's model: UE4M3 0.02 (sweep position 0.50); "
                                     "our exact model: UE4M3 0.016 (sweep position 0.66), UE5M3 6.3e-05 (sweep "
                                     "position 4.66)")


def test_sweep_gap_table(sweep):
    table = sweep_gap_table(sweep)
    assert table["columns"] == ["c", "sigma", "ue4m3 W", "ue5m3 W", "ue4m3s W+A"]
    assert table["rows"][1] == ["0.25", "0.01", "+28.40%", "-3.08%", "+6.45%"]


def test_zero_shot_table(sweep):
    table = zero_shot_table(sweep)
    assert table["columns"] == ["c", "sigma", "variant", "block", "examples", "cloze accuracy",
                                "choice accuracy (norm)"]
    assert table["rows"] == [["0.25", "0.01", "ue4m3s", "b16", 4, "0.750", "0.250"],
                             ["0.25", "0.01", "ue5m3", "b16", 4, "0.750", "0.250"]]


def document(validation, comparison):
    rules = specs()
    prereg = {"pair": [16, 32], "drivers_paper": {"ue4m3": {"sigma": 0.013, "non_max": -3.1, "max_element": 4.1,
                                                            "zero_blocks": 4.3e-6}}}
    rows = [paper_model_claim(rules["paper_model_matches_simulation"], comparison, 0.95,
                              ["results/comparison.json"]),
            zero_block_claim(rules["zero_blocks_drive_reversal"], prereg, ["results/validation.json"])]
    checks = theory_checks([{"rows": [{"non_max": 0.5, "max_element": 0.25, "zero_blocks": 0.25, "total": 1.0}]}],
                           validation, ["results/validation.json"], "results/validation.json")
    return claims_document(rows, checks)


def test_context_renders_with_the_shared_cli(validation, comparison, tensors, sweep, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    validation["zero_block"] = [zero_block_row("ue4m3", 4, 0.3313484, 0.33125, 0.33)]
    (results / "validation.json").write_text(json.dumps(validation))
    models = [gap_summary("base", GAPS)]
    figures = []
    for figure_id, fig in (("fit", plot_fit(validation)), ("gap-base", plot_gap(models[0]))):
        png, pdf = f"results/{figure_id}.png", f"results/{figure_id}.pdf"
        save_figure(fig, png, pdf)
        figures.append({"id": figure_id, "caption": caption(figure_id), "png": png, "pdf": pdf})
    for name in ("tensors.json", "summary.json"):
        (results / name).write_text("{}")
    context = build_context(config=tiny_config(), profile="smoke", validation=validation, comparison=comparison,
                            tensors=tensors, models=models, sweep=sweep, claims=document(validation, comparison),
                            figures=figures,
                            artifacts=["results/validation.json", "results/tensors.json", "results/summary.json",
                                       "results/validation.json"],
                            rerun_examples=["results/microscaling_limits/ptq/base/e2m1-ue5m3-b8.json"],
                            seeds={"simulation draw": 0, "workflow": 0}, stage_seconds={"theory": 1.0})
    assert context["paper"] == PAPER
    assert "function-preserving sweep" in PAPER["method"]
    assert [r["aspect"] for r in context["setup"]] == list(tiny_config()["paper_setup"])
    assert context["setup"][6] == {"aspect": "Layers quantized", "paper": "every linear layer, weights and activations",
                                   "ours": context["setup"][6]["ours"]}
    assert context["setup"][6]["ours"].startswith("sweep: the linears it moves (1 weight tensors a point)")
    assert context["artifacts"] == ["results/fit.pdf", "results/fit.png", "results/gap-base.pdf",
                                    "results/gap-base.png", "results/summary.json", "results/tensors.json",
                                    "results/validation.json"]
    assert [" ".join(t["caption"].split(" ")[:2]) for t in context["tables"]] == [
        "The two", "Crossovers under", "Our exact", "Crossovers: below", "P(block scale", "The sweep:", "The sweep",
        "Zero-shot accuracy", "base: 2", "base: perplexity", "Numerics conventions"]
    assert context["tables"][-1]["rows"][3] == ["largest UE4M3 scale, quantizer (saturation)", "448", "480",
                                                "mx.cuh:65-69", "different"]
    assert context["rerun"][1] == {"cell": "e2m1-ue5m3-b8.json", "command": "snakemake --profile "
                                   "workflow/profiles/smoke results/microscaling_limits/ptq/base/e2m1-ue5m3-b8.json"}
    assert {c["id"]: c["verdict"] for c in context["claims"]} == {"paper_model_matches_simulation": "contradicted",
                                                                  "zero_blocks_drive_reversal": "contradicted"}
    assert [c["id"] for c in context["checks"]] == ["theory_parts_sum_to_total",
                                                    "zero_block_probability_reconstruction"]
    (tmp_path / "context.json").write_text(json.dumps(context))
    assert report_main(["render", "--context", "context.json", "--html", "r.html", "--tex", "r.tex",
                        "--sums", "r.SHA256SUMS"]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "verdict-contradicted" in html
    assert "the paper&#39;s (truncated at +-6s)" in html or "the paper's (truncated at +-6s)" in html
    assert "Is finer better? The limits of microscaling formats in LLMs" in html
    assert html.count("data:image/png;base64,") == 2
    assert 'src="http' not in html
    assert "<th>Layers quantized</th><td>every linear layer, weights and activations</td>" in html
    assert verify_sha256sums("r.SHA256SUMS") == []
    assert "results/validation.json" in (tmp_path / "r.SHA256SUMS").read_text()


def test_our_setup_from_the_config_and_the_artifacts(tensors, sweep):
    config = tiny_config()
    ours = our_setup(config, sweep, [gap_summary("small", GAPS)], tensors,
                     {"small": {"parameters": 9876543, "train_split": "data/corpora/sotu/train.jsonl"}})
    assert list(ours) == list(config["paper_setup"])
    assert ours["Models"] == ("sweep: m at c = 1, 0.25 (the moved linears' weight sigma times c, the same function); "
                              "perplexity study: small (9.88M parameters); tensor studies: base")
    assert ours["Data"] == ("sotu (the base model's pretraining corpus), test split; zero-shot cloze and 4-way choice "
                            "tasks, 4 examples")
    assert ours["Tokens evaluated"] == ("sweep cells the first 16384 tokens of the split; perplexity study the first "
                                        "8192 tokens of the split")
    assert ours["Sequence length"] == "128 tokens a window, stride 128, batch 8"
    assert ours["Block sizes"] == ("sweep 16, 32 (the claims' pair 16 vs 32); perplexity study 4, 8; theory 4, 8; "
                                   "the authors' grid 4, 8")
    assert ours["Scale formats"] == ("E2M1 elements, abs-max block scales in UE4M3, UE4M3-S (a per-tensor FP32 "
                                     "scale first), UE5M3")
    assert ours["Layers quantized"] == ("sweep: the linears it moves (1 weight tensors a point), weights only and "
                                        "weights and activations; perplexity study: the linears matching "
                                        "(self_attn\\.(q|k|v|o)_proj|mlp\\.(gate|up|down)_proj)\\$, weights and "
                                        "activations")
    assert ours["Theory"] == ("the paper's model and our exact model (common.theory) against simulated Normal data: "
                              "4096 samples a point of the authors' grid, 4096 a point of 3 sigmas log-spaced in "
                              "[0.001, 0.1]")
    paper = merged(config, {"model": {"corpus": "wikitext2", "max_tokens": None}, "sweep": {"max_tokens": None}})
    assert our_setup(paper, {**sweep, "zero_shot": []}, [], [], {})["Data"] == "wikitext2, test split"
    assert our_setup(paper, sweep, [], [], {})["Tokens evaluated"] == ("sweep cells the whole split; perplexity "
                                                                       "study the whole split")


def test_context_refuses_a_typed_verdict(validation, comparison, sweep):
    bad = document(validation, comparison)
    bad["claims"][1]["verdict"] = "reproduced"  # the interval says contradicted
    with pytest.raises(ValueError, match=r"claim 'zero_blocks_drive_reversal': verdict 'reproduced' does not follow"):
        build_context(config=tiny_config(), profile="smoke", validation=validation, comparison=comparison, tensors=[],
                      models=[],
                      sweep=sweep, claims=bad, figures=[], artifacts=[], rerun_examples=[], seeds={},
                      stage_seconds={})
