"""Lazy re-exports (common.lazy): a package's module-level ``__getattr__`` (PEP 562) imports a heavy submodule on
first use of what it exports; ``__all__`` and ``dir()`` list the lazy names before they load; the table is refused
where a name would be shadowed."""

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from common.lazy import lazy_exports

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "lazy_fixture"
# the packages of common with lazy exports (grep -rn lazy_exports common)
LAZY_PACKAGES = ("common.analysis", "common.eval", "common.formats", "common.qat", "common.scaling", "common.train")


@pytest.fixture
def package(tmp_path, monkeypatch):
    """``lazy_fixture``: ``LIGHT = 1`` and the lazy exports ``double`` and ``HEAVY`` of its submodule ``heavy``
    (whose import is recorded in ``lazy_fixture.loads``), ``second`` of ``other``."""
    folder = tmp_path / PACKAGE
    folder.mkdir()
    (folder / "__init__.py").write_text(
        "from common.lazy import lazy_exports\n\nLIGHT = 1\nloads = []\n"
        "__getattr__, __dir__, _LAZY = lazy_exports(__name__, {'heavy': ('double', 'HEAVY'), 'other': ('second',)})\n"
        "__all__ = ['LIGHT', *_LAZY]\n")
    (folder / "heavy.py").write_text(f"import {PACKAGE}\n{PACKAGE}.loads.append('heavy')\nHEAVY = 2\n\n\n"
                                     "def double(x):\n    return 2 * x\n")
    (folder / "other.py").write_text("def second():\n    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def test_the_submodule_loads_on_first_use(package):
    import lazy_fixture

    assert (lazy_fixture.LIGHT, lazy_fixture.loads) == (1, [])
    assert f"{PACKAGE}.heavy" not in sys.modules
    from lazy_fixture import HEAVY, double

    assert (HEAVY, double(3), lazy_fixture.loads) == (2, 6, ["heavy"])
    assert vars(lazy_fixture)["double"] is double  # kept in the namespace: later accesses skip __getattr__
    assert lazy_fixture.double is double
    assert lazy_fixture.loads == ["heavy"]
    assert type(lazy_fixture) is ModuleType  # a plain module: no class swap


def test_all_and_dir_list_the_lazy_names_before_they_load(package):
    import lazy_fixture

    assert lazy_fixture.__all__ == ["LIGHT", "double", "HEAVY", "second"]
    assert {"LIGHT", "double", "HEAVY", "second"} <= set(dir(lazy_fixture))
    assert dir(lazy_fixture) == sorted(dir(lazy_fixture))
    assert lazy_fixture.loads == []


def test_a_submodule_is_bound_as_usual(package):
    import lazy_fixture.other

    assert lazy_fixture.other.__name__ == f"{PACKAGE}.other"  # no export has its name
    assert lazy_fixture.second() == 2
    from lazy_fixture import heavy  # a submodule by ``from``: __getattr__ says no, the import system imports it

    assert (heavy.__name__, lazy_fixture.loads) == (f"{PACKAGE}.heavy", ["heavy"])


def test_a_name_nobody_exports_is_an_attribute_error(package):
    import lazy_fixture

    with pytest.raises(AttributeError, match="module 'lazy_fixture' has no attribute 'missing'"):
        lazy_fixture.missing  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'missing'"):
        from lazy_fixture import missing  # noqa: F401


@pytest.mark.parametrize(("exports", "name"), [
    ({"other": ("second",), "heavy": ("second",)}, "second"),  # exported twice
    ({"other": ("LIGHT",)}, "LIGHT"),  # already defined by the package
    ({"other": ("heavy",)}, "heavy"),  # the name of a submodule: importing it would rebind the name
])
def test_a_shadowed_name_is_refused(package, exports, name):
    import lazy_fixture

    with pytest.raises(ValueError, match=f"'{name}' is exported twice, already defined or the name of a submodule"):
        lazy_exports(PACKAGE, exports)
    assert lazy_fixture.LIGHT == 1


def test_importing_the_packages_of_common_imports_none_of_their_lazy_names():
    """In a fresh interpreter: no lazy name is loaded (so no heavy submodule ran), nor torch or transformers."""
    script = (f"import importlib, sys\npackages = [importlib.import_module(p) for p in {LAZY_PACKAGES!r}]\n"
              "print(sorted(n for p in packages for n in p._LAZY if n in vars(p)), "
              "sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["[]", "[]"]
