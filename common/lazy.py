"""Lazy re-exports of a package: what a package re-exports from its submodules that import torch or transformers is
imported on first use, so that importing a light part of the package (a registry, a dataclass, a constant) or a
sibling submodule does not load them (a figure or claims step reads JSON and never needs them).

A package ``__init__`` names its heavy re-exports as data, by submodule, as it would import them::

    lazy_exports(__name__, {"codec": ("decode", "encode"), "quantize": ("OVERFLOWS", "ROUNDINGS", "quantize")})

``package.name`` and ``from package import name`` then import the submodule on first access; ``__all__`` and
``dir()`` list them as before. The import system binds a submodule to its package under the submodule's name once it
loads it; where an export has that name (``common.formats.quantize``, the function of the submodule ``quantize``)
the export keeps it, as an eager ``from .quantize import quantize`` does.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Mapping
from types import ModuleType


class LazyPackage(ModuleType):
    """A package module whose ``_lazy_exports`` (name -> submodule) are imported on first access
    (:func:`lazy_exports`)."""

    def __getattr__(self, name: str):
        submodule = self.__dict__.get("_lazy_exports", {}).get(name)
        if submodule is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{self.__name__}.{submodule}"), name)
        ModuleType.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value) -> None:
        if (name in self.__dict__.get("_lazy_exports", {}) and isinstance(value, ModuleType)
                and value.__name__ == f"{self.__name__}.{name}"):
            return  # the import system binding the same-named submodule: the export keeps the name
        ModuleType.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.__dict__.get("_lazy_exports", {})})


def lazy_exports(package: str, exports: Mapping[str, Iterable[str]]) -> None:
    """Make the package ``package`` (its ``__name__``) export ``exports`` (submodule -> the names it re-exports from
    it) lazily; ValueError naming a name exported twice or one the package already defines."""
    module = sys.modules[package]
    earlier = module.__dict__.get("_lazy_exports", {})  # a reloaded package keeps the exports it loaded
    names: dict[str, str] = {}
    for submodule, exported in exports.items():
        for name in exported:
            if name in names or (name in module.__dict__ and name not in earlier):
                raise ValueError(f"{package}: {name!r} is exported twice or already defined")
            names[name] = submodule
    module.__class__ = LazyPackage
    ModuleType.__setattr__(module, "_lazy_exports", names)
