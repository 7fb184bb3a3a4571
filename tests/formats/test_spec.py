"""Derived constants of every registered format, against the values the fact sheets and issues state."""

import math

import numpy as np
import pytest

from common.formats import FORMATS, Family, Specials, get_format

# (name, max, min normal, min subnormal, distinct finite values) as stated by the specs
STATED = [
    ("e4m3", 448.0, 2.0**-6, 2.0**-9, 253),
    ("e5m2", 57344.0, 2.0**-14, 2.0**-16, 247),
    ("e3m2", 28.0, 2.0**-2, 2.0**-4, 63),
    ("e2m3", 7.5, 1.0, 2.0**-3, 63),
    ("e2m1", 6.0, 1.0, 0.5, 15),
    ("e8m0", 2.0**127, 2.0**-127, 2.0**-127, 255),
    ("ue4m3", 448.0, 2.0**-6, 2.0**-9, 127),
    ("ue5m3", 1.75 * 2.0**16, 2.0**-14, 2.0**-17, 255),
    ("hif8", 2.0**15, 2.0**-15, 2.0**-22, 253),
    ("int8", 127.0, 1.0, 1.0, 255),
    ("int4", 7.0, 1.0, 1.0, 15),
    ("int2", 1.0, 1.0, 1.0, 3),
    ("ternary", 1.0, 1.0, 1.0, 3),
    ("int4_tc", 7.0, 1.0, 1.0, 16),
    ("int3_tc", 3.0, 1.0, 1.0, 8),
    ("binary", 1.0, 1.0, 1.0, 2),
    ("midrise2", 3.0, 1.0, 1.0, 4),
]


@pytest.mark.parametrize(("name", "max_", "min_normal", "min_sub", "count"), STATED)
def test_stated_constants(name, max_, min_normal, min_sub, count):
    fmt = get_format(name)
    assert fmt.max == max_
    assert fmt.min_normal == min_normal
    assert fmt.min_subnormal == min_sub
    assert fmt.num_finite == count


def test_wide_float_constants():
    bf16, fp32 = get_format("bf16"), get_format("fp32")
    assert bf16.max == (2 - 2.0**-7) * 2.0**127
    assert bf16.min_subnormal == 2.0**-133
    assert fp32.max == float(np.finfo(np.float32).max)
    assert fp32.min_subnormal == 2.0**-149
    assert fp32.min_normal == float(np.finfo(np.float32).tiny)


@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if f.family is Family.FLOAT and f.is_codebook])
def test_float_formulas_agree_with_code_table(name):
    """max/min derived by formula equal the extremes of the decoded code table (two independent derivations)."""
    fmt = get_format(name)
    values = fmt.finite_values
    assert fmt.max == values.max()
    assert fmt.min_subnormal == values[values > 0].min()
    assert fmt.has_zero == (0.0 in values)


# (name, every code's value in code order): the integer and mid-rise grids written out
GRIDS = [
    ("int4", [0, 1, 2, 3, 4, 5, 6, 7, math.nan, -7, -6, -5, -4, -3, -2, -1]),
    ("int4_tc", [0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1]),
    ("int3_tc", [0, 1, 2, 3, -4, -3, -2, -1]),
    ("int2", [0, 1, math.nan, -1]),
    ("ternary", [0, 1, math.nan, -1]),
    ("midrise2", [1, 3, -3, -1]),
    ("binary", [1, -1]),
]


@pytest.mark.parametrize(("name", "values"), GRIDS)
def test_integer_and_midrise_code_tables(name, values):
    np.testing.assert_array_equal(get_format(name).code_values, np.array(values, dtype=np.float64))


@pytest.mark.parametrize(("name", "lowest", "symmetric", "has_zero"), [
    ("int4", -7.0, True, True), ("int4_tc", -8.0, False, True), ("int3_tc", -4.0, False, True),
    ("midrise2", -3.0, True, False), ("binary", -1.0, True, False), ("e2m1", -6.0, True, True),
    ("ue4m3", 0.0, False, True), ("e8m0", 2.0**-127, False, False), ("bf16", -get_format("bf16").max, True, True),
])
def test_lowest_symmetric_and_zero(name, lowest, symmetric, has_zero):
    fmt = get_format(name)
    assert (fmt.lowest, fmt.symmetric, fmt.has_zero) == (lowest, symmetric, has_zero)


def test_new_families_and_specials():
    assert get_format("midrise2").family is Family.MIDRISE
    assert get_format("int4_tc").family is Family.INT
    for name in ("int3_tc", "int4_tc", "midrise2"):
        fmt = get_format(name)
        assert fmt.specials is Specials.NONE
        assert (fmt.has_nan, fmt.has_inf, fmt.has_negative_zero) == (False, False, False)
    assert get_format("midrise2").ulp_at_max == 2.0
    assert get_format("int4_tc").ulp_at_max == 1.0


def test_hif8_has_126_positive_finite_values_and_its_specials():
    fmt = get_format("hif8")
    values = fmt.code_values
    assert (values[np.isfinite(values)] > 0).sum() == 126
    assert np.isnan(values[0x80])
    assert np.isnan(values).sum() == 1
    assert values[0x6F] == math.inf
    assert values[0xEF] == -math.inf
    assert np.isinf(values).sum() == 2
    assert not np.signbit(values[np.isfinite(values) & (values == 0)]).any()  # no negative zero


def test_specials_counts():
    counts = {name: (int(np.isnan(f.code_values).sum()), int(np.isinf(f.code_values).sum()))
              for name, f in FORMATS.items() if f.is_codebook}
    assert counts["e4m3"] == (2, 0)
    assert counts["e5m2"] == (6, 2)
    assert counts["e2m1"] == (0, 0)
    assert counts["e8m0"] == (1, 0)
    assert counts["ue4m3"] == (1, 0)
    assert counts["ue5m3"] == (1, 0)
    assert counts["int8"] == (1, 0)
    assert counts["int4_tc"] == counts["int3_tc"] == counts["midrise2"] == (0, 0)


def test_ulp_at_max():
    assert get_format("e4m3").ulp_at_max == 32.0
    assert get_format("e2m1").ulp_at_max == 2.0
    assert get_format("hif8").ulp_at_max == 2.0**14
    assert get_format("e8m0").ulp_at_max == 2.0**127


@pytest.mark.parametrize("bad", ["fp4", "E4M3", "", None, 3])
def test_unknown_format_names_the_value(bad):
    with pytest.raises(ValueError, match="unknown format") as err:
        get_format(bad)
    assert repr(bad) in str(err.value)
    assert "e2m1" in str(err.value)


def test_formats_are_frozen():
    with pytest.raises(AttributeError):
        get_format("e4m3").bias = 8
