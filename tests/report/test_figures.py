"""Report figures' captions: kinds and details of figure ids, the import-time check of a paper's figures module,
and Snakemake's caption template generated from the captions (rendered for real captions in
tests/papers/test_report_tails.py)."""

from types import ModuleType

import jinja2
import pytest

from common.report.figures import (
    caption_template,
    caption_template_path,
    check_figures,
    figure_kind,
    lookup_caption,
    write_caption_template,
)

CAPTIONS = {"spectra": "Spectra.", "spectra-winq": "Spectra with WinQ.", "gap": "Gap |x| of *a* b_c `d`."}


def plot():
    raise AssertionError("never drawn")


@pytest.mark.parametrize(("figure_id", "kind"), [
    ("spectra", "spectra"), ("spectra-winq", "spectra-winq"), ("spectra-small", "spectra"),
    ("spectra-winq-w2", "spectra-winq"), ("gap-small-v2", "gap"),
])
def test_figure_kind_is_the_longest_matching_kind(figure_id, kind):
    assert figure_kind(CAPTIONS, figure_id) == kind


@pytest.mark.parametrize("figure_id", ["", "spectrum", "spectra_winq", "gaps", "Gap-x", "-gap"])
def test_figure_of_no_kind_is_named_with_the_valid_kinds(figure_id):
    with pytest.raises(ValueError, match=rf"unknown figure id {figure_id!r}; valid: spectra, spectra-winq, gap "
                                         r"\(each optionally -<detail>\)"):
        figure_kind(CAPTIONS, figure_id)


def test_lookup_caption_prefixes_the_detail():
    assert lookup_caption(CAPTIONS, "spectra") == "Spectra."
    assert lookup_caption(CAPTIONS, "spectra-winq") == "Spectra with WinQ."
    assert lookup_caption(CAPTIONS, "gap-small-v2") == "small-v2: Gap |x| of *a* b_c `d`."


def test_check_figures_passes_when_all_three_agree():
    check_figures("papers.p.figures", ("spectra", "spectra-winq", "gap"), dict.fromkeys(CAPTIONS, plot), CAPTIONS)


def test_check_figures_names_what_is_missing_and_what_is_unknown():
    plots = {"spectra": plot, "loss": plot}
    with pytest.raises(RuntimeError, match=r"^papers.p.figures: PLOTS and CAPTIONS must cover exactly "
                                           r"settings.FIGURES \(spectra, spectra-winq, gap\): PLOTS lacks gap, "
                                           r"spectra-winq; PLOTS has unknown loss$"):
        check_figures("papers.p.figures", ("spectra", "spectra-winq", "gap"), plots, CAPTIONS)
    with pytest.raises(RuntimeError, match=r"CAPTIONS lacks fit$"):
        check_figures("papers.p.figures", ("spectra", "spectra-winq", "gap", "fit"),
                      dict.fromkeys(["spectra", "spectra-winq", "gap", "fit"], plot), CAPTIONS)


@pytest.mark.parametrize(("png", "expected"), [
    ("results/p/figures/spectra.png", "``spectra``\n    Spectra.\n\n"),
    ("results/p/figures/spectra-winq.png", "``spectra-winq``\n    Spectra with WinQ.\n\n"),
    ("results/p/figures/spectra-w2.png", "``spectra-w2``\n    w2: Spectra.\n\n"),
    ("results/p/figures/gap-small.png", "``gap-small``\n    small: Gap \\|x\\| of \\*a\\* b\\_c \\`d\\`.\n\n"),
    ("results/p/figures/loss.png", ""),
])
def test_caption_template_gives_the_caption_of_each_png_as_rst(png, expected):
    """A definition list: per PNG of the figures job (Snakemake renders one caption a job), its id and caption."""
    template = caption_template("papers.p.figures", CAPTIONS)
    assert template.startswith("{# Generated from papers.p.figures.CAPTIONS by common.report.figures.")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # as Snakemake renders captions

    def render(pngs):
        output = type("Output", (), {"png": pngs})
        return env.from_string(template).render(snakemake=type("Snakemake", (), {"output": output}))

    assert render([png]) == expected
    assert render([png, "results/p/figures/spectra.png"]) == f"{expected}``spectra``\n    Spectra.\n\n"


@pytest.mark.parametrize("markup", ["{{", "{%", "{#"])
def test_caption_template_refuses_jinja_markup(markup):
    with pytest.raises(ValueError, match=r"papers.p.figures.CAPTIONS\['gap'\] holds Jinja markup"):
        caption_template("papers.p.figures", {"gap": f"Gap {markup} x."})


def test_write_caption_template_beside_the_figures_module(tmp_path):
    module = ModuleType("papers.p.figures")
    module.__file__ = str(tmp_path / "figures.py")
    module.CAPTIONS = CAPTIONS
    path = write_caption_template(module)
    assert path == caption_template_path(module) == tmp_path / "report" / "figure.rst"
    assert path.read_text() == caption_template("papers.p.figures", CAPTIONS)
