"""The workflow without running it: Snakemake's linter, snakefmt, and a dry run of the SLURM profile (which
must work on a machine without SLURM)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_snakemake_lint_is_clean():
    done = run(sys.executable, "-m", "snakemake", "--lint")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Congratulations, your workflow is in a good condition" in done.stdout + done.stderr


def test_snakefmt_check_passes():
    done = run(str(BIN / "snakefmt"), "--check", "Snakefile", "workflow", "papers")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_slurm_profile_dry_run_needs_no_cluster():
    done = run(sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/slurm", "-n", "-F",
               "reports/finer_is_better.html")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fib_ptq_cell" in done.stdout
