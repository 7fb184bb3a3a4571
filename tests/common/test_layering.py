"""The import layers of the project, checked on everything that can import: module-level and function-level import
statements (``TYPE_CHECKING`` blocks included), relative imports, and the strings a module hands to
``importlib.import_module`` or ``__import__`` (a literal, or a table of module names in a module that imports
dynamically). A *room* is a top-level module or package of ``common`` (``common.quantizers``, ``common.io``), one
paper (``papers.winq``), ``workflow`` or ``bench``; :data:`LAYERS` lists the rooms from the bottom up, and

* every import between two rooms goes down a layer (an arrow up, or between two rooms of one layer, fails);
* no module imports itself through others (no circle of modules, inside a room or across);
* every room is in :data:`LAYERS` (a new one must be placed);
* importing the rooms bottom-up in one fresh interpreter, each loads no module of a room above its own (what the
  imports actually do at run time, dynamic ones included).

The checker is tested on a planted tree with one arrow up of each kind. The steps that only read records load
neither torch nor transformers (each is a process of its own, and importing them costs more CPU than the step):
every paper's step entry point and figures, the claims, contexts and summaries that read JSON, and the report."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from workflow.step_code import imported_by

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("common", "papers", "workflow", "bench")  # the folders whose Python files are rooms' modules
LAYERS: tuple[tuple[str, ...], ...] = (  # bottom up; the rooms of one layer import none of each other
    ("common", "papers", "common.io", "common.registry", "common.progress", "common.config", "common.compute",
     "common.lazy", "common.uncertainty", "common.select"),
    ("common.formats", "common.observers", "common.cli", "common.data"),
    ("common.scaling", "common.theory", "common.models"),
    ("common.recipes", "common.report", "common.train"),  # recipes: data, validated against scaling's names
    ("common.quantizers",),  # the quantizers that apply each recipe type
    ("common.quantization", "common.analysis"),  # the front door, dispatching on the recipe type
    ("common.qat",),  # QAT runs and low-bit checkpoints, through the front door
    ("common.ptq",),  # quantized checkpoints (the learned ones read low-bit QAT runs)
    ("common.eval",),  # loads every checkpoint kind, so imports their writers
    ("papers.finer_is_better", "papers.maxwindow_hif8", "papers.microscaling_limits", "papers.winq"),
    ("workflow",),
    ("bench",),  # measures what the workflow runs: its numerical pins (bench/numerics.py)
)
DYNAMIC_IMPORTS = ("import_module", "__import__")
PAPERS = sorted(p.parent.name for p in (ROOT / "papers").glob("*/rules.smk"))
HEAVY = ("torch", "transformers")
# the modules of the steps that read records only (figures, claims, contexts, summaries, the report)
LIGHT_STEPS = [*(f"papers.{paper}.{module}" for paper in PAPERS for module in ("__main__", "figures")),
               "papers.finer_is_better.claims", "papers.finer_is_better.context", "papers.finer_is_better.numerical",
               "papers.finer_is_better.model_study", "papers.maxwindow_hif8.claims", "papers.maxwindow_hif8.context",
               "papers.maxwindow_hif8.study", "papers.microscaling_limits.context",
               "papers.microscaling_limits.model_study", "papers.winq.study", "common.report.__main__"]


def project_modules(root: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` of every Python file under :data:`SOURCES` (a package by its ``__init__``)."""
    modules = {}
    for source in SOURCES:
        for path in sorted((root / source).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def room_of(module: str) -> str:
    """The room of a dotted module name: ``common.<x>``, ``papers.<paper>``, or the top folder (``workflow``,
    ``bench``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("common", "papers") else parts[0]


def imported_names(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of everything the file ``path`` (the module ``module``) imports: every import
    statement at any depth (relative ones resolved; ``from x import y`` gives ``x`` and ``x.y``), and, in a module
    that calls ``importlib.import_module`` or ``__import__``, every string constant (a literal argument, or an entry
    of a table of module names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    dynamic = any(isinstance(node, ast.Call) and (getattr(node.func, "attr", None) in DYNAMIC_IMPORTS
                                                  or getattr(node.func, "id", None) in DYNAMIC_IMPORTS)
                  for node in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):  # resolved as a step's code digest resolves them
            yield from ((node.lineno, name) for name in imported_by(node, package))
        elif dynamic and isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def import_edges(root: Path) -> list[tuple[str, int, str]]:
    """``(module, line, imported module)`` for every import of one project module by another (a name that is not a
    module of the project, e.g. a class imported from a package, counts as its package)."""
    modules = project_modules(root)
    edges = set()
    for module, path in modules.items():
        for line, name in imported_names(path, module):
            target = name if name in modules else name.rpartition(".")[0] if name.rpartition(".")[0] in modules \
                else None
            if target is not None and target != module:
                edges.add((module, line, target))
    return sorted(edges)


def layer_of(room: str, layers: tuple[tuple[str, ...], ...]) -> int | None:
    return next((index for index, rooms in enumerate(layers) if room in rooms), None)


def arrows_up(root: Path, layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import from a room into a room of its own layer or above (``file:line room -> room``; a room without a
    layer is :func:`unplaced_rooms`' finding)."""
    found = []
    for module, line, target in import_edges(root):
        source_room, target_room = room_of(module), room_of(target)
        if source_room == target_room:
            continue
        source_layer, target_layer = layer_of(source_room, layers), layer_of(target_room, layers)
        if source_layer is not None and target_layer is not None and target_layer >= source_layer:
            path = project_modules(root)[module].relative_to(root)
            found.append(f"{path}:{line} {source_room} -> {target_room}")
    return found


def unplaced_rooms(root: Path, layers: tuple[tuple[str, ...], ...]) -> list[str]:
    return sorted({room_of(module) for module in project_modules(root)} - {room for rooms in layers for room in rooms})


def circles(root: Path) -> list[list[str]]:
    """The circles of the module graph: its strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for module, _, target in import_edges(root):
        graph.setdefault(module, set()).add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_room_has_a_layer():
    assert unplaced_rooms(ROOT, LAYERS) == []


def test_every_import_goes_down_a_layer():
    assert arrows_up(ROOT, LAYERS) == []


def test_no_module_imports_itself_through_others():
    assert circles(ROOT) == []


PLANTED = {  # a tiny project, "common.low" below "common.high", and one arrow up of each kind in "common.low"
    "common/__init__.py": "",
    "common/high.py": "VALUE = 1\n",
    "common/low/__init__.py": "",
    "common/low/top.py": "import common.high\n",
    "common/low/function.py": "def f():\n    from common.high import VALUE\n    return VALUE\n",
    "common/low/relative.py": "from ..high import VALUE\n",
    "common/low/typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from common import high\n",
    "common/low/literal.py": "import importlib\n\ndef f():\n    return importlib.import_module('common.high')\n",
    "common/low/table.py": "import importlib\nPLUGINS = {'kind': 'common.high'}\n\n"
                           "def load(kind):\n    return importlib.import_module(PLUGINS[kind])\n",
    "common/low/dunder.py": "def f():\n    return __import__('common.high')\n",
    "common/low/fine.py": "NAME = 'common.high'  # a string, no dynamic import: not an arrow\n",
}
PLANTED_LAYERS = (("common",), ("common.low",), ("common.high",))


def test_the_checker_finds_an_arrow_up_of_each_kind(tmp_path):
    for name, text in PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert arrows_up(tmp_path, PLANTED_LAYERS) == [
        f"common/low/{name}.py:{line} common.low -> common.high"
        for name, line in (("dunder", 2), ("function", 2), ("literal", 4), ("relative", 1), ("table", 2),
                           ("top", 1), ("typing_only", 3))]
    assert arrows_up(tmp_path, (("common",), ("common.high",), ("common.low",))) == []
    assert unplaced_rooms(tmp_path, PLANTED_LAYERS[:2]) == ["common.high"]
    (tmp_path / "common/high.py").write_text("from common.low import top\n")
    assert circles(tmp_path) == [["common.high", "common.low.top"]]


def test_importing_the_rooms_bottom_up_loads_nothing_above_each():
    """One fresh interpreter imports the rooms layer by layer; the project modules each import loads must belong to
    its own room or a room below (the dynamic imports included, whatever their strings)."""
    script = (
        "import importlib, json, sys\n"
        f"layers = {[list(rooms) for rooms in LAYERS]!r}\n"
        "loaded, found = set(sys.modules), []\n"
        "for layer, rooms in enumerate(layers):\n"
        "    for room in rooms:\n"
        "        importlib.import_module(room)\n"
        "        new = {m for m in set(sys.modules) - loaded if m.split('.')[0] in ('common', 'papers', 'workflow',"
        " 'bench')}\n"
        "        loaded |= new\n"
        "        found += [[room, m] for m in sorted(new)]\n"
        "print(json.dumps(found))\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    above = [f"importing {room} loads {module}" for room, module in json.loads(run.stdout)
             if layer_of(room_of(module), LAYERS) > layer_of(room, LAYERS)]
    assert above == []


def loaded(modules: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules named ``prefixes`` (or below them) that importing ``modules`` (comma-separated) loads in a fresh
    interpreter."""
    script = f"import sys, {modules}; print(' '.join(sorted(n for n in sys.modules if n.startswith({prefixes!r}))))"
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def test_the_steps_that_read_records_load_neither_torch_nor_transformers():
    """All of them in one interpreter; on a failure each alone, to name the ones that load them."""
    if loaded(", ".join(LIGHT_STEPS), HEAVY):
        culprits = {module: loaded(module, HEAVY)[:3] for module in LIGHT_STEPS}
        pytest.fail(f"these load torch or transformers: { {m: c for m, c in culprits.items() if c} }")


def test_the_check_sees_torch():
    """Not vacuous: importing a quantizer does load torch."""
    assert "torch" in loaded("common.quantizers", HEAVY)
