"""``make status`` (workflow/status.py) on the smoke build: everything current after the build; a change of one
paper's config value, or of the code of one step, makes exactly the results built from it stale; a docstring edit
makes none stale. The classification itself is tested on planted summary rows."""

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from workflow_testing import copy_worktree

import workflow.status as status_module
from workflow.status import SHARED, UPSTREAM_REASON, PlannedJob, classify, paper_of, planned_jobs, status_text

PAPERS = ["finer_is_better", "maxwindow_hif8", "microscaling_limits", "winq"]
FIB_REPORT = [f"reports/smoke/finer_is_better.{ext}" for ext in ("SHA256SUMS", "html", "pdf", "tex")]


def status(copy: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "workflow.status", "--profile", "smoke", "--json"], cwd=copy,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def stale(copy: Path) -> dict[str, str]:
    return {path: reason for entry in status(copy).values() for path, reason in entry["stale"].items()}


@contextlib.contextmanager
def edited(path: Path, old: str, new: str) -> Iterator[None]:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))
    try:
        yield
    finally:
        path.write_text(text)


@pytest.mark.slow
def test_a_change_stales_exactly_the_results_built_from_it(smoke_build, run_snakemake):
    """Three edits at once, each with its own footprint: a claim row's threshold (the claims and everything built
    from them: the context, the report, the index), the code of the figures step (the figures, the context, the
    report, the index; no cell), and a docstring of the numerical cells' module (nothing). Undone, nothing is stale:
    the build was current before them."""
    report = [path for path in FIB_REPORT if (smoke_build / path).exists()]  # the PDF with latexmk only
    config = smoke_build / "papers/finer_is_better/config.yaml"
    figures = smoke_build / "papers/finer_is_better/figures.py"
    numerical = smoke_build / "papers/finer_is_better/numerical.py"
    with edited(config, "threshold: 0.05", "threshold: 0.06"), \
            edited(figures, "\nimport os\n", "\nimport os\nFIGURE_EDIT = 1\n"), \
            edited(numerical, '"""The numerical study:', '"""The numerical study, edited:'):
        found = stale(smoke_build)
    figure_files = {path for path in found if "/finer_is_better/figures/" in path}
    assert figure_files
    assert all(found[path] == "params changed" for path in figure_files)
    assert {path: reason for path, reason in found.items() if path not in figure_files} == {
        "results/smoke/finer_is_better/claims.json": "params changed",
        "results/smoke/finer_is_better/report/context.json": "params changed",
        **dict.fromkeys(report, UPSTREAM_REASON), "reports/smoke/index.html": UPSTREAM_REASON}
    current = status(smoke_build)
    assert all(not entry["stale"] for entry in current.values()), current
    assert all(current[paper]["current"] > 10 for paper in PAPERS), current


def test_the_readme_table_is_what_the_published_results_say(tmp_path):
    """The README's results table, its status column included, is what ``python -m workflow.status --update
    README.md`` computes from the published tree (a copy of the work tree without the ignored files: a developer's
    own builds aside): a change that stales a published result fails here until the README says so."""
    copy_worktree(tmp_path)
    done = subprocess.run([sys.executable, "-m", "workflow.status", "--update", "README.md"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)  # the list of stale results, in CI's log
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert (tmp_path / "README.md").read_text() == readme, "run: python -m workflow.status --update README.md"


def test_status_text():
    assert status_text({"current": 0, "stale": {}, "absent": 3}) == "-"
    assert status_text({"current": 5, "stale": {}, "absent": 3}) == "current"
    assert status_text({"current": 5, "stale": {"a": "params changed", "b": "ok"}, "absent": 0}) == "stale: 2 of 7"


def test_paper_of_a_path():
    assert paper_of("results/smoke/winq/eval/base.json", "smoke", PAPERS) == "winq"
    assert paper_of("reports/smoke/winq.html", "smoke", PAPERS) == "winq"
    assert paper_of("reports/winq.pdf", "default", PAPERS) == "winq"
    assert paper_of("results/winq/claims.json", "default", PAPERS) == "winq"
    assert paper_of("results/models/base/small/model.safetensors", "default", PAPERS) == SHARED
    assert paper_of("reports/smoke/index.html", "smoke", PAPERS) == SHARED
    assert paper_of("results/smoke/winq.json", "smoke", PAPERS) == SHARED  # a file, not the paper's folder
    assert paper_of("results/winq/claims.json", "smoke", PAPERS) == SHARED  # another profile's folder


def test_classify_planted_rows():
    rows = [
        {"output_file": "results/winq/claims.json", "date": "Sat", "status": "params changed",
         "plan": "update pending"},
        {"output_file": "reports/winq.html", "date": "Sat", "status": "ok", "plan": "update pending"},
        {"output_file": "results/winq/eval/a.json", "date": "Sat", "status": "ok", "plan": "no update"},
        {"output_file": "results/models/trained/winq/a/seed0", "date": "-", "status": "missing", "plan": "no update"},
        {"output_file": "data/corpora/x/train.jsonl", "date": "Sat", "status": "set of input files changed",
         "plan": "update pending"},
    ]
    found = classify(rows, "default", ["winq"])
    assert found == {
        "winq": {"current": 1, "absent": 0, "stale": {"results/winq/claims.json": "params changed",
                                                       "reports/winq.html": UPSTREAM_REASON}},
        SHARED: {"current": 0, "absent": 1, "stale": {"data/corpora/x/train.jsonl": "set of input files changed"}},
    }


DRY_RUN = """Building DAG of jobs...

[Sun Dec  6 05:43:10 2026]
rule train:
    input: results/models/base/m, data/c/train.jsonl
    output: results/models/trained/r, results/r/log.csv
    log: results/r/stderr.log
    jobid: 2
    reason: Forced execution
    wildcards: run=r
Shell command: python -m train --out results/models/trained/r

[Sun Dec  6 05:43:10 2026]
rule fetch:
    output: data/archives/x.tgz
    jobid: 1
localhost: not a job
[Sun Dec  6 05:43:10 2026]
localrule all:
    input: reports/a.html
    jobid: 0
Job stats:
job      count
-----  -------
all          1
"""


def test_planned_jobs_reads_each_job_of_a_dry_run(monkeypatch):
    asked = []
    monkeypatch.setattr(status_module, "snakemake", lambda profile, folder, *args: asked.append(args) or
                        subprocess.CompletedProcess(args, 0, DRY_RUN, ""))
    assert planned_jobs("default", Path(".")) == [
        PlannedJob("train", ("results/models/base/m", "data/c/train.jsonl"),
                   ("results/models/trained/r", "results/r/log.csv"), ("results/r/stderr.log",)),
        PlannedJob("fetch", (), ("data/archives/x.tgz",)), PlannedJob("all", ("reports/a.html",), ())]
    assert asked == [("-n", "--forceall", "all")]
