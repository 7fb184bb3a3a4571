"""Report context: every table from synthetic artifacts, and a full context that the shared renderer accepts."""

import json

import matplotlib
import pytest
from msl_testing import (
    THRESHOLDS,
    crossover_row,
    fit,
    gap_summary,
    tensor_summary,
    tiny_config,
    validation_result,
    zero_block_row,
)

matplotlib.use("Agg")

from common.report import verify_sha256sums
from common.report.__main__ import main as report_main
from common.report.figures import save_figure
from papers.microscaling_limits.claims import model_claims, tensor_claims, theory_claims
from papers.microscaling_limits.context import (
    PAPER,
    build_context,
    crossover_table,
    fit_table,
    gap_table,
    tensor_table,
    zero_block_table,
)
from papers.microscaling_limits.figures import caption, plot_fit, plot_gap

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
        points=[{"scale": scale, "rule": "absmax", "block_size": n, "sigma": 0.25, "theory": 1.0, "simulation": 0.5}
                for scale in ("ue4m3", "ue5m3") for n in (4, 8)])


@pytest.fixture
def tensors():
    return [tensor_summary("base", [("a.weight", "ue4m3", NARROW, True, True),
                                    ("a.weight", "ue5m3", NARROW, False, False),
                                    ("b.weight", "ue4m3", WIDE, False, False),
                                    ("b.weight", "ue5m3", WIDE, False, False)])]


def test_fit_table(validation):
    table = fit_table(validation)
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
    assert table["caption"] == "P(block scale rounds to zero) at sigma = 0.005"
    assert table["columns"] == ["scale", "block size", "theory", "simulation", "paper"]
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


def test_context_renders_with_the_shared_cli(validation, tensors, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    (results / "validation.json").write_text(json.dumps(validation))
    models = [gap_summary("base", GAPS)]
    claims = [c.to_dict() for c in theory_claims(validation, THRESHOLDS, "results/validation.json")
              + tensor_claims(tensors, validation, ["results/tensors.json"])
              + model_claims(models, tensors, validation, THRESHOLDS, ["results/summary.json"])]
    figures = []
    for figure_id, fig in (("fit", plot_fit(validation)), ("gap-base", plot_gap(models[0]))):
        png, pdf = f"results/{figure_id}.png", f"results/{figure_id}.pdf"
        save_figure(fig, png, pdf)
        figures.append({"id": figure_id, "caption": caption(figure_id), "png": png, "pdf": pdf})
    for name in ("tensors.json", "summary.json"):
        (results / name).write_text("{}")
    context = build_context(config=tiny_config(), profile="smoke", validation=validation, tensors=tensors,
                            models=models, claims=claims, figures=figures,
                            artifacts=["results/validation.json", "results/tensors.json", "results/summary.json",
                                       "results/validation.json"],
                            rerun_examples=["results/microscaling_limits/ptq/base/e2m1-ue5m3-b8.json"],
                            seeds={"simulation draw": 0, "workflow": 0}, stage_seconds={"theory": 1.0})
    assert context["paper"] == PAPER
    assert context["artifacts"] == ["results/fit.pdf", "results/fit.png", "results/gap-base.pdf",
                                    "results/gap-base.png", "results/summary.json", "results/tensors.json",
                                    "results/validation.json"]
    assert [t["caption"].split(" ")[0] for t in context["tables"]] == ["Theory", "Crossovers:", "P(block", "base:",
                                                                        "base:"]
    assert context["rerun"][1] == {"cell": "e2m1-ue5m3-b8.json", "command": "snakemake --profile "
                                   "workflow/profiles/smoke results/microscaling_limits/ptq/base/e2m1-ue5m3-b8.json"}
    assert context["provenance"]["seeds"] == {"simulation draw": 0, "workflow": 0}
    verdicts = {c["id"]: c["verdict"] for c in context["claims"]}
    assert verdicts.pop("zero_blocks_drive_reversal") == "not reproduced"  # zero blocks: 9% of the difference
    assert set(verdicts.values()) == {"reproduced"}
    assert len(verdicts) == 7
    (tmp_path / "context.json").write_text(json.dumps(context))
    assert report_main(["render", "--context", "context.json", "--html", "r.html", "--tex", "r.tex",
                        "--sums", "r.SHA256SUMS"]) == 0
    html = (tmp_path / "r.html").read_text()
    assert html.count('class="verdict-reproduced"') == 7
    assert html.count('class="verdict-not-reproduced"') == 1
    assert "Is finer better? The limits of microscaling formats in LLMs" in html
    assert html.count("data:image/png;base64,") == 2
    assert 'src="http' not in html
    assert verify_sha256sums("r.SHA256SUMS") == []
    assert "results/validation.json" in (tmp_path / "r.SHA256SUMS").read_text()


def test_context_refuses_a_typed_verdict(validation):
    bad = {"id": "x", "statement": "s", "paper": "p", "measured": "m", "verdict": "confirmed", "rule": "r",
           "evidence": []}
    with pytest.raises(ValueError, match=r"claim 'x': verdict 'confirmed' is not one of"):
        build_context(config={}, profile="smoke", validation=validation, tensors=[], models=[], claims=[bad],
                      figures=[], artifacts=[], rerun_examples=[], seeds={}, stage_seconds={})
