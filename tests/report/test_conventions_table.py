"""conventions_table: one row per aspect, values in words, the authors' code location, same or different."""

import dataclasses
import subprocess
import sys

from common.report import conventions_table
from common.report.render import table_layout
from common.scaling.conventions import CONVENTIONS


def test_ours_against_the_authors_row_by_row():
    table = conventions_table("lowbit", "finer_is_better_authors", caption="Numerics.")
    assert table["caption"] == "Numerics."
    assert table["columns"] == ["aspect", "this run", "the authors'", "where the authors do it", "same or different"]
    assert table["rows"] == [
        ["hierarchical scale c = max|x|/T", "one c per token (row of the last axis)",
         "one c per dim-0 slice (sequence)", "torch_eval.py:258-260", "different"],
        ["round-to-nearest ties (elements, non-E4M3 scales)", "to even", "to the smaller magnitude",
         "torch_eval.py:139-143, 282-287", "different"],
        ["fake-quantization arithmetic", "float32", "bfloat16 eager ops", "torch_eval.py:383 (bf16 model), 257-340",
         "different"],
        ["4/6 candidates on E8M0 scales", "OCP floor and round-up", "floor and ceiling of max/6",
         "torch_eval.py:324-327", "different"],
        ["hierarchical T with UE5M3 scales", "448", "61440", "torch_eval.py:264-274", "different"],
        ["largest UE5M3 scale", "114688", "61440", "torch_eval.py:56, 139", "different"],
    ]
    table_layout(table)  # the renderers accept it (a row of the wrong length would be a ValueError)


def test_a_run_under_the_authors_conventions_is_the_same_but_for_the_ue5m3_max():
    """A run may adopt the authors' options and keep our UE5M3 format (max 114688): one row stays different."""
    run = dataclasses.replace(CONVENTIONS["finer_is_better_authors"], name="this run", ue5m3_max=114688.0,
                              source="", where={})
    table = conventions_table(run, CONVENTIONS["finer_is_better_authors"])
    assert [row[-1] for row in table["rows"]] == ["same"] * 5 + ["different"]
    assert table["caption"] == ("Numerics conventions of this run (this run) and of the authors "
                                "(finer_is_better_authors; clee1994/finer_is_better torch_eval.py @ 0080284).")


def test_an_aspect_without_a_location_is_a_dash():
    authors = dataclasses.replace(CONVENTIONS["finer_is_better_authors"], where={"ties": "q.py:7"})
    assert [row[3] for row in conventions_table("lowbit", authors)["rows"]] == ["-", "q.py:7", "-", "-", "-", "-"]


def test_importing_the_report_package_does_not_import_torch():
    code = "import sys, common.report; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
