"""Every command a smoke report prints (its rerun, verify and checksum commands, ``common.report.rerun_entries``) run
in the smoke build: every Snakemake target is current (one run for the targets of every report: each command is
``snakemake --profile workflow/profiles/smoke <target>``), each ``make verify PAPER=<paper> PROFILE=smoke`` selects
that paper's existing cells (``workflow.verify.select`` on one summary of the build; the recomputation itself is
tests/workflow/test_verify.py's), and each checksum file verifies."""

import json
import shlex
import subprocess
from argparse import Namespace

import pytest

from workflow.status import summary_rows
from workflow.verify import select, verify_config

PAPERS = ["finer_is_better", "maxwindow_hif8", "microscaling_limits", "winq"]
SNAKEMAKE = ["snakemake", "--profile", "workflow/profiles/smoke"]

pytestmark = pytest.mark.slow


def test_every_printed_command_runs(smoke_build, run_snakemake):
    targets = []
    rows = summary_rows("smoke", smoke_build)
    config = verify_config(smoke_build, "smoke")
    for paper in PAPERS:
        context = json.loads((smoke_build / f"results/smoke/{paper}/report/context.json").read_text())
        kinds = []
        for entry in context["rerun"]:
            words = shlex.split(entry["command"])
            kinds.append(words[0])
            if words[:3] == SNAKEMAKE:
                assert len(words) == 4, entry  # one target
                targets.append(words[3])
            elif words[:2] == ["make", "verify"]:
                options = dict(word.split("=", 1) for word in words[2:])
                assert options == {"PAPER": paper, "PROFILE": "smoke"}
                cells = select(Namespace(cells=None, paper=paper, profile="smoke", folder=smoke_build), config, rows)
                assert cells, entry
                assert all(cell.startswith(f"results/smoke/{paper}/") for cell in cells)
                assert all((smoke_build / cell).is_file() for cell in cells)
            else:
                assert words[:2] == ["sha256sum", "-c"], entry
                done = subprocess.run(words, cwd=smoke_build, capture_output=True, text=True, timeout=120,
                                      check=False)
                assert done.returncode == 0, done.stdout[-2000:]
        assert kinds[-2:] == ["make", "sha256sum"], (paper, kinds)
        assert set(kinds[:-2]) == {"snakemake"}, (paper, kinds)
    assert len(targets) >= 2 * len(PAPERS)
    done = run_snakemake(smoke_build, *targets)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Nothing to be done" in done.stdout + done.stderr  # every printed target is current
