"""Every command a report prints (its rerun, verify and checksum commands, ``common.report.rerun_entries``), per
profile: in the smoke build, and in this checkout's published default results when it has them (``make publish``).
Every Snakemake target is current (one dry run for the targets of every report: each command is ``snakemake
[--profile workflow/profiles/<profile>] <target>``) but a trained checkpoint a publication leaves out, whose command
plans its one training job, each ``make verify PAPER=<paper> [PROFILE=<profile>]`` selects
that paper's existing cells (``workflow.verify.select`` on one summary of the build; the recomputation itself is
tests/workflow/test_verify.py's), and each checksum file verifies."""

import json
import re
import shlex
import subprocess
import sys
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path

import pytest

from common.config import SHORT_PATHS_PROFILE, profile_dirs
from workflow.publish import excluded
from workflow.status import summary_rows
from workflow.verify import select, verify_config, workflow_config

PAPERS = ["finer_is_better", "maxwindow_hif8", "microscaling_limits", "winq"]
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def check_printed_commands(folder: Path, profile: str, plan: Callable[..., subprocess.CompletedProcess]) -> None:
    """Run (or, for Snakemake, plan: ``plan(*targets)``) every command the reports of ``profile`` in ``folder``
    print, and check what each must show."""
    results = profile_dirs(profile)[0]
    default = profile == SHORT_PATHS_PROFILE  # Snakemake's workflow profile, no --profile and no PROFILE=
    snakemake = ["snakemake"] if default else ["snakemake", "--profile", f"workflow/profiles/{profile}"]
    targets = []
    rows = summary_rows(profile, folder)
    config = verify_config(folder, profile)
    for paper in PAPERS:
        context = json.loads((folder / f"{results}/{paper}/report/context.json").read_text())
        kinds = []
        for entry in context["rerun"]:
            words = shlex.split(entry["command"])
            kinds.append(words[0])
            if words[:len(snakemake)] == snakemake:
                assert len(words) == len(snakemake) + 1, entry  # one target
                targets.append(words[-1])
            elif words[:2] == ["make", "verify"]:
                options = dict(word.split("=", 1) for word in words[2:])
                assert options == ({"PAPER": paper} if default else {"PAPER": paper, "PROFILE": profile})
                cells = select(Namespace(cells=None, paper=paper, profile=profile, folder=folder), config, rows)
                assert cells, entry
                assert all(cell.startswith(f"{results}/{paper}/") for cell in cells)
                assert all((folder / cell).is_file() for cell in cells)
            else:
                assert words[:2] == ["sha256sum", "-c"], entry
                done = subprocess.run(words, cwd=folder, capture_output=True, text=True, timeout=120, check=False)
                assert done.returncode == 0, done.stdout[-2000:]
        assert kinds[-2:] == ["make", "sha256sum"], (paper, kinds)
        assert set(kinds[:-2]) == {"snakemake"}, (paper, kinds)
    assert len(targets) >= 2 * len(PAPERS)
    left_out = [target for target in targets if not (folder / target).exists()
                and excluded(target, workflow_config(folder, profile)["publish"]["exclude"])]
    done = plan(*(target for target in targets if target not in left_out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Nothing to be done" in done.stdout + done.stderr  # every printed target a publication holds is current
    for target in left_out:  # a trained checkpoint, which a publication leaves out: the rerun of its one job
        done = plan(target)
        assert done.returncode == 0, done.stderr[-2000:]
        assert re.search(r"^total\s+1$", done.stdout, re.MULTILINE), (target, done.stdout[-2000:])


def test_every_printed_command_of_the_smoke_reports_runs(smoke_build, plan_snakemake):
    check_printed_commands(smoke_build, "smoke", lambda *targets: plan_snakemake(smoke_build, *targets))


def test_every_printed_command_of_the_published_reports_runs():
    """In this checkout, as a reviewer's clone runs them: ``snakemake <target>`` with Snakemake's workflow profile
    (``profiles/default``), planned (``-n``: no lock; only Snakemake's I/O cache is written)."""
    if not all((ROOT / f"results/{paper}/report/context.json").is_file() for paper in PAPERS):
        pytest.skip("this checkout has no published default results (make publish)")
    check_printed_commands(ROOT, SHORT_PATHS_PROFILE, lambda *targets: subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", *targets], cwd=ROOT, capture_output=True, text=True, timeout=600,
        check=False))
