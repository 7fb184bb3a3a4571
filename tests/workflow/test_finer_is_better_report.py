"""End to end: ``reports/finer_is_better.html`` from the session's smoke build (``conftest.py``).

The HTML is self-contained (no network address in any src/href, figures embedded), every claim row carries a
computed verdict, the checksums verify, one cell reruns alone, a wrong config key stops the run before any work,
and the exploration notebook executes headless against the artifacts."""

import json
import re
import subprocess
from html.parser import HTMLParser

import nbformat
import pytest
from nbclient import NotebookClient

from common.report import VERDICTS

pytestmark = pytest.mark.slow
PAPER = "finer_is_better"
CELL = "results/finer_is_better/ptq/smoke/e2m1-ue4m3-b4-four_over_six.json"


class Links(HTMLParser):
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


@pytest.fixture(scope="module")
def page(smoke_build):
    parser = Links()
    parser.feed((smoke_build / f"reports/{PAPER}.html").read_text(encoding="utf-8"))
    return parser


def test_html_is_self_contained_with_embedded_figures(smoke_build, page):
    external = [u for u in page.urls if re.match(r"^\s*(https?:)?//", u[2], re.IGNORECASE)]
    assert external == []
    images = [value for tag, name, value in page.urls if tag == "img"]
    context = json.loads((smoke_build / f"results/{PAPER}/report/context.json").read_text())
    assert len(images) == len(context["figures"]) >= 8
    assert all(value.startswith("data:image/png;base64,") for value in images)


def test_every_claim_row_has_a_computed_verdict(smoke_build, page):
    claims = json.loads((smoke_build / f"results/{PAPER}/claims.json").read_text())
    assert len(claims) >= 9
    header = next(row for row in page.rows if row[:1] == ["Claim"])
    verdict_column = header.index("Verdict")
    rows = page.rows[page.rows.index(header) + 1: page.rows.index(header) + 1 + len(claims)]
    assert [row[verdict_column] for row in rows] == [c["verdict"] for c in claims]
    assert all(c["verdict"] in VERDICTS and c["rule"] for c in claims)
    assert {c["id"] for c in claims} >= {"absmax_reversal", "prevent_zero_region_a", "four_over_six_region_b",
                                         "brute_force_monotone", "heuristics_above_brute_force",
                                         "four_over_six_gap_block4", "hierarchical_vs_ue5m3"}


def test_checksums_verify_and_cover_the_cells(smoke_build):
    check = subprocess.run(["sha256sum", "-c", f"reports/{PAPER}.SHA256SUMS"], cwd=smoke_build,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout[-2000:]
    listed = {line.split("  ", 1)[1] for line in (smoke_build / f"reports/{PAPER}.SHA256SUMS").read_text().splitlines()}
    assert CELL in listed
    assert f"reports/{PAPER}.html" in listed
    assert "results/finer_is_better/mse/summary.json" in listed


def test_index_links_the_report(smoke_build):
    index = (smoke_build / "reports/index.html").read_text()
    assert f'href="{PAPER}.html"' in index


def test_one_cell_reruns_alone(smoke_build, run_snakemake):
    dry = run_snakemake(smoke_build, "-n", "--forcerun", CELL, "--", CELL)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE)
    assert dict(jobs) == {"fib_ptq_cell": "1", "total": "1"}


def test_a_wrong_config_key_stops_before_any_work(smoke_build, run_snakemake):
    bad = smoke_build / "bad.yaml"
    bad.write_text("finer_is_better:\n  numerical:\n    sampels: 10\n")
    run = run_snakemake(smoke_build, "-n", "--configfile", str(bad), "--", f"reports/{PAPER}.html")
    assert run.returncode != 0
    assert "sampels" in run.stdout + run.stderr


def test_notebook_executes_headless(smoke_build):
    notebook = nbformat.read(smoke_build / f"papers/{PAPER}/explore.ipynb", as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(smoke_build)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 8


def test_snakemake_workflow_report_is_offline(smoke_build, run_snakemake):
    out = smoke_build / f"reports/{PAPER}-workflow.html"
    done = run_snakemake(smoke_build, f"reports/{PAPER}.html", "--report", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    html = out.read_text(encoding="utf-8")
    assert re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html, re.IGNORECASE) is None
    assert "Finer is Better" in html  # the figures' category
