"""Where finer stops being better: the smallest block's gap against the best, with a relative tie tolerance."""

import pytest

from common.analysis import gap_inverts


@pytest.mark.parametrize(("gaps", "tol", "expected"), [
    ({4: 0.5, 8: 0.25, 16: 0.375}, 0.02, True),
    ({4: 0.25, 8: 0.375, 16: 0.5}, 0.02, False),
    ({4: 0.5078125, 8: 0.5}, 2**-6, False),  # exactly tol x best above: a tie
    ({4: 0.5078125 + 2**-20, 8: 0.5}, 2**-6, True),
    ({4: -0.4921875, 8: -0.5}, 2**-6, False),  # a negative best gap: tol of its magnitude
    ({4: -0.4921875 + 2**-20, 8: -0.5}, 2**-6, True),
    ({16: 0.5, 4: 0.75, 8: 0.25}, 0.0, True),  # the smallest block, not the first key
    ({4: 0.25}, 0.0, False),
    ({}, 0.02, False),
])
def test_gap_inverts(gaps, tol, expected):
    assert gap_inverts(gaps, tol) is expected
