"""End to end, the users' path: ``make reports PROFILE=smoke TARGETS=reports/smoke/<paper>.html`` exactly as a user
runs it, for the cheapest paper's report (measured: the fewest seconds of steps once the base model exists).

The other builds of the tests start their steps warm (``forkserver.py``, test infrastructure); this one runs the
Makefile's ``reports`` recipe as it is: ``workflow/unlock_stale.py``, then ``snakemake --profile
workflow/profiles/smoke --cores 1 <target>`` with the variables the Makefile exports, every step a fresh ``python``
(no fork server, no change of ``PATH``). Its copy of the work tree is seeded with the smoke build's corpora and base
model (``seeded_copy``: nothing is fetched, prepared or pretrained twice), and its ``.venv`` is a symbolic link to
this interpreter's environment; ``make -o .venv/.installed`` takes that environment as set up, so make never
reinstalls it (through the link, into the real one) whatever the copied ``envs/`` files' times say. Its
``claims.json`` and figures equal the warm smoke build's byte for byte."""

import os
import subprocess
import sys

import pytest
from workflow_testing import SMOKE_MODEL, seeded_copy

pytestmark = pytest.mark.slow

PAPER = "finer_is_better"
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # an outer make's (`make test`), not a user's shell's


def test_make_reports_builds_a_report_with_cold_steps_as_the_warm_build_does(smoke_build, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    seeded_copy(smoke_build, ("data", SMOKE_MODEL))(copy)
    (copy / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    environment = {key: value for key, value in os.environ.items() if key not in MAKE_VARIABLES}
    made = subprocess.run(["make", "-C", str(copy), "-o", ".venv/.installed", "reports", "PROFILE=smoke",
                           f"TARGETS=reports/smoke/{PAPER}.html", "CORES=1"], env=environment, capture_output=True,
                          text=True, timeout=1800)
    output = made.stdout + made.stderr
    assert made.returncode == 0, output[-4000:]
    assert f".venv/bin/snakemake --profile workflow/profiles/smoke --cores 1 reports/smoke/{PAPER}.html" in output
    assert "rule pretrain_base_model" not in output  # the seeded base model, taken as built
    assert (copy / f"reports/smoke/{PAPER}.html").stat().st_size > 0
    claims = f"results/smoke/{PAPER}/claims.json"
    assert (copy / claims).read_bytes() == (smoke_build / claims).read_bytes()
    figures = sorted((smoke_build / f"results/smoke/{PAPER}/figures").iterdir())
    assert figures
    for figure in figures:
        assert (copy / figure.relative_to(smoke_build)).read_bytes() == figure.read_bytes(), figure.name
