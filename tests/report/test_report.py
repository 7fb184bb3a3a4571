"""Report machinery: verdict rule, provenance, checksums verified by sha256sum, offline HTML, LaTeX, index."""

import re
import shutil
import subprocess

import matplotlib
import pytest

from common.report import (
    VERDICTS,
    Claim,
    config_hash,
    git_state,
    provenance,
    render_html,
    render_index,
    render_latex,
    verdict,
    verify_sha256sums,
    write_sha256sums,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def test_verdict_rule():
    assert verdict([True, True]) == "reproduced"
    assert verdict([True, False]) == "partly"
    assert verdict([False, False]) == "not reproduced"
    assert verdict([]) == "not testable at this scale"
    assert set(VERDICTS) == {"reproduced", "partly", "not reproduced", "not testable at this scale"}
    with pytest.raises(ValueError, match="verdict 'yes' is not one of"):
        Claim("c1", "s", "p", "m", "yes", "r")


def test_provenance_fields():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    state = git_state()
    assert state["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", state["commit"])
    record = provenance({"x": 1}, seeds={"data": 0}, stage_seconds={"train": 1.5})
    assert record["packages"]["torch"].startswith("2.13.0")
    assert record["seeds"] == {"data": 0}
    assert record["platform"]["cpus"] >= 1


def test_checksums_verify_with_sha256sum(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.json").write_text("{}")
    (tmp_path / "b.txt").write_text("b")
    write_sha256sums(tmp_path / "SUMS", ["b.txt", "results/a.json", "b.txt"], root=tmp_path)
    assert len((tmp_path / "SUMS").read_text().splitlines()) == 2
    assert verify_sha256sums(tmp_path / "SUMS", root=tmp_path) == []
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "-c", "SUMS"], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "b.txt").write_text("changed")
    assert verify_sha256sums(tmp_path / "SUMS", root=tmp_path) == ["b.txt"]
    with pytest.raises(ValueError, match=r"cannot checksum 'missing\.json'"):
        write_sha256sums(tmp_path / "SUMS2", ["missing.json"], root=tmp_path)


@pytest.fixture
def context(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    fig.savefig(tmp_path / "f.png")
    fig.savefig(tmp_path / "f.pdf")
    plt.close(fig)
    claim = Claim("c1", "MSE < 1 & ratio 50%", "0.7", "0.3", verdict([True]), "measured < paper", ("x.json",))
    return {
        "paper": {"key": "demo", "title": "Demo <paper>", "citation": "A. Author, 2026",
                  "question": "Is finer better?", "method": "Block quantization."},
        "figures": [{"id": "mse", "caption": "MSE vs sigma", "png": str(tmp_path / "f.png"),
                     "pdf": str(tmp_path / "f.pdf")}],
        "tables": [{"caption": "Gaps", "columns": ["block", "gap_%"], "rows": [[4, "0.27"]]}],
        "claims": [claim],
        "provenance": provenance({"x": 1}, seeds={"data": 0}, stage_seconds={"train": 1.5}),
        "rerun": [{"cell": "block 4", "command": "snakemake results/demo/b4.json"}],
    }


def test_html_is_self_contained(context, tmp_path):
    render_html(context, tmp_path / "demo.html")
    html = (tmp_path / "demo.html").read_text()
    links = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert links
    assert all(link.startswith("data:image/png;base64,") or link.startswith("#") for link in links)
    assert "Demo &lt;paper&gt;" in html  # escaped
    assert 'class="verdict-reproduced"' in html
    assert "MSE &lt; 1 &amp; ratio 50%" in html


def test_latex_escapes_and_links_figures(context, tmp_path):
    render_latex(context, tmp_path / "demo.tex")
    tex = (tmp_path / "demo.tex").read_text()
    assert r"MSE < 1 \& ratio 50\%" in tex
    assert r"\includegraphics[width=0.9\linewidth]{f.pdf}" in tex
    assert r"gap\_\%" in tex


def test_missing_figure_is_named(context, tmp_path):
    context["figures"][0]["png"] = str(tmp_path / "nope.png")
    with pytest.raises(ValueError, match=r"nope\.png"):
        render_html(context, tmp_path / "demo.html")
    assert not (tmp_path / "demo.html").exists()


def test_index(tmp_path):
    render_index([{"title": "Finer is Better", "href": "finer_is_better.html", "summary": "3/7 reproduced"}],
                 tmp_path / "index.html")
    assert 'href="finer_is_better.html"' in (tmp_path / "index.html").read_text()
    render_index([], tmp_path / "empty.html")
    assert "make reports" in (tmp_path / "empty.html").read_text()
