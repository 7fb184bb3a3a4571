"""Numerics conventions as data: the registry, validation naming the value, and the options of a variant."""

import dataclasses

import pytest
import torch

from common.quantizers import quantize_tensor
from common.recipes import QuantSpec
from common.scaling import quantize_blocks
from common.scaling.conventions import (
    CONVENTIONS,
    NumericsConvention,
    aspects,
    block_options,
    get_convention,
    spec_options,
)

OURS, AUTHORS = CONVENTIONS["lowbit"], CONVENTIONS["finer_is_better_authors"]


def test_registry_holds_ours_and_the_authors():
    assert (OURS.hierarchical_scope, OURS.ties, OURS.compute_dtype, OURS.e8m0_candidates,
            OURS.ue5m3_hierarchical_target, OURS.ue5m3_max) == ("token", "even", "float32", "ocp", 448.0, 114688.0)
    assert (AUTHORS.hierarchical_scope, AUTHORS.ties, AUTHORS.compute_dtype, AUTHORS.e8m0_candidates,
            AUTHORS.ue5m3_hierarchical_target, AUTHORS.ue5m3_max) == (
        "sequence", "down", "bfloat16", "floor_ceil", 61440.0, 61440.0)
    assert get_convention("lowbit") is OURS
    assert get_convention(AUTHORS) is AUTHORS
    with pytest.raises(ValueError, match="'theirs'"):
        get_convention("theirs")


def test_every_aspect_of_the_authors_has_a_place_in_their_code():
    fields = [aspect["field"] for aspect in aspects()]
    assert fields == ["hierarchical_scope", "ties", "compute_dtype", "e8m0_candidates", "ue5m3_hierarchical_target",
                      "ue5m3_max"]
    assert [key for key, _ in AUTHORS.where] == sorted(fields)
    assert all(location.startswith("torch_eval.py:") for _, location in AUTHORS.where)
    assert OURS.where == ()
    assert OURS.source == ""


def test_our_convention_gives_todays_specs():
    """The paper's variants under ours are the specs the pipeline has always built (equal, so equal records)."""
    hierarchical = QuantSpec("e2m1", "ue4m3", 4, **spec_options("lowbit", "four_over_six", hierarchical=True))
    assert hierarchical == QuantSpec("e2m1", "ue4m3", 4, "four_over_six", False, "row", (), 448.0)
    assert hierarchical.to_dict() == QuantSpec("e2m1", "ue4m3", 4, "four_over_six", False, "row", (),
                                               448.0).to_dict()
    mx = QuantSpec("e2m1", "e8m0", 32, **spec_options(OURS, "four_over_six", scale="e8m0"))
    assert mx == QuantSpec("e2m1", "e8m0", 32, "four_over_six")


def test_the_authors_convention_options():
    assert spec_options(AUTHORS, "four_over_six", hierarchical=True, scale="ue5m3") == {
        "rule": "four_over_six", "prevent_zero": False, "global_scale": "slice", "global_target": 61440.0,
        "ties": "down", "compute_dtype": "bfloat16", "rule_options": {}}
    assert spec_options(AUTHORS, "absmax", prevent_zero=True, hierarchical=True)["global_target"] == 448.0
    assert spec_options(AUTHORS, "four_over_six", scale="e8m0")["rule_options"] == {"e8m0_candidates": "floor_ceil"}
    assert block_options(AUTHORS, "four_over_six", scale="e8m0") == {
        "rule": "four_over_six", "prevent_zero": False, "global_scale": None, "global_target": None, "ties": "down",
        "compute_dtype": "bfloat16", "e8m0_candidates": "floor_ceil"}


def test_block_options_and_spec_options_quantize_alike():
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1)).bfloat16()
    spec = QuantSpec("e2m1", "e8m0", 16, **spec_options(AUTHORS, "four_over_six", scale="e8m0"))
    assert torch.equal(quantize_tensor(x, spec), quantize_blocks(x, "e2m1", "e8m0", 16,
                                                         **block_options(AUTHORS, "four_over_six", scale="e8m0")))


@pytest.mark.parametrize(("change", "message"), [
    ({"hierarchical_scope": "batch"}, "unknown hierarchical_scope 'batch'"),
    ({"ties": "odd"}, "unknown ties 'odd'"),
    ({"compute_dtype": "float16"}, "unknown compute_dtype 'float16'"),
    ({"e8m0_candidates": "nearest"}, "unknown e8m0_candidates 'nearest'"),
    ({"ue5m3_hierarchical_target": float("inf")}, "ue5m3_hierarchical_target must be a finite number > 0, got inf"),
    ({"ue5m3_max": True}, "ue5m3_max must be a finite number > 0, got True"),
    ({"where": {"rounding": "x.py:1"}}, "unknown aspect 'rounding' in where"),
])
def test_bad_values_are_named(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(OURS, **change)


def test_where_is_stored_sorted_and_hashable():
    convention = NumericsConvention("x", "token", "even", "float32", "ocp", 448, 114688,
                                    where={"ties": "b.py:2", "compute_dtype": "a.py:1"})
    assert convention.where == (("compute_dtype", "a.py:1"), ("ties", "b.py:2"))
    assert hash(convention) == hash(dataclasses.replace(convention))
    assert convention.hierarchical_target("ue5m3") == 448.0
