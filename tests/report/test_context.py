"""Report contexts: rerun commands, figure entries, and assembly (the claims document re-validated: rows by the
verdict rule, checks, counts and rule; figures cited)."""

import pytest

from common.report import RULE, ImplementationCheckFailed, assemble, figure_entries, rerun_entries


def test_rerun_entries():
    entries = rerun_entries("finer_is_better", "smoke", ["results/smoke/finer_is_better/mse/e2m1-ue4m3-b4-absmax.json"])
    assert entries == [
        {"cell": "the whole report", "command": "snakemake --profile workflow/profiles/smoke "
                                                "reports/smoke/finer_is_better.html"},
        {"cell": "e2m1-ue4m3-b4-absmax.json", "command": "snakemake --profile workflow/profiles/smoke "
                                                         "results/smoke/finer_is_better/mse/e2m1-ue4m3-b4-absmax.json"},
        {"cell": "recompute every cell and compare", "command": "make verify PAPER=finer_is_better PROFILE=smoke"},
        {"cell": "verify the artifacts", "command": "sha256sum -c reports/smoke/finer_is_better.SHA256SUMS",
         "sums": "reports/smoke/finer_is_better.SHA256SUMS"},
    ]
    # the default profile: the design's command, no flag (profiles/default), the short paths
    assert [e["command"] for e in rerun_entries("winq", "default", [])] == [
        "snakemake reports/winq.html", "make verify PAPER=winq", "sha256sum -c reports/winq.SHA256SUMS"]


def test_figure_entries_put_the_pdf_beside_the_png():
    entries = figure_entries(["results/p/figures/gap-small.png"], lambda figure_id: f"caption of {figure_id}")
    assert entries == [{"id": "gap-small", "caption": "caption of gap-small", "png": "results/p/figures/gap-small.png",
                        "pdf": "results/p/figures/gap-small.pdf"}]


def test_assemble_keeps_the_claims_document_and_cites_figures(claims_doc):
    figures = figure_entries(["f/x.png"], str)
    context = assemble(paper={"key": "p"}, figures=figures, tables=[], claims=claims_doc, provenance={}, rerun=[],
                       artifacts=["a.json", "a.json"])
    assert context["artifacts"] == ["a.json", "f/x.pdf", "f/x.png"]
    assert context["claims"] == claims_doc["claims"]
    assert context["checks"] == claims_doc["checks"]
    assert context["rule"] == RULE
    assert context["counts"] == {"reproduced": 2, "contradicted": 1, "inconclusive": 1,
                                 "not testable at this scale": 1}


def _assemble(claims):
    return assemble(paper={}, figures=[], tables=[], claims=claims, provenance={}, rerun=[], artifacts=[])


def test_assemble_refuses_a_verdict_that_does_not_follow(claims_doc):
    rows = claims_doc["claims"]
    inconclusive = next(i for i, row in enumerate(rows) if row["verdict"] == "inconclusive")
    typed = [*rows[:inconclusive], {**rows[inconclusive], "verdict": "reproduced"}, *rows[inconclusive + 1:]]
    with pytest.raises(ValueError, match="verdict 'reproduced' does not follow from the estimate"):
        _assemble({**claims_doc, "claims": typed})
    with pytest.raises(ValueError, match="verdict 'looks fine' is not one of"):
        _assemble({**claims_doc, "claims": [{**rows[0], "verdict": "looks fine"}]})
    with pytest.raises(ValueError, match="claim row 'reversal_absmax' has no 'prediction'"):
        _assemble({**claims_doc, "claims": [{k: v for k, v in rows[0].items() if k != "prediction"}]})


def test_assemble_refuses_a_failed_check(claims_doc):
    checks = [{**claims_doc["checks"][0], "passed": False}, *claims_doc["checks"][1:]]
    with pytest.raises(ImplementationCheckFailed, match="closed_form_mse"):
        _assemble({**claims_doc, "checks": checks})


def test_assemble_refuses_an_old_or_stale_document(claims_doc):
    with pytest.raises(ValueError, match=r"claims must be a claims document .* got list"):
        _assemble(claims_doc["claims"])
    with pytest.raises(ValueError, match="the claims document has no 'checks', 'counts'"):
        _assemble({"rule": RULE, "claims": []})
    with pytest.raises(ValueError, match=r"counts .* but its rows give"):
        _assemble({**claims_doc, "counts": {**claims_doc["counts"], "reproduced": 5}})
    with pytest.raises(ValueError, match="states the rule 'two of three'"):
        _assemble({**claims_doc, "rule": "two of three"})


def test_training_seconds_reads_the_base_models_metadata(tmp_path):
    from common.report import training_seconds

    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "lowbit_metadata.json").write_text('{"training": {"seconds": 2621.6}}')
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "lowbit_metadata.json").write_text('{"source": "converted"}')
    files = [tmp_path / "small" / "lowbit_metadata.json", tmp_path / "ext" / "lowbit_metadata.json"]
    assert training_seconds(files) == {"pretraining small": 2621.6}
