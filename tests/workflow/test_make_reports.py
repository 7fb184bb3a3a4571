"""End to end, the users' path: ``make reports PROFILE=smoke TARGETS=reports/smoke/<paper>.html`` exactly as a user
runs it, for the cheapest paper's report (measured: microscaling_limits' 29 jobs after the base model took the
fewest job-seconds of the four, cold and warm).

The other builds of the tests start their steps warm (``forkserver.py``, test infrastructure); this one runs the
Makefile's ``reports`` recipe as it is: ``workflow/unlock_stale.py``, then ``snakemake --profile
workflow/profiles/smoke --cores 1 <target>`` with the variables the Makefile exports, every step a fresh ``python``
(no fork server, no change of ``PATH``). Its copy of the work tree is seeded with the smoke build's corpora and base
model (``seeded_copy``: nothing is fetched, prepared or pretrained twice), and its ``.venv`` is a symbolic link to
this interpreter's environment; ``make -o .venv/.installed`` takes that environment as set up, so make never
reinstalls it (through the link, into the real one) whatever the copied ``envs/`` files' times say. Its
figures equal the warm smoke build's byte for byte, and its ``claims.json`` all but the date of its runs. The smoke
copy is locked (shared) only while the seeds and the reference files are copied, so the tests that run Snakemake in
it need not wait for this build."""

import fcntl
import json
import os
import subprocess
import sys

import pytest
from shared_testing import shared_lock
from workflow_testing import SMOKE_MODEL, seeded_copy

pytestmark = pytest.mark.slow

PAPER = "microscaling_limits"
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # an outer make's (`make test`), not a user's shell's


def test_make_reports_builds_a_report_with_cold_steps_as_the_warm_build_does(smoke_copy, tmp_path_factory,
                                                                             tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    compared = [f"results/smoke/{PAPER}/claims.json"]
    with shared_lock(tmp_path_factory, fcntl.LOCK_SH, "smoke_build"):
        seeded_copy(smoke_copy, ("data", SMOKE_MODEL))(copy)
        compared += sorted(str(path.relative_to(smoke_copy))
                           for path in (smoke_copy / f"results/smoke/{PAPER}/figures").iterdir())
        warm = {name: (smoke_copy / name).read_bytes() for name in compared}
    (copy / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    environment = {key: value for key, value in os.environ.items() if key not in MAKE_VARIABLES}
    made = subprocess.run(["make", "-C", str(copy), "-o", ".venv/.installed", "reports", "PROFILE=smoke",
                           f"TARGETS=reports/smoke/{PAPER}.html", "CORES=1"], env=environment, capture_output=True,
                          text=True, timeout=3600)
    output = made.stdout + made.stderr
    assert made.returncode == 0, output[-4000:]
    assert ".venv/bin/python workflow/unlock_stale.py" in output
    assert f".venv/bin/snakemake --profile workflow/profiles/smoke --cores 1 reports/smoke/{PAPER}.html" in output
    assert "rule pretrain_base_model" not in output  # the seeded base model, taken as built
    assert (copy / f"reports/smoke/{PAPER}.html").stat().st_size > 0
    assert len(compared) > 1
    for name in compared[1:]:
        assert (copy / name).read_bytes() == warm[name], name
    cold, built = (json.loads(text) for text in ((copy / compared[0]).read_bytes(), warm[compared[0]]))
    for document in (cold, built):  # the runs' date is each build's own (its newest evidence file)
        for row in document["claims"]:
            assert row["dates"]["runs"]["date"]
            row["dates"]["runs"]["date"] = ""
    assert cold == built
