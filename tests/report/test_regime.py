"""common.report.regime: specs read from config with named errors, inside/outside on planted values (the bounds
inclusive, open ends, a missing measurement), ratios, and a claim that requires a quantity made not testable exactly
when the quantity is outside its bounds, both ways, its estimate kept; the document round trip and the rendered
card."""

import pytest

from common.report import render_html, render_index, render_latex, setup_rows
from common.report.claims import VERDICTS, ClaimSpec, Prediction, claims_document, judge
from common.report.context import validated_claims
from common.report.regime import RegimeRow, outside_regime, regime_rows, regime_specs
from common.uncertainty import Estimate

TRAVEL = {"quantity": "travel per period / bin width", "definition": "sum of lr over a period / median bin width",
          "paper": [10, 50], "paper_source": "lr 2e-5 over 60k steps; bin width 0.03-0.1 (assumed)",
          "bounds": [3, None], "bound_source": "a weight must be able to cross a bin once a period"}
SHARE = {"quantity": "quantized share of the parameters", "definition": "parameters in quantized linears / all",
         "paper": 0.79, "paper_source": "LLaMA-3.2-1B, tied embeddings", "bounds": [0.6, 1.0],
         "bound_source": "most of the network is quantized, as in the paper"}


def _specs():
    return regime_specs({"travel": TRAVEL, "share": SHARE})


def test_specs_from_config_name_their_errors():
    specs = _specs()
    assert specs["travel"].paper == (10.0, 50.0)
    assert specs["share"].paper == (0.79, 0.79)
    assert specs["travel"].bounds == (3.0, None)
    assert specs["travel"].paper_text() == "10–50"
    assert specs["share"].paper_text() == "0.79"
    assert specs["travel"].bounds_text() == "$\\ge$ 3"
    assert specs["share"].bounds_text() == "[0.6, 1]"
    with pytest.raises(ValueError, match=r"regime\.travel: missing \['bound_source'\], unknown \['bond'\]"):
        regime_specs({"travel": {**{k: v for k, v in TRAVEL.items() if k != "bound_source"}, "bond": 1}})
    with pytest.raises(ValueError, match=r"regime\.travel: bounds \[null, null\]"):
        regime_specs({"travel": {**TRAVEL, "bounds": [None, None]}})
    with pytest.raises(ValueError, match=r"regime\.share: bounds must have low < high, got \[1\.0, 0\.6\]"):
        regime_specs({"share": {**SHARE, "bounds": [1.0, 0.6]}})
    with pytest.raises(ValueError, match=r"regime\.travel: the paper's value .* got \[50\.0, 10\.0\]"):
        regime_specs({"travel": {**TRAVEL, "paper": [50, 10]}})
    with pytest.raises(ValueError, match=r"regime\.travel: .*a number or a pair"):
        regime_specs({"travel": {**TRAVEL, "paper": [1, 2, 3]}})


@pytest.mark.parametrize(("ours", "inside"), [
    (3.0, True),          # the bound itself is inside
    (2.999, False),
    (1e6, True),          # an open upper end
    (None, False),        # not measured
    (float("nan"), False),
])
def test_inside_on_planted_values(ours, inside):
    row = RegimeRow(_specs()["travel"], ours, "no checkpoint" if ours is None else "")
    assert row.inside is inside
    assert (row.outside() == "") is inside


def test_ratio_and_outside_text():
    specs = _specs()
    row = RegimeRow(specs["travel"], 0.08)
    assert row.ratio() == pytest.approx((0.008, 0.0016))
    assert row.ratio_text() == "0.0016 – 0.008"
    assert row.outside() == "travel per period / bin width is 0.08, outside $\\ge$ 3 (the paper's 10–50)"
    assert RegimeRow(specs["share"], 0.395).ratio_text() == "0.5"
    assert RegimeRow(specs["share"], None, "no model").outside() == (
        "quantized share of the parameters is not measured (no model), outside [0.6, 1] (the paper's 0.79)")
    assert RegimeRow(specs["share"], None).ratio_text() == "—"


