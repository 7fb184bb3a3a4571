"""Report machinery: verdict rule, provenance, checksums verified by sha256sum, inline math in both renderers,
table layout, offline HTML, LaTeX, index."""

import re
import shutil
import subprocess

import pytest

from common.report import (
    VERDICTS,
    Prediction,
    config_hash,
    git_state,
    provenance,
    render_html,
    render_index,
    render_latex,
    verify_sha256sums,
    write_sha256sums,
)
from common.report.render import html_text, latex_code, latex_text, math_html, math_numbers, table_layout
from common.uncertainty import Estimate


def _interval(low, high):
    return Estimate((low + high) / 2, low, high, "test")


def test_verdict_rule():
    above, below, within = (Prediction("x", d, 1.0, "test") for d in ("above", "below", "within"))
    assert [above.verdict(_interval(*i)) for i in [(1.1, 2), (0, 0.9), (0.5, 1.5), (1.0, 2)]] == [
        "reproduced", "contradicted", "inconclusive", "inconclusive"]
    assert [below.verdict(_interval(*i)) for i in [(0, 0.9), (1.1, 2)]] == ["reproduced", "contradicted"]
    assert [within.verdict(_interval(*i)) for i in [(-0.5, 0.5), (1.2, 2), (0.5, 1.5)]] == [
        "reproduced", "contradicted", "inconclusive"]
    assert above.verdict(None) == "not testable at this scale"
    assert VERDICTS == ("reproduced", "contradicted", "inconclusive", "not testable at this scale")


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


def test_html_is_self_contained(context, tmp_path):
    render_html(context, tmp_path / "demo.html")
    html = (tmp_path / "demo.html").read_text()
    links = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert links
    assert all(link.startswith("data:image/png;base64,") or link.startswith("#") for link in links)
    assert "Demo &lt;paper&gt;" in html  # escaped
    assert html.count('class="verdict verdict-reproduced"') == 2
    assert all('class="verdict verdict-' + v.replace(' ', '-') + '"' in html for v in VERDICTS)
    assert "MSE &lt; 1 &amp; ratio 50%" in html
    assert html.count('<tr class="group">') == 3  # five rows under three group headings
    assert "95% interval: paired bootstrap over 64 windows" in html
    assert "our grid stops at" in html  # the reason of the not-testable row
    assert '<tr id="closed_form_mse">' in html  # the implementation checks
    assert "None of them counts as a reproduction" in html
    assert '<span class="math"><i>&sigma;</i></span>' not in html  # Greek letters are not set in italic
    assert 'MSE vs <span class="math">&sigma;</span>' in html  # math in a caption
    assert '<td><span class="math">&minus;0.27</span></td>' in html  # numbers in table cells


def test_latex_escapes_and_links_figures(context, tmp_path):
    render_latex(context, tmp_path / "demo.tex")
    tex = (tmp_path / "demo.tex").read_text()
    assert r"MSE \textless{} 1 \& ratio 50\%" in tex
    assert r"\includegraphics[width=\linewidth,height=0.3\textheight,keepaspectratio]{f.pdf}" in tex
    assert r"\caption{MSE vs $\sigma$}" in tex
    assert r"\textbf{gap\_\allowbreak{}\%}" in tex
    assert r"$-0.27$ \\" in tex
    assert r"a zero scale becomes $2^{-9}$." in tex
    assert r"\verdict{nottestableatthisscale}{not testable at this scale}" in tex
    assert tex.count(r"\multicolumn{5}") == 3  # the group headings


def test_missing_figure_is_named(context, tmp_path):
    context["figures"][0]["png"] = str(tmp_path / "nope.png")
    with pytest.raises(ValueError, match=r"nope\.png"):
        render_html(context, tmp_path / "demo.html")
    assert not (tmp_path / "demo.html").exists()


def test_index(tmp_path):
    counts = {"reproduced": 3, "contradicted": 1, "inconclusive": 0, "not testable at this scale": 2}
    render_index([{"title": "Finer is Better", "href": "finer_is_better.html", "counts": counts, "outside_regime": 1,
                   "tested": 7, "listed": 11, "findings": 2, "checks": "4 of 5"}],
                 tmp_path / "index.html")
    index = (tmp_path / "index.html").read_text()
    assert 'href="finer_is_better.html"' in index
    cells = re.findall(r'<td class="count">([^<]+)</td>', index)
    assert cells == ["3", "1", "0", "2", "1", "7 of 11", "2", "4 of 5"]
    render_index([], tmp_path / "empty.html")
    assert "make reports" in (tmp_path / "empty.html").read_text()


def test_math_in_latex_is_kept_and_the_rest_escaped():
    assert latex_text("MSE of $\\sigma^2$ & 50%, \\$5") == "MSE of $\\sigma^2$ \\& 50\\%, \\$5"
    assert latex_code("results/a_b.json") == "results/\\allowbreak{}a\\_\\allowbreak{}b.json"
    with pytest.raises(ValueError, match=r"unmatched \$ in 'costs \$5'"):
        latex_text("costs $5")
    with pytest.raises(ValueError, match="empty math"):
        latex_text("a $$ b")


