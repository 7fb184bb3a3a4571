"""The conventions table's data: our side equals what common does, the authors' side the values read from their
code, and every aspect has a place in their code."""

from dataclasses import fields

import pytest
import torch

from common.formats import get_format, round_to_format
from common.report import conventions_table
from common.scaling import quantize_blocks
from common.theory import block_mse
from papers.microscaling_limits.conventions import CONVENTIONS

OURS, THEIRS = CONVENTIONS["lowbit"], CONVENTIONS["microscaling_limits_authors"]


def test_our_scale_maxima_are_the_formats():
    assert OURS.ue4m3_max_theory == OURS.ue4m3_max_quantizer == get_format("ue4m3").max == 448.0
    assert OURS.ue5m3_max_quantizer == get_format("ue5m3").max == 114688.0


def test_their_maxima():
    assert THEIRS.ue4m3_max_quantizer == 2.0**8 * 1.875  # E4M3 with the all-ones mantissa: NaN in E4M3FN
    assert THEIRS.ue5m3_max_quantizer == 2.0**15 * 1.875  # the top exponent reserved
    assert 6 * THEIRS.ue5m3_max_quantizer == 368640.0


def test_a_zero_scale_block_is_zero_either_way():
    """Ours flushes the block; theirs divides by 1, and every element of such a block rounds to 0 in E2M1."""
    edge = 6 * 2.0**-10  # the largest block max whose UE4M3 scale rounds to 0 (a tie: to even, 0)
    x = torch.tensor([[edge, -edge / 2, edge / 3, 0.0]])
    assert torch.equal(quantize_blocks(x, "e2m1", "ue4m3", 4, "absmax"), torch.zeros_like(x))
    assert torch.equal(round_to_format(x / 1.0, "e2m1"), torch.zeros_like(x))
    assert block_mse(1e-4, 16)["zero_blocks"] == pytest.approx(1e-8, rel=1e-12)  # every block flushes


def test_our_ties_go_to_even():
    assert round_to_format(torch.tensor([0.25, 0.75, 2.5]), "e2m1").tolist() == [0.0, 1.0, 2.0]
    assert OURS.ties == "even"
    assert THEIRS.ties == "away"


def test_every_aspect_has_a_place_in_their_code_and_a_row():
    aspects = [f.name for f in fields(THEIRS) if "aspect" in f.metadata]
    assert [name for name, _ in THEIRS.where] == aspects
    table = conventions_table(OURS, THEIRS)
    assert [row[0] for row in table["rows"]] == [f.metadata["aspect"] for f in fields(THEIRS) if "aspect" in f.metadata]
    assert [row[4] for row in table["rows"]] == ["different", "different", "same", "different", "different",
                                                 "different", "different", "different"]
    assert "modelling_errors_from_theory_fp8_scales.py @ 3c3dae1" in table["caption"]