def test_a_value_the_paper_does_not_report():
    """``paper: null``: the card says so, has no ratio, and the bounds alone decide (a premise the paper states
    without a number)."""
    spec = regime_specs({"stall": {**SHARE, "paper": None, "bounds": [None, 0.5]}})["stall"]
    assert (spec.paper, spec.paper_text()) == (None, "not reported")
    row = RegimeRow(spec, 0.9)
    assert (row.ratio(), row.ratio_text(), row.inside) == (None, "—", False)
    assert row.outside() == "quantized share of the parameters is 0.9, outside $\\le$ 0.5 (the paper gives no value)"
    assert RegimeRow(spec, 0.2).inside
    assert RegimeRow.from_dict(row.to_dict()) == row
    assert row.to_dict()["paper"] is None


def test_rows_need_every_measurement_and_nothing_else():
    specs = _specs()
    rows = regime_rows(specs, {"travel": 12, "share": 0.7}, {"share": "tied embeddings"})
    assert [(r.spec.id, r.ours, r.note) for r in rows] == [("travel", 12.0, ""), ("share", 0.7, "tied embeddings")]
    with pytest.raises(ValueError, match=r"missing \['share'\], unknown \['sahre'\]"):
        regime_rows(specs, {"travel": 12, "sahre": 0.7})
    with pytest.raises(ValueError, match=r"notes for unknown quantities \['x'\]"):
        regime_rows(specs, {"travel": 12, "share": 0.7}, {"x": "?"})


def _claim(requires):
    spec = ClaimSpec("speedup", "WinQ converges faster", "WinQ reaches the baseline's loss sooner", "Fig. 4: 2x",
                     Prediction("steps ratio", "above", 1.0, "the paper"), requires)
    return judge(spec, Estimate(1.4, 1.2, 1.6, "planted"), detail="planted")


@pytest.mark.parametrize(("travel", "share", "expected", "why"), [
    (12.0, 0.7, "reproduced", ""),
    (0.08, 0.7, VERDICTS[3], "travel per period / bin width is 0.08, outside $\\ge$ 3 (the paper's 10–50): "
                             "interpolation acts only if a weight can cross a bin"),
    (12.0, 0.33, "reproduced", ""),   # the claim does not require the share
])
def test_a_claim_is_not_testable_exactly_when_a_required_quantity_is_outside(travel, share, expected, why):
    rows = regime_rows(_specs(), {"travel": travel, "share": share})
    claim = _claim({"travel": "interpolation acts only if a weight can cross a bin"})
    document = claims_document([claim], [], rows)
    row = document["claims"][0]
    assert (row["verdict"], row["outside_regime"]) == (expected, why)
    assert row["estimate"]["low"] == 1.2
    assert row["estimate_text"]
    assert document["outside_regime"] == (1 if why else 0)
    assert [r["id"] for r in document["regime"]] == ["travel", "share"]
    assert validated_claims(document) == document  # the round trip re-judges against the card it carries


def test_a_document_whose_card_moved_is_refused():
    rows = regime_rows(_specs(), {"travel": 0.08, "share": 0.7})
    document = claims_document([_claim({"travel": "needed"})], [], rows)
    document["regime"][0]["ours"] = 12.0  # the card now says inside, the row still says outside
    with pytest.raises(ValueError, match=r"claim 'speedup' states .* outside the regime"):
        validated_claims(document)


def test_a_required_quantity_the_card_lacks_is_named():
    rows = regime_rows(_specs(), {"travel": 12, "share": 0.7})
    with pytest.raises(ValueError, match=r"claim 'speedup' requires regime quantities \['lr'\]"):
        claims_document([_claim({"lr": "needed"})], [], rows)
    with pytest.raises(ValueError, match=r"\['travel'\] that the regime card does not have \(it is empty\)"):
        outside_regime({"travel": "needed"}, [], "speedup")


