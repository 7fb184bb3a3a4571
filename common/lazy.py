"""Lazy re-exports of a package: what a package re-exports from its submodules that import torch or transformers is
imported on first use, so that importing a light part of the package (a registry, a dataclass, a constant) or a
sibling submodule does not load them (a figure or claims step reads JSON and never needs them).

A package ``__init__`` names its heavy re-exports once, as data, by submodule, and binds the module-level
``__getattr__`` and ``__dir__`` of PEP 562 that :func:`lazy_exports` builds from that table::

    __getattr__, __dir__, _LAZY = lazy_exports(__name__, {"codec": ("decode", "encode"),
                                                          "rounding": ("OVERFLOWS", "ROUNDINGS", "round_to_format")})
    __all__ = ["FORMATS", "get_format", *_LAZY]

``package.name`` and ``from package import name`` then import the submodule on first access (Python calls the
module's ``__getattr__`` only for a name its namespace lacks) and keep the value in the package's namespace;
``dir(package)`` lists the lazy names before they load. A lazy name may not be the name of a submodule of the
package: the import system binds a submodule to its package under its own name when it loads it, which would
replace the export.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, Iterable[str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, names)`` for the package ``package`` (its ``__name__``, called from its
    ``__init__``) that exports ``exports`` (submodule -> the names it re-exports from it) lazily: ``names`` are the
    lazy names in table order, for ``__all__``. ``__getattr__(name)`` imports the submodule of ``name``, stores the
    value in the package's namespace and returns it; AttributeError naming any other name. ValueError naming a name
    exported twice, one the package already defines, or one that is also the name of a submodule of the package."""
    module = sys.modules[package]
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    where: dict[str, str] = {}
    for submodule, exported in exports.items():
        for name in exported:
            if name in where or name in vars(module) or name in submodules:
                raise ValueError(f"{package}: {name!r} is exported twice, already defined or the name of a submodule")
            where[name] = submodule

    def lazy_getattr(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(module, name, value)
        return value

    def lazy_dir() -> list[str]:
        return sorted({*vars(module), *where})

    return lazy_getattr, lazy_dir, list(where)
