"""``python -m common.report render|pdf|index`` in-process: offline HTML, LaTeX, verifiable SHA256SUMS, errors."""

import hashlib
import json
import re
import shutil

import matplotlib
import pytest

from common.report import assemble, provenance, verify_sha256sums
from common.report.__main__ import CONTEXT_KEYS, main

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PNG_MAGIC = "iVBORw0KGgo"  # base64 of the PNG signature


@pytest.fixture
def workdir(tmp_path, monkeypatch, claims_doc):
    """A repository-like folder as cwd: a figure (PNG + PDF), an artifact and a context under ``results/``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "reports").mkdir()
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [1, 0])
    fig.savefig("results/fig.png", dpi=20)
    fig.savefig("results/fig.pdf")
    plt.close(fig)
    (tmp_path / "results" / "summary.json").write_text('{"mse": 0.25}\n')
    context = assemble(
        paper={"key": "demo", "title": "Demo & paper", "citation": "A. Author 2026", "question": "Finer?",
               "method": "Blocks."},
        figures=[{"id": "mse", "caption": "MSE vs sigma", "png": "results/fig.png", "pdf": "results/fig.pdf"}],
        tables=[{"caption": "Gaps", "columns": ["block", "gap"], "rows": [[4, "0.270"], [8, "0.300"]]}],
        claims=claims_doc,
        provenance=provenance({"x": 1}, seeds={"data": 0}, stage_seconds={"mse": 0.5}, root=tmp_path),
        rerun=[{"cell": "b4", "command": "snakemake results/demo/b4.json"}],
        artifacts=["results/summary.json"])
    (tmp_path / "results" / "context.json").write_text(json.dumps(context))
    return tmp_path


RENDER = ["render", "--context", "results/context.json", "--html", "reports/demo.html", "--tex", "reports/demo.tex",
          "--sums", "reports/demo.SHA256SUMS"]


def test_render_writes_offline_html_latex_and_sums(workdir):
    assert main(RENDER) == 0
    html = (workdir / "reports" / "demo.html").read_text()
    assert 'src="http' not in html
    assert 'href="http' not in html
    images = re.findall(r'<img src="([^"]*)"', html)
    assert len(images) == 1
    assert images[0].startswith("data:image/png;base64," + PNG_MAGIC)
    assert "Demo &amp; paper" in html
    assert html.count('<td class="verdict verdict-') == 5  # one per claim row
    tex = (workdir / "reports" / "demo.tex").read_text()
    assert r"Demo \& paper" in tex
    assert "{../results/fig.pdf}" in tex  # relative to the .tex folder


def test_a_profile_notice_comes_first_on_every_page(workdir):
    """``--notice`` (the workflow's report_notice): under the title, above the citation, in the HTML and the LaTeX,
    escaped, and above the index's table; without it, no notice at all."""
    notice = "Stand-in profile: every model is a link to the smoke model <0.5M> & one seed"
    assert main([*RENDER, "--notice", notice]) == 0
    html = (workdir / "reports" / "demo.html").read_text()
    expected = ('<p class="notice"><strong>Note.</strong> Stand-in profile: every model is a link to the smoke model '
                "&lt;0.5M&gt; &amp; one seed</p>")
    assert html.index("<h1>Demo &amp; paper</h1>") < html.index(expected) < html.index("A. Author 2026")
    tex = (workdir / "reports" / "demo.tex").read_text()
    assert r"\textbf{Note.} Stand-in profile: every model is a link to the smoke model" in tex
    assert tex.index(r"\maketitle") < tex.index(r"\textbf{Note.}") < tex.index("A. Author 2026")
    assert main(["index", "--contexts", "results/context.json", "--reports", "reports/demo.html", "--notice", notice,
                 "--out", "reports/index.html"]) == 0
    index = (workdir / "reports" / "index.html").read_text()
    assert index.index("<strong>Note.</strong> Stand-in profile") < index.index("<table>")
    assert main(RENDER) == 0
    assert "Note." not in (workdir / "reports" / "demo.html").read_text()
    assert "Note." not in (workdir / "reports" / "demo.tex").read_text()


def test_sums_cover_artifacts_context_html_and_tex(workdir):
    assert main(RENDER) == 0
    lines = (workdir / "reports" / "demo.SHA256SUMS").read_text().splitlines()
    names = [line.split("  ", 1)[1] for line in lines]
    assert names == sorted(["results/fig.png", "results/fig.pdf", "results/summary.json", "results/context.json",
                            "reports/demo.html", "reports/demo.tex"])
    assert lines[names.index("results/summary.json")].split("  ")[0] == hashlib.sha256(b'{"mse": 0.25}\n').hexdigest()
    assert verify_sha256sums("reports/demo.SHA256SUMS") == []
    (workdir / "results" / "summary.json").write_text("{}")
    assert verify_sha256sums("reports/demo.SHA256SUMS") == ["results/summary.json"]


@pytest.mark.parametrize("key", CONTEXT_KEYS)
def test_context_missing_a_key_exits_2_naming_it(workdir, key, capsys):
    context = json.loads((workdir / "results" / "context.json").read_text())
    del context[key]
    (workdir / "results" / "context.json").write_text(json.dumps(context))
    assert main(RENDER) == 2
    assert f"context 'results/context.json' has no '{key}'" in capsys.readouterr().err
    assert not (workdir / "reports" / "demo.html").exists()
    assert not (workdir / "reports" / "demo.SHA256SUMS").exists()


def test_missing_artifact_exits_2_naming_it(workdir, capsys):
    context = json.loads((workdir / "results" / "context.json").read_text())
    context["artifacts"].append("results/gone.json")
    (workdir / "results" / "context.json").write_text(json.dumps(context))
    assert main(RENDER) == 2
    assert "cannot checksum 'results/gone.json'" in capsys.readouterr().err
    assert not (workdir / "reports" / "demo.SHA256SUMS").exists()


def test_index_links_relative_with_verdict_counts(workdir):
    assert main(RENDER) == 0
    (workdir / "site").mkdir()
    assert main(["index", "--contexts", "results/context.json", "--reports", "reports/demo.html",
                 "--out", "site/index.html"]) == 0
    index = (workdir / "site" / "index.html").read_text()
    assert re.findall(r'href="([^"]*)"', index) == ["../reports/demo.html"]
    row = re.search(r"<tr><td><a [^>]*>Demo &amp; paper</a></td>(.*)</tr>", index).group(1)
    # reproduced, contradicted, inconclusive, not testable (counted apart), of those outside the regime, the checks
    assert re.findall(r'<td class="count">([^<]+)</td>', row) == ["2", "1", "1", "1", "0", "3 of 4", "0", "3 of 3"]
    assert "not testable at this scale</th>" in index


def test_each_profile_index_links_the_other_profiles_built(workdir):
    """reports/index.html (default profile) and reports/<profile>/index.html find each other once both exist."""
    assert main(["index", "--out", "reports/index.html"]) == 0
    (workdir / "reports" / "smoke").mkdir()
    assert main(["index", "--profile", "smoke", "--out", "reports/smoke/index.html"]) == 0
    smoke = (workdir / "reports" / "smoke" / "index.html").read_text()
    assert "Profile <strong>smoke</strong>" in smoke
    assert re.findall(r'href="([^"]*)"', smoke) == ["../index.html"]
    (workdir / "reports" / "full").mkdir()
    assert main(["index", "--profile", "full", "--out", "reports/full/index.html"]) == 0
    assert re.findall(r'href="([^"]*)"', (workdir / "reports" / "full" / "index.html").read_text()) == [
        "../index.html", "../smoke/index.html"]
    assert main(["index", "--out", "reports/index.html"]) == 0  # the default's, rendered again, lists both
    assert re.findall(r'href="([^"]*)"', (workdir / "reports" / "index.html").read_text()) == [
        "full/index.html", "smoke/index.html"]


def test_index_without_reports_and_mismatched_lists(workdir, capsys):
    assert main(["index", "--out", "reports/index.html"]) == 0
    assert "make reports" in (workdir / "reports" / "index.html").read_text()
    # one context, two reports: refused with both counts named, nothing is written
    assert main(["index", "--contexts", "results/context.json", "--reports", "a.html", "b.html",
                 "--out", "site.html"]) == 2
    assert "--contexts and --reports must pair up: 1 contexts, 2 reports" in capsys.readouterr().err
    assert not (workdir / "site.html").exists()


def test_pdf_without_latexmk_exits_2_naming_it(workdir, monkeypatch, capsys):
    assert main(RENDER) == 0
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["pdf", "--tex", "reports/demo.tex"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: latexmk is not installed")
    assert not (workdir / "reports" / "demo.pdf").exists()


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["publish"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'publish'" in capsys.readouterr().err