def test_the_card_renders_and_the_index_counts_it_apart(context, tmp_path):
    rows = regime_rows(_specs(), {"travel": 0.08, "share": 0.7})
    document = claims_document([_claim({"travel": "needed"})], [], rows)
    page = tmp_path / "demo.html"
    render_html({**context, "claims": document["claims"], "counts": document["counts"], "regime": document["regime"],
                 "coverage": document["coverage"], "coverage_counts": {"claims": 0, "tested": 0, "not_tested": 0,
                                                                       "elsewhere": 0},
                 "outside_regime": document["outside_regime"],
                 "setup": [{"aspect": "Model", "paper": "LLaMA-3.2-1B", "ours": "tiny (3.1M)"}]}, page)
    html = page.read_text()
    assert 'id="regime-travel"' in html
    assert "Outside the paper's regime:" in html
    assert "1 is so because a regime quantity" in html
    assert "<th>Model</th><td>LLaMA-3.2-1B</td><td>tiny (3.1M)</td>" in html
    counts = document["counts"]
    render_index([{"title": "WinQ", "href": "winq.html", "counts": counts, "outside_regime": 1, "tested": 1,
                   "listed": 1, "findings": 0, "checks": "0 of 0"}],
                 tmp_path / "index.html")
    assert "outside the paper's regime</th>" in (tmp_path / "index.html").read_text()


def test_the_latex_claims_name_the_quantities_and_give_each_reason_once(context, tmp_path):
    """A row outside the regime names the quantity, its value and bounds, and points to the card, where each
    reason a row requires a quantity is given once with the rows that give it: a long reason repeated in every
    row would make rows taller than a page (which longtable cannot break)."""
    reason = "interpolation acts only if a weight can cross a bin"
    rows = regime_rows(_specs(), {"travel": 0.08, "share": 0.7})
    document = claims_document([_claim({"travel": reason})], [], rows)
    document["claims"].append({**document["claims"][0], "id": "speedup_w2"})
    render_latex({**context, "claims": document["claims"], "counts": document["counts"], "regime": document["regime"],
                  "coverage": [], "coverage_counts": {"claims": 0, "tested": 0, "not_tested": 0, "elsewhere": 0},
                  "outside_regime": 2}, tmp_path / "demo.tex")
    tex = (tmp_path / "demo.tex").read_text()
    assert tex.count("\\textit{Outside the paper's regime:} travel per period /\\allowbreak{} bin width $0.08$, "
                     "outside $\\ge$ $3$ (why each is required: Appendix B)") == 2
    assert tex.count(reason) == 1
    assert "\\texttt{speedup}, \\texttt{speedup\\_\\allowbreak{}w2}" in tex


def test_setup_rows_pair_the_aspects():
    rows = setup_rows({"Model": "LLaMA-3.2-1B", "Steps": "240k"}, {"Steps": "640", "Model": "tiny"})
    assert rows == [{"aspect": "Model", "paper": "LLaMA-3.2-1B", "ours": "tiny"},
                    {"aspect": "Steps", "paper": "240k", "ours": "640"}]
    with pytest.raises(ValueError, match=r"ours lacks \['Steps'\], the paper's lacks \['Seeds'\]"):
        setup_rows({"Model": "a", "Steps": "b"}, {"Model": "c", "Seeds": "3"})
    with pytest.raises(ValueError, match=r"setup aspects \['Model'\] are empty"):
        setup_rows({"Model": "a"}, {"Model": " "})


def test_integers_are_written_in_full():
    spec = regime_specs({"seq": {**SHARE, "paper": 2048, "bounds": [128, None]}})["seq"]
    assert (spec.paper_text(), spec.bounds_text()) == ("2048", "$\\ge$ 128")
    assert RegimeRow(spec, 256).to_dict()["ours_text"] == "256"
    assert RegimeRow(spec, 0.125).outside() == (
        "quantized share of the parameters is 0.125, outside $\\ge$ 128 (the paper's 2048)")
