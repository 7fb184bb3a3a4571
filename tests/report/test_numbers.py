"""common.report.numbers: how a report writes a number."""

import pytest

from common.report import signed_percent


@pytest.mark.parametrize(("value", "decimals", "text"), [
    (0.01234, 2, "+1.23%"),
    (-0.5, 2, "-50.00%"),
    (0.0, 2, "+0.00%"),
    (0.0123456, 3, "+1.235%"),
    (2.0, 0, "+200%"),
    (None, 2, ""),
])
def test_signed_percent(value, decimals, text):
    assert signed_percent(value, decimals) == text
