"""Report context: the regions and gap tables, and a full context that the shared renderer accepts."""

import json

import matplotlib
import pytest
from fib_testing import THRESHOLDS, gap_summary, planted_cells

matplotlib.use("Agg")

from common.report import verify_sha256sums
from common.report.__main__ import main as report_main
from papers.finer_is_better.claims import model_claims, numerical_claims
from papers.finer_is_better.context import build_context, gap_table, mse_table, regions_table
from papers.finer_is_better.figures import caption, mse_figure
from papers.finer_is_better.numerical import summary

GAPS = {("ue4m3", "absmax"): {4: 0.725, 8: 0.5, 16: 0.4},
        ("ue4m3", "prevent_zero"): {4: 0.7, 8: 0.5, 16: 0.4},
        ("ue4m3", "four_over_six"): {4: 0.27, 8: 0.3, 16: 0.35},
        ("ue5m3", "four_over_six"): {4: 0.2625, 8: 0.3, 16: 0.36}}


@pytest.fixture(scope="module")
def planted():
    return summary(planted_cells(), THRESHOLDS)


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


def test_gap_table():
    table = gap_table(gap_summary("small", GAPS, perplexity=12.3456, tokens=8192))
    assert table["caption"] == "small: perplexity gap to the unquantized model (perplexity 12.346, 8192 tokens)"
    assert table["columns"] == ["scale", "variant", "b4", "b8", "b16"]
    assert table["rows"] == [["UE4M3", "absmax", "0.725", "0.500", "0.400"],
                             ["UE4M3", "prevent_zero", "0.700", "0.500", "0.400"],
                             ["UE4M3", "four_over_six", "0.270", "0.300", "0.350"],
                             ["UE5M3", "four_over_six", "0.263", "0.300", "0.360"]]


def test_mse_table_at_reference_sigmas(planted):
    table = mse_table(planted, targets=(1e-5, 1.0))
    assert table["columns"] == ["scale", "variant", "sigma", "b4", "b8", "b16"]
    assert len(table["rows"]) == 6 * 2
    assert table["rows"][0] == ["UE4M3", "absmax", "1e-05", "3e+10", "2e+10", "4e+10"]
    assert table["rows"][1] == ["UE4M3", "absmax", "1", "1", "2", "4"]



def test_context_renders_with_the_shared_cli(planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    models = [gap_summary("small", GAPS)]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.json").write_text(json.dumps(planted))
    claims = [c.to_dict() for c in numerical_claims(planted, THRESHOLDS, "results/summary.json")
              + model_claims(models, THRESHOLDS, ["results/summary.json"])]
    mse_figure(planted, "ue4m3", "absmax", "results/mse-ue4m3-absmax.png", "results/mse-ue4m3-absmax.pdf")
    figure = {"id": "mse-ue4m3-absmax", "caption": caption("mse-ue4m3-absmax"),
              "png": "results/mse-ue4m3-absmax.png", "pdf": "results/mse-ue4m3-absmax.pdf"}
    context = build_context(config={"element": "e2m1"}, profile="smoke", numerical=planted, models=models,
                            claims=claims, figures=[figure],
                            artifacts=["results/summary.json", figure["png"], figure["pdf"],
                                       "results/summary.json"],
                            rerun_examples=[], seeds={"numerical": 0}, stage_seconds={"mse": 1.0})
    assert context["artifacts"] == ["results/mse-ue4m3-absmax.pdf", "results/mse-ue4m3-absmax.png",
                                    "results/summary.json"]
    assert [t["caption"].split(" ")[0] for t in context["tables"]] == ["Regions", "Relative", "small:"]
    assert len(context["claims"]) == 9
    (tmp_path / "context.json").write_text(json.dumps(context))
    assert report_main(["render", "--context", "context.json", "--html", "r.html", "--tex", "r.tex",
                        "--sums", "r.SHA256SUMS"]) == 0
    html = (tmp_path / "r.html").read_text()
    assert html.count('class="verdict-reproduced"') == 8
    assert html.count('class="verdict-not-testable-at-this-scale"') == 1  # no hierarchical 4/6 gaps in GAPS
    assert 'src="http' not in html
    assert verify_sha256sums("r.SHA256SUMS") == []


def test_context_refuses_a_typed_verdict(planted):
    bad = {"id": "x", "statement": "s", "paper": "p", "measured": "m", "verdict": "confirmed", "rule": "r",
           "evidence": []}
    with pytest.raises(ValueError, match=r"claim 'x': verdict 'confirmed' is not one of"):
        build_context(config={}, profile="smoke", numerical=planted, models=[], claims=[bad], figures=[],
                      artifacts=[], rerun_examples=[], seeds={}, stage_seconds={})
