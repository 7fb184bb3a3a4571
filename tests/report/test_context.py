"""Report contexts: rerun commands, figure entries, and assembly (claims re-validated, figures cited)."""

import pytest

from common.report import Claim, assemble, figure_entries, rerun_entries


def test_rerun_entries():
    entries = rerun_entries("finer_is_better", "smoke", ["results/finer_is_better/mse/e2m1-ue4m3-b4-absmax.json"])
    assert entries == [
        {"cell": "the whole report", "command": "snakemake --profile workflow/profiles/smoke "
                                                "reports/finer_is_better.html"},
        {"cell": "e2m1-ue4m3-b4-absmax.json", "command": "snakemake --profile workflow/profiles/smoke "
                                                         "results/finer_is_better/mse/e2m1-ue4m3-b4-absmax.json"},
        {"cell": "verify the artifacts", "command": "sha256sum -c reports/finer_is_better.SHA256SUMS"},
    ]


def test_figure_entries_put_the_pdf_beside_the_png():
    entries = figure_entries(["results/p/figures/gap-small.png"], lambda figure_id: f"caption of {figure_id}")
    assert entries == [{"id": "gap-small", "caption": "caption of gap-small", "png": "results/p/figures/gap-small.png",
                        "pdf": "results/p/figures/gap-small.pdf"}]


def test_assemble_cites_figures_and_refuses_a_typed_verdict():
    claim = Claim("c", "statement", "paper", "measured", "reproduced", "rule", ("a.json",)).to_dict()
    figures = figure_entries(["f/x.png"], str)
    context = assemble(paper={"key": "p"}, figures=figures, tables=[], claims=[claim], provenance={}, rerun=[],
                       artifacts=["a.json", "a.json"])
    assert context["artifacts"] == ["a.json", "f/x.pdf", "f/x.png"]
    with pytest.raises(ValueError, match="verdict 'looks fine' is not one of"):
        assemble(paper={}, figures=[], tables=[], claims=[{**claim, "verdict": "looks fine"}], provenance={},
                 rerun=[], artifacts=[])


def test_training_seconds_reads_the_base_models_metadata(tmp_path):
    from common.report import training_seconds

    (tmp_path / "small").mkdir()
    (tmp_path / "small" / "lowbit_metadata.json").write_text('{"training": {"seconds": 2621.6}}')
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "lowbit_metadata.json").write_text('{"source": "converted"}')
    files = [tmp_path / "small" / "lowbit_metadata.json", tmp_path / "ext" / "lowbit_metadata.json"]
    assert training_seconds(files) == {"pretraining small": 2621.6}
