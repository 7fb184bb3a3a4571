"""End to end, every report of the session's smoke build (``conftest.py``): the HTML is self-contained (no
network address in any src/href, figures embedded), every claim row carries a computed verdict, the checksums
verify, the index links it, Snakemake's workflow report works offline, and the paper's exploration notebook
executes headless against the artifacts, and the LaTeX compiles with no overfull box in the claims table."""

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from common.report import VERDICTS, Claim, build_pdf
from common.report.claims import KINDS
from common.report.render import overfull_boxes

pytestmark = pytest.mark.slow
PAPERS = sorted(p.parent.name for p in (Path(__file__).resolve().parents[2] / "papers").glob("*/rules.smk"))


class Page(HTMLParser):
    """The src/href attributes and the table rows of an HTML page."""

    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.urls += [(tag, name, value or "") for name, value in attrs if name in ("src", "href")]
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def page(copy: Path, paper: str) -> Page:
    parser = Page()
    parser.feed((copy / f"reports/smoke/{paper}.html").read_text(encoding="utf-8"))
    return parser


@pytest.mark.parametrize("paper", PAPERS)
def test_html_is_self_contained_with_embedded_figures(smoke_build, paper):
    parsed = page(smoke_build, paper)
    external = [u for u in parsed.urls if re.match(r"^\s*(https?:)?//", u[2], re.IGNORECASE)]
    assert external == []
    images = [value for tag, name, value in parsed.urls if tag == "img"]
    context = json.loads((smoke_build / f"results/smoke/{paper}/report/context.json").read_text())
    assert len(images) == len(context["figures"]) >= 5
    assert all(value.startswith("data:image/png;base64,") for value in images)


@pytest.mark.parametrize("paper", PAPERS)
def test_every_claim_row_has_a_computed_verdict(smoke_build, paper):
    document = json.loads((smoke_build / f"results/smoke/{paper}/claims.json").read_text())
    claims = document["claims"]
    assert len(claims) >= 5
    for row in claims:  # each row re-validated: its verdict must follow from its interval by the rule
        assert Claim.from_dict(row).verdict == row["verdict"]
    papers = [c for c in claims if c["kind"] == "paper"]  # the tally: the paper's rows alone
    assert document["counts"] == {v: sum(c["tallied"] == v for c in papers) for v in VERDICTS}
    assert document["counts_by_kind"] == {kind: {v: sum(c["verdict"] == v for c in claims if c["kind"] == kind)
                                                 for v in VERDICTS} for kind in KINDS}
    rows = page(smoke_build, paper).rows
    header = next(row for row in rows if row[:1] == ["The paper's sentence"])
    verdict_column = header.index("Verdict")
    body = [row for row in rows[rows.index(header) + 1:] if len(row) == len(header)][:len(papers)]  # no headings
    assert [row[verdict_column] for row in body] == [c["verdict"] for c in papers]


@pytest.mark.parametrize("paper", PAPERS)
def test_checksums_verify_and_cover_the_report(smoke_build, paper):
    check = subprocess.run(["sha256sum", "-c", f"reports/smoke/{paper}.SHA256SUMS"], cwd=smoke_build,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout[-2000:]
    sums = (smoke_build / f"reports/smoke/{paper}.SHA256SUMS").read_text()
    listed = {line.split("  ", 1)[1] for line in sums.splitlines()}
    assert {f"reports/smoke/{paper}.html", f"reports/smoke/{paper}.tex", f"results/smoke/{paper}/claims.json"} <= listed


@pytest.mark.parametrize("paper", PAPERS)
def test_index_links_the_report(smoke_build, paper):
    assert f'href="{paper}.html"' in (smoke_build / "reports/smoke/index.html").read_text()


@pytest.mark.parametrize("paper", PAPERS)
def test_the_profile_notice_says_smoke_verdicts_are_not_evidence(smoke_build, paper):
    html = (smoke_build / f"reports/smoke/{paper}.html").read_text(encoding="utf-8")
    notice = "<strong>Note.</strong> Smoke profile: CI sizes"
    assert html.index(notice) < html.index("<h2>")
    assert "its verdicts are not evidence" in html[html.index(notice):html.index("<h2>")]


@pytest.mark.parametrize("paper", PAPERS)
def test_notebook_executes_headless(smoke_build, paper, monkeypatch):
    monkeypatch.setenv("LOWBIT_PROFILE", "smoke")  # the kernel inherits it: the notebook reads results/smoke/
    notebook = nbformat.read(smoke_build / f"papers/{paper}/explore.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(smoke_build)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4


@pytest.mark.parametrize("paper", PAPERS)
def test_snakemake_workflow_report_is_offline(smoke_build, run_snakemake, paper):
    out = smoke_build / f"reports/smoke/{paper}-workflow.html"
    done = run_snakemake(smoke_build, f"reports/smoke/{paper}.html", "--report", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    html = out.read_text(encoding="utf-8")
    assert re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.IGNORECASE) is None


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk is not installed")
@pytest.mark.parametrize("paper", PAPERS)
def test_latex_compiles_without_overfull_boxes_in_the_claims_table(smoke_build, paper, tmp_path):
    tex = smoke_build / f"reports/smoke/{paper}.tex"
    build_pdf(tex, log=tmp_path / "latex.log")  # a LaTeX error raises, naming it
    lines = tex.read_text(encoding="utf-8").splitlines()
    start = lines.index("\\section*{The paper's claims}") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("\\end{longtable}")) + 1
    inside = []
    for box in overfull_boxes((tmp_path / "latex.log").read_text()):
        span = re.search(r"at lines (\d+)--(\d+)", box)
        if span and start <= int(span[1]) and int(span[2]) <= end:
            inside.append(box)
    assert inside == [], f"overfull boxes in the claims table of reports/{paper}.tex (lines {start}-{end})"
    body = re.search(r"lowbit-lab: the body ends on page (\d+)", (tmp_path / "latex.log").read_text())
    assert body is not None
    assert int(body[1]) <= 15  # the tally, the coverage, the method, the paper's claims and the figures