def test_math_in_html_is_converted_offline():
    assert math_html("\\sigma^2") == '<span class="math">&sigma;<sup>2</sup></span>'
    assert math_html("2^{-9}") == '<span class="math">2<sup>&minus;9</sup></span>'
    assert math_html("\\mathrm{MSE}(n)/\\mathrm{MSE}(2n)") == (
        '<span class="math">MSE(<i>n</i>)/MSE(2<i>n</i>)</span>')
    assert math_html("x_{ij} \\le 3 \\times 10^{-5}") == (
        '<span class="math"><i>x</i><sub><i>ij</i></sub> &le; 3 &times; 10<sup>&minus;5</sup></span>')
    assert math_html("\\sqrt{n} < \\log x") == '<span class="math">&radic;(<i>n</i>) &lt; log <i>x</i></span>'
    assert str(html_text("a <b> & $\\alpha$")) == 'a &lt;b&gt; &amp; <span class="math">&alpha;</span>'
    for bad, message in [("\\frac{a}{b}", "unknown math command \\\\frac"), ("x^{2", "unbalanced \\{"),
                         ("x}", "unbalanced \\}"), ("x^", "\\^ without an argument")]:
        with pytest.raises(ValueError, match=message):
            math_html(bad)


def test_numbers_become_math():
    assert math_numbers("-0.0123 [-0.031, 1.2e-05]") == "$-0.0123$ [$-0.031$, $1.2\\times10^{-5}$]"
    assert math_numbers("1e-07 and -1e+03, inf") == "$10^{-7}$ and $-10^{3}$, $\\infty$"
    assert math_numbers("b4 e2m1-ue4m3 at $x = -1$ costs \\$5") == "b4 e2m1-ue4m3 at $x = -1$ costs \\$$5$"
    assert math_numbers("torch 2.13.0, ratio 0.5.") == "torch 2.13.0, ratio $0.5$."


def test_table_layout_fits_or_wraps_the_widest_column():
    narrow = {"caption": "t", "columns": ["block", "gap"], "rows": [[4, "0.27"], [8, "-1e-05"]]}
    assert table_layout(narrow) == {"size": "\\small", "spec": "@{}rr@{}"}
    sizes = [table_layout({"caption": "t", "columns": ["scale", *(f"b{b}" for b in range(n))],
                           "rows": [["UE4M3", *(["0.04915"] * n)]]})["size"] for n in (10, 11, 12)]
    assert sizes == ["\\small", "\\footnotesize", "\\scriptsize"]  # numbers never wrap: the font shrinks
    text = {"caption": "t", "columns": ["region", "rule"], "rows": [["A", "abs-max reverses " * 12]]}
    layout = table_layout(text)
    assert layout["size"] == "\\footnotesize"
    # the rule column wraps in the room the region column leaves (estimated 49.4 em, corrected by LaTeX)
    assert layout["spec"] == "@{}lP{\\dimexpr49.4em+(\\linewidth-52.9em-2\\tabcolsep)/1\\relax}@{}"
    long_names = {"caption": "t", "columns": ["trace", "observer", "saturated steps", "worst overshoot",
                                             "headroom lost (bits)", "spikes", "median |theory/measured - 1|"],
                  "rows": [["qat-hif8-seed0-layer11.mlp.down_proj", "max-window", 12, "1.37", "0.452", 3, "-0.0123"]]}
    layout = table_layout(long_names)  # capped: the name wraps at its dots, numbers with long headers wrap right
    assert layout["size"] == "\\footnotesize"
    assert re.fullmatch(r"@\{\}P\{[^}]*\}lR\{[^}]*\}R\{[^}]*\}R\{[^}]*\}rR\{[^}]*\}@\{\}", layout["spec"])
    with pytest.raises(ValueError, match="row 1 has 1 cells for 2 columns"):
        table_layout({"caption": "t", "columns": ["a", "b"], "rows": [[1]]})


def test_rows_dated_or_not_render_in_both_formats(context, tmp_path):
    """A row dated outside a git checkout (a note, no commit), one dated from git and one revised after results."""
    context["claims"][0]["dates"] = {"prediction": {"note": "unknown: not a git checkout"},
                                     "runs": {"commit": None, "dirty": None, "date": ""}}
    context["claims"][1]["dates"] = {"prediction": {"commit": "0123456789abcdef", "date": "2026-12-01T10:00:00+00:00"},
                                     "runs": {"commit": "fedcba9876543210", "dirty": False,
                                              "date": "2026-12-04T12:00:00+00:00"}}
    context["claims"][1]["revision"] = {"earlier": {}, "earlier_text": "ratio > 1", "note": "uncommitted changes",
                                        "results": "README.md at 0123456 (2026-12-02)", "how": "git"}
    render_html(context, tmp_path / "demo.html")
    html = (tmp_path / "demo.html").read_text()
    assert "Prediction written unknown: not a git checkout; runs not dated." in html
    assert "Prediction written 2026-12-01 (<code>0123456</code>); runs 2026-12-04 at <code>fedcba9</code>." in html
    assert "<strong>Revised after results</strong> (uncommitted changes; results: README.md at 0123456" in html
    render_latex(context, tmp_path / "demo.tex")
    assert "Written unknown: not a git checkout; runs not dated." in (tmp_path / "demo.tex").read_text()


def test_the_dirty_flag_ignores_the_build_outputs(tmp_path):
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    for name in ("code.py", "results/a.json", ".snakemake/metadata/x", "reports/p.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("1")
    git("add", "-f", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "published")
    assert git_state(tmp_path)["dirty"] is False
    for name in ("results/a.json", ".snakemake/metadata/x", "reports/p.html"):  # a rebuild rewrote them
        (tmp_path / name).write_text("2")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "code.py").write_text("2")
    assert git_state(tmp_path)["dirty"] is True
