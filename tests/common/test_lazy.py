"""Lazy re-exports (common.lazy): a package's heavy submodule loads on first use of what it exports, and an export
named as its submodule stays the export whichever is imported first, as an eager re-export does."""

import sys

import pytest

from common.lazy import lazy_exports

PACKAGE = "lazy_fixture"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """``lazy_fixture``: ``LIGHT = 1`` and the lazy exports ``quantize`` and ``HEAVY`` of its submodule ``quantize``
    (whose import is recorded in ``lazy_fixture.loads``), ``second`` of ``other``."""
    folder = tmp_path / PACKAGE
    folder.mkdir()
    (folder / "__init__.py").write_text(
        "from common.lazy import lazy_exports\n\nLIGHT = 1\nloads = []\n"
        "lazy_exports(__name__, {'quantize': ('quantize', 'HEAVY'), 'other': ('second',)})\n")
    (folder / "quantize.py").write_text(f"import {PACKAGE}\n{PACKAGE}.loads.append('quantize')\nHEAVY = 2\n\n\n"
                                        "def quantize(x):\n    return 2 * x\n")
    (folder / "other.py").write_text("def second():\n    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def test_the_submodule_loads_on_first_use(package):
    import lazy_fixture

    assert (lazy_fixture.LIGHT, lazy_fixture.loads) == (1, [])
    assert f"{PACKAGE}.quantize" not in sys.modules
    from lazy_fixture import HEAVY, quantize

    assert (HEAVY, quantize(3), lazy_fixture.loads) == (2, 6, ["quantize"])
    assert {"HEAVY", "quantize", "second", "LIGHT"} <= set(dir(lazy_fixture))


def test_an_export_named_as_its_submodule_stays_the_export(package):
    import lazy_fixture.quantize  # the submodule first, by its dotted name
    from lazy_fixture import quantize

    assert quantize(2) == 4
    assert lazy_fixture.quantize is quantize is sys.modules[f"{PACKAGE}.quantize"].quantize


def test_another_submodule_is_bound_as_usual(package):
    import lazy_fixture.other

    assert lazy_fixture.other.__name__ == f"{PACKAGE}.other"  # no export has its name
    assert lazy_fixture.second() == 2


def test_a_name_nobody_exports_is_an_attribute_error(package):
    import lazy_fixture

    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        lazy_fixture.missing  # noqa: B018


def test_a_name_exported_twice_is_refused(package):
    import lazy_fixture

    with pytest.raises(ValueError, match="'LIGHT' is exported twice or already defined"):
        lazy_exports(PACKAGE, {"other": ("LIGHT",)})
    assert lazy_fixture.LIGHT == 1
