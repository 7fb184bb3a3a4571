"""Register lowbit-lab's quantization method with transformers when transformers loads its quantizer registry.

``transformers.quantizers.auto`` imports every quantizer transformers ships (about 4 s), and every model load imports
it (``transformers.modeling_utils`` does). So :mod:`common.ptq` does not import it itself: it registers at once when
the module is already loaded, and otherwise adds a finder to ``sys.meta_path`` that runs
:func:`common.ptq.hf.register` right after the module executes, then removes itself. Either way
``from_pretrained`` of a lowbit-lab checkpoint finds the method after ``import common.ptq``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

REGISTRY_MODULE = "transformers.quantizers.auto"


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds :data:`REGISTRY_MODULE` through the other finders and wraps its loader to register afterwards."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != REGISTRY_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            sys.modules[fullname] = module  # what the import machinery does next; hf.py imports from it
            from .hf import register

            register()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def register_when_imported() -> None:
    """Register now if transformers' quantizer registry is loaded, else when it is (module docstring)."""
    if REGISTRY_MODULE in sys.modules:
        from .hf import register

        register()
    elif not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
