"""The import layers of ``common`` (issue 30): ``common.models`` imports neither ``common.ptq`` nor ``common.qat``,
``common.ptq`` does not import ``common.qat``, and the recipes and the front door load neither until a recipe is
applied. Checked twice: in the source (every import statement, function-level ones included) and in a fresh
interpreter (what importing a layer actually loads)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# package folder -> the packages no module in it may import
FORBIDDEN_IMPORTS = {"common/models": ("common.ptq", "common.qat"), "common/ptq": ("common.qat",)}
# module -> the packages importing it may not load (recipes and the front door import an implementation on use)
FORBIDDEN_LOADS = {"common.models": ("common.ptq", "common.qat"), "common.quantization": ("common.ptq", "common.qat"),
                   "common.ptq.cli": ("common.qat",)}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import statement of the file ``path`` (relative imports resolved against its
    package, ``from x import y`` also as ``x.y``)."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])]) \
                if node.level else node.module
            found += [(node.lineno, base), *((node.lineno, f"{base}.{alias.name}") for alias in node.names)]
    return found


def violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} imports {module}"
            for path in sorted((ROOT / folder).rglob("*.py")) for line, module in imported_modules(path)
            if any(module == name or module.startswith(f"{name}.") for name in forbidden)]


@pytest.mark.parametrize(("folder", "forbidden"), list(FORBIDDEN_IMPORTS.items()))
def test_no_module_imports_a_layer_above_its_own(folder, forbidden):
    assert violations(folder, forbidden) == []


def test_the_source_check_sees_every_kind_of_import(tmp_path, monkeypatch):
    """The checker is not vacuous: a top-level, a function-level and a relative import of ``common.qat`` are found."""
    package = tmp_path / "common" / "ptq"
    package.mkdir(parents=True)
    (package / "bad.py").write_text("import common.qat\n\ndef f():\n    from ..qat import lowbit\n"
                                    "    from common.qat.lowbit import attach_lowbit\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations("common/ptq", ("common.qat",)) == [
        "common/ptq/bad.py:1 imports common.qat", "common/ptq/bad.py:4 imports common.qat",
        "common/ptq/bad.py:4 imports common.qat.lowbit", "common/ptq/bad.py:5 imports common.qat.lowbit",
        "common/ptq/bad.py:5 imports common.qat.lowbit.attach_lowbit"]


@pytest.mark.parametrize(("module", "forbidden"), list(FORBIDDEN_LOADS.items()))
def test_importing_a_layer_loads_nothing_above_it(module, forbidden):
    script = (f"import sys, {module}; print(' '.join(sorted(n for n in sys.modules "
              f"if n.startswith({forbidden!r}))))")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert run.stdout.split() == [], f"importing {module} loaded {run.stdout.strip()}"
