"""The import layers of ``common`` (issue 30): ``common.models`` imports neither ``common.ptq`` nor ``common.qat``,
``common.ptq`` does not import ``common.qat``, and the recipes and the front door load neither until a recipe is
applied. Checked twice: in the source (every import statement, function-level ones included) and in a fresh
interpreter (what importing a layer actually loads).

The steps that only read records load neither torch nor transformers (each is a process of its own, and importing
them costs more CPU than the step): every paper's step entry point and figures, the claims, contexts and summaries
that read JSON, and the report (:mod:`common.lazy`: the packages of ``common`` import their heavy parts on use)."""

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
PAPERS = sorted(p.parent.name for p in (ROOT / "papers").glob("*/rules.smk"))
HEAVY = ("torch", "transformers")
# the modules of the steps that read records only (figures, claims, contexts, summaries, the report)
LIGHT_STEPS = [*(f"papers.{paper}.{module}" for paper in PAPERS for module in ("__main__", "figures")),
               "papers.finer_is_better.claims", "papers.finer_is_better.context", "papers.finer_is_better.numerical",
               "papers.finer_is_better.model_study", "papers.maxwindow_hif8.claims", "papers.maxwindow_hif8.context",
               "papers.maxwindow_hif8.study", "papers.microscaling_limits.context",
               "papers.microscaling_limits.model_study", "papers.winq.study", "common.report.__main__"]


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


def loaded(modules: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules named ``prefixes`` (or below them) that importing ``modules`` (comma-separated) loads in a fresh
    interpreter."""
    script = f"import sys, {modules}; print(' '.join(sorted(n for n in sys.modules if n.startswith({prefixes!r}))))"
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


@pytest.mark.parametrize(("module", "forbidden"), list(FORBIDDEN_LOADS.items()))
def test_importing_a_layer_loads_nothing_above_it(module, forbidden):
    assert loaded(module, forbidden) == [], f"importing {module} loaded them"


def test_the_steps_that_read_records_load_neither_torch_nor_transformers():
    """All of them in one interpreter; on a failure each alone, to name the ones that load them."""
    if loaded(", ".join(LIGHT_STEPS), HEAVY):
        culprits = {module: loaded(module, HEAVY)[:3] for module in LIGHT_STEPS}
        pytest.fail(f"these load torch or transformers: { {m: c for m, c in culprits.items() if c} }")


def test_the_check_sees_torch():
    """Not vacuous: importing a quantizer does load torch."""
    assert "torch" in loaded("common.formats.rounding", HEAVY)
