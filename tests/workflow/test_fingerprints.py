"""workflow/fingerprints.py: the committed digests of a few cheap cells, recomputed bit for bit on whichever machine
runs the tests, and only under the pinned numerical paths."""

import json

import pytest

from workflow.build_platform import ROOT, numerical_pins
from workflow.fingerprints import RECORD, compare, compute, digest

RECORDED = json.loads((ROOT / RECORD).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pinned():
    """The cells computed here under the pins (a child process, as ``python -m workflow.fingerprints``)."""
    return compute()


@pytest.mark.slow
def test_the_cells_recompute_bit_for_bit_on_this_machine(pinned):
    rows = compare(RECORDED, pinned)
    checked = "; ".join(f"{e['vendor']} {e['cpu_id']}" for e in RECORDED["checked_on"])
    assert [row["result"] for row in rows] == ["identical"] * len(rows), f"{rows}\nrecorded on: {checked}"
    assert {row["cell"] for row in rows} == {"ptq_evaluation", "qat_hif8_w8a8", "qat_paretoq_w2", "zero_shot"}


@pytest.mark.slow
def test_without_the_pins_the_cells_follow_the_cpu(pinned):
    """The negative control: oneMKL's own dispatch (AVX2 or AVX-512 kernels, never the pinned SSE2 branch) sums
    the matrix products in another order, so the digests change; the check above could fail."""
    unpinned = compute(pinned=False)
    assert [row["cell"] for row in compare(RECORDED, unpinned) if row["result"] != "identical"]


def test_the_record_names_the_cpus_it_was_checked_on():
    assert RECORDED["checked_on"]
    for entry in RECORDED["checked_on"]:
        assert entry["vendor"] in ("AuthenticAMD", "GenuineIntel", "HygonGenuine")
        assert entry["cpu_id"].startswith("family ")
    assert all(entry["digest"] == digest(entry["values"]) for entry in RECORDED["cells"].values())
    assert RECORDED["pins"] == numerical_pins()  # the digests hold under the pins in force


def test_a_difference_is_named_by_its_first_value():
    record = {"cells": {"c": {"digest": digest({"a": [1.0, 2.0]}), "values": {"a": [1.0, 2.0]}}}}
    assert compare(record, {"c": {"a": [1.0, 2.5]}}) == [
        {"cell": "c", "recorded": digest({"a": [1.0, 2.0]}), "here": digest({"a": [1.0, 2.5]}),
         "result": "a[1]: 2.0 -> 2.5"}]
    assert compare(record, {"c": {"a": [1.0, 2.0]}})[0]["result"] == "identical"


def test_the_digest_is_of_the_values_exactly():
    assert digest({"b": 1.0, "a": 0.1}) == digest({"a": 0.1, "b": 1.0})
    assert digest({"a": 0.1}) != digest({"a": 0.1 + 2 ** -56})

