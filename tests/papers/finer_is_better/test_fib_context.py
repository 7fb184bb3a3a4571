"""Report context: the regions and gap tables, and a full context that the shared renderer accepts."""

import json

import matplotlib
import pytest
from fib_testing import GRID, SPECS, THRESHOLDS, planted_cells, point_summary

matplotlib.use("Agg")

from common.report import claims_document, verify_sha256sums
from common.report.__main__ import main as report_main
from papers.finer_is_better.claims import numerical_checks, numerical_claims
from papers.finer_is_better.context import build_context, mse_table, regions_table, sweep_table
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
    assert table["rows"] == [["0.014", "small-c0.5", "10.000", "w", "UE4M3", "absmax", "0.513", "0.202"],
                             ["0.028", "small-c1", "10.000", "w", "UE4M3", "absmax", "0.513", "0.202"]]


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
    context = build_context(config={"element": "e2m1"}, profile="smoke", numerical=planted, models=models,
                            claims=claims, figures=[figure],
                            artifacts=["results/summary.json", figure["png"], figure["pdf"],
                                       "results/summary.json"],
                            rerun_examples=[], seeds={"numerical": 0}, stage_seconds={"mse": 1.0})
    assert context["artifacts"] == ["results/mse-ue4m3-absmax.pdf", "results/mse-ue4m3-absmax.png",
                                    "results/summary.json"]
    assert [t["caption"].split(" ")[0] for t in context["tables"]] == ["Regions", "Where", "Relative", "The"]
    assert len(context["claims"]) == 8
    assert len(context["checks"]) == 4
    (tmp_path / "context.json").write_text(json.dumps(context))
    assert report_main(["render", "--context", "context.json", "--html", "r.html", "--tex", "r.tex",
                        "--sums", "r.SHA256SUMS"]) == 0
    html = (tmp_path / "r.html").read_text()
    for verdict, count in claims["counts"].items():  # 7 reproduced; brute force's planted floor tie inconclusive
        assert html.count(f'class="verdict verdict-{verdict.replace(" ", "-")}"') == count
    assert claims["counts"]["reproduced"] == 7
    assert 'src="http' not in html
    assert verify_sha256sums("r.SHA256SUMS") == []


def test_context_refuses_a_typed_verdict(planted):
    document = claims_document(numerical_claims(planted, SPECS, "s.json"), [])
    document["claims"][0] = {**document["claims"][0], "verdict": "contradicted"}
    with pytest.raises(ValueError, match=r"claim 'absmax_reversal': verdict 'contradicted' does not follow"):
        build_context(config={}, profile="smoke", numerical=planted, models=[], claims=document, figures=[],
                      artifacts=[], rerun_examples=[], seeds={}, stage_seconds={})
