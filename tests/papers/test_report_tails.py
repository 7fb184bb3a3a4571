"""The report tail every paper shares: ``settings.KEY`` is the paper's folder and config key, ``settings.FIGURES``
is what ``figures.PLOTS`` draws and ``figures.CAPTIONS`` describes, Snakemake's caption template is generated from
the captions (and shows the same caption as the paper's own report), and every profile's merged config satisfies
the schema."""

import copy
import importlib
import io
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import jinja2
import matplotlib
import pytest
import yaml
from docutils import nodes
from docutils.core import publish_doctree
from snakemake.utils import validate

matplotlib.use("Agg")

from common.report.figures import caption_template, caption_template_path

ROOT = Path(__file__).resolve().parents[2]
PAPERS = sorted(p.parent.name for p in ROOT.glob("papers/*/rules.smk"))
REGENERATE = (".venv/bin/python -c 'from common.report.figures import write_caption_template; "
              "from papers.{paper} import figures; write_caption_template(figures)'")


def settings(paper: str) -> ModuleType:
    return importlib.import_module(f"papers.{paper}.settings")


def figures(paper: str) -> ModuleType:
    return importlib.import_module(f"papers.{paper}.figures")


def raw_config(paper: str) -> dict:
    return yaml.safe_load((ROOT / "papers" / paper / "config.yaml").read_text())


def snakemake_caption(paper: str, figure_ids: list[str]) -> nodes.document:
    """The caption Snakemake's report shows for the figures job that draws ``figure_ids``: the template rendered as
    Snakemake does (Jinja with ``trim_blocks`` and ``lstrip_blocks``, ``snakemake.output.png`` the job's PNGs),
    parsed as reStructuredText."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    output = SimpleNamespace(png=[f"results/{paper}/figures/{figure_id}.png" for figure_id in figure_ids])
    rst = env.from_string(caption_template_path(figures(paper)).read_text()).render(
        snakemake=SimpleNamespace(output=output))
    return publish_doctree(rst, settings_overrides={"warning_stream": io.StringIO()})


def definitions(doctree: nodes.document) -> list[tuple[str, str]]:
    """The (term, definition) pairs of a caption's definition list."""
    return [(item.children[0].astext(), item.children[1].astext())
            for item in doctree.findall(nodes.definition_list_item)]


def test_every_paper_is_here():
    assert PAPERS == ["finer_is_better", "maxwindow_hif8", "microscaling_limits", "winq"]


@pytest.mark.parametrize("paper", PAPERS)
def test_key_is_the_folder_and_the_config_section(paper):
    assert paper == settings(paper).KEY
    assert list(raw_config(paper)) == [paper]


@pytest.mark.parametrize("paper", PAPERS)
def test_plots_and_captions_cover_exactly_the_figures(paper):
    kinds = settings(paper).FIGURES
    assert len(set(kinds)) == len(kinds)
    assert list(figures(paper).PLOTS) == list(kinds)
    assert list(figures(paper).CAPTIONS) == list(kinds)
    assert all(callable(plot) for plot in figures(paper).PLOTS.values())
    assert all(text.endswith(".") for text in figures(paper).CAPTIONS.values())


@pytest.mark.parametrize("paper", PAPERS)
def test_caption_template_is_generated_from_the_captions(paper):
    module = figures(paper)
    assert caption_template_path(module).read_text() == caption_template(module.__name__, module.CAPTIONS), (
        f"papers/{paper}/report/figure.rst is stale; regenerate it: {REGENERATE.format(paper=paper)}")


@pytest.mark.parametrize("paper", PAPERS)
def test_snakemake_shows_the_reports_caption(paper):
    """Each figure of the job by its id, with the caption the paper's own report gives it."""
    module = figures(paper)
    figure_ids = [f"{kind}{detail}" for kind in module.CAPTIONS for detail in ("", "-small_v2", "-ue4m3-b16")]
    for ids in [*([figure_id] for figure_id in figure_ids), figure_ids]:
        doctree = snakemake_caption(paper, ids)
        assert not list(doctree.findall(nodes.system_message)), (ids, doctree.pformat())
        assert definitions(doctree) == [(figure_id, module.caption(figure_id)) for figure_id in ids]


@pytest.mark.parametrize("paper", PAPERS)
def test_figure_rules_use_the_caption_template_and_no_caption_file_is_stale(paper):
    """The claims' caption in the paper's rules, the figures' through figure_pngs (workflow/rules/common.smk), each
    caption file of the paper's report/ used."""
    rules = (ROOT / "papers" / paper / "rules.smk").read_text()
    assert set(re.findall(r'caption="(report/[^"]+)"', rules)) == {"report/claims.rst"}
    assert len(re.findall(r"\bpng=figure_pngs\(", rules)) == 1
    shared = (ROOT / "workflow/rules/common.smk").read_text()
    assert re.findall(r'"caption": "(report/[^"]+)"', shared) == ["report/figure.rst"]  # figure_pngs' marks
    assert {f"report/{p.name}" for p in (ROOT / "papers" / paper / "report").glob("*.rst")} == {
        "report/figure.rst", "report/claims.rst"}


@pytest.mark.parametrize(("paper", "profile"), [(p, profile) for p in PAPERS
                                                for profile in raw_config(p)[p]["profiles"]])
def test_every_profiles_merged_config_satisfies_the_schema(paper, profile):
    """What ``paper_config`` (workflow/rules/common.smk) checks when Snakemake loads the paper."""
    schema = str(ROOT / "papers" / paper / "config.schema.yaml")
    raw = raw_config(paper)[paper]
    validate(copy.deepcopy(raw), schema)
    validate(settings(paper).profile_config(raw, profile), schema)
