"""The code a workflow step runs, as a digest its rule records among its params, so that Snakemake's own change
detection (``rerun-triggers: params``: a dry run's "Params have changed" reason; ``make status``) names the results a
code change makes stale. Snakemake records a rule's shell text, not the Python that text starts; this is the Python.
(Snakemake 9's ``--list-changes params`` lists every recorded output whether its params changed or not: a falsy
``ParamsChange`` still carries its file. Use a dry run.)

A rule names its step's entry point, ``package.__main__:function`` (the function its sub-command runs;
``module:f,g`` for several, e.g. the handler and the parser whose defaults it reads) or ``package.__main__`` (a module
whose whole body is the step), and :func:`step_code` digests

* the **slice** of the entry file the functions need: the functions, and every top-level statement that binds a name
  they read, recursively (a helper, a constant, an import), so that another sub-command of the same file changes
  nothing here;
* the **closure** of the project's modules (files under the repository root) those statements import, at any depth:
  import statements at module level or inside functions, relative ones resolved, every package ``__init__`` on the
  way, and the submodules a package names in its :func:`common.lazy.lazy_exports` table (its lazy re-exports);
* the **files** a step reads from the source tree beside its code (a report's templates), byte for byte.

Each Python text is compared without its docstrings, comment lines, trailing spaces and blank lines (an edit of the
prose stales nothing) and otherwise as written, so the digest does not depend on the Python version that computes
it. It is the first 16 hex digits of the SHA-256 of the module names and texts in sorted order.

The digest over-approximates: a change to any statement of an imported module stales the step, used or not. It does
not see what a step reads outside the source tree (its inputs and config are the rule's own inputs and params), nor a
change of an installed library (the rule's ``conda`` environment file, ``rerun-triggers: software-env``)."""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

LAZY_TABLE = "lazy_exports"  # common.lazy: lazy_exports(__name__, {submodule: names})


def module_file(module: str, root: Path) -> Path | None:
    """The file of dotted module ``module`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``), or None."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement under ``node`` at any depth (the bodies of compound statements, not expressions: imports and
    docstrings are statements, and a walk of every expression node would cost a Snakefile's parse more)."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()) or ():
            if isinstance(child, ast.stmt):
                yield child
            yield from statements(child)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names of everything ``tree`` (the module ``module``; ``is_package`` for an ``__init__``) imports, at
    any depth: ``import x`` gives ``x``; ``from x import y`` gives ``x`` and ``x.y`` (relative ones resolved against
    the package); a top-level ``lazy_exports(__name__, {submodule: names})`` table gives each
    ``<package>.<submodule>``. A name that is not a module is the caller's to drop."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in [tree] if isinstance(tree, ast.stmt) else []:
        yield from imported_by(node, package)
    for node in statements(tree):
        yield from imported_by(node, package)


def imported_by(node: ast.stmt, package: list[str]) -> Iterator[str]:
    """What statement ``node`` (of a module in ``package``) imports: :func:`imported_modules` for one statement."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])]) \
            if node.level else (node.module or "")
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)
    elif isinstance(node, ast.Assign | ast.Expr) and isinstance(call := node.value, ast.Call) \
            and getattr(call.func, "id", None) == LAZY_TABLE and len(call.args) > 1 \
            and isinstance(table := call.args[1], ast.Dict):
        yield from (".".join([*package, key.value]) for key in table.keys
                    if isinstance(key, ast.Constant) and isinstance(key.value, str))


def prose_lines(tree: ast.Module) -> set[int]:
    """The line numbers (1-based) of a module's docstrings: the first statement of the module, a class or a function
    when it is a string constant (a docstring that shares a line with code would drop that code: none does here)."""
    found = set()
    for node in [tree, *statements(tree)]:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return found


def code_lines(source: str, tree: ast.Module) -> dict[int, str]:
    """``{line number: text}`` of ``source`` without docstrings, comment lines, trailing spaces and blank lines (a
    comment after code stays: telling it from a ``#`` in a string needs a tokenizer, which would double the cost)."""
    skip = prose_lines(tree)
    return {number: text.rstrip() for number, text in enumerate(source.splitlines(), 1)
            if number not in skip and text.strip() and not text.lstrip().startswith("#")}


def bound_names(statement: ast.stmt) -> set[str]:
    """The names a top-level statement binds: a def's or class's name, an assignment's targets, an import's aliases."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {statement.name}
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, ast.AnnAssign | ast.AugAssign) else []
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def read_names(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


def function_slice(tree: ast.Module, functions: list[str], where: str) -> list[ast.stmt]:
    """The top-level statements of ``tree`` that the functions ``functions`` need, in file order: their defs and every
    statement binding a name a needed statement reads, recursively. ValueError naming ``where`` (the step's entry)
    and a function the module does not define."""
    binders: dict[str, list[ast.stmt]] = {}
    for statement in tree.body:
        for name in bound_names(statement):
            binders.setdefault(name, []).append(statement)
    defined = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)}
    missing = [name for name in functions if name not in defined]
    if missing:
        raise ValueError(f"step {where!r}: no function {missing[0]!r} at the top level of its module")
    needed: list[ast.stmt] = []
    todo = [defined[name] for name in functions]
    while todo:
        statement = todo.pop()
        if any(statement is s for s in needed):
            continue
        needed.append(statement)
        todo.extend(s for name in read_names(statement) for s in binders.get(name, ()))
    order = {id(s): i for i, s in enumerate(tree.body)}
    return sorted(needed, key=lambda s: order[id(s)])


def statement_lines(statement: ast.stmt) -> range:
    first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
    return range(first, (statement.end_lineno or statement.lineno) + 1)


def step_texts(entry: str, root: Path) -> dict[str, str]:
    """``{module name: normalized text}`` of everything step ``entry`` runs (the module docstring's three parts: the
    entry's slice, under ``<module>:<function>``, and the closure of project modules it imports). ValueError naming
    an entry whose module is not a file under ``root``."""
    module, _, function = entry.partition(":")
    path = module_file(module, root)
    if path is None:
        raise ValueError(f"step {entry!r}: module {module!r} is not a file under {root}")
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = code_lines(source, tree)
    if function:
        needed = function_slice(tree, function.split(","), entry)
        texts = {entry: "\n".join(lines[n] for s in needed for n in statement_lines(s) if n in lines)}
        todo = [name for s in needed for name in imported_modules(s, module, path.name == "__init__.py")]
    else:
        texts = {}
        todo = [module]
    todo += parent_packages(module)
    resolved = root.resolve()  # once: a step's closure walks thousands of names (resolving each cost 1-2 s a parse)
    while todo:
        name = todo.pop()
        if name in texts or (found := module_text(name, resolved)) is None:
            continue
        texts[name], imports = found
        todo.extend(parent_packages(name))
        todo.extend(imports)
    return texts


@functools.cache
def module_text(module: str, root: Path) -> tuple[str, tuple[str, ...]] | None:
    """``(normalized text, imported names)`` of project module ``module`` (None when it is no file under ``root``),
    read once per process: a Snakefile digests every rule's step, and most share their modules."""
    file = module_file(module, root)
    if file is None:
        return None
    source = file.read_text(encoding="utf-8")
    tree = ast.parse(source)
    imports = tuple(imported_modules(tree, module, file.name == "__init__.py"))
    return "\n".join(code_lines(source, tree).values()), imports


def parent_packages(module: str) -> list[str]:
    """The packages Python imports before ``module`` (``a``, ``a.b`` for ``a.b.c``)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def source_files(paths: Iterable[str], root: Path) -> Iterator[Path]:
    """Every file of ``paths`` (files, or folders walked), in sorted order; ValueError naming a missing one."""
    for name in paths:
        path = root / name
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        elif path.is_file():
            yield path
        else:
            raise ValueError(f"step file {name!r} does not exist under {root}")


def step_code(entry: str, *files: str, root: str | Path = ".") -> str:
    """The digest of step ``entry`` (``package.__main__:function`` or a module) and of ``files`` (paths under
    ``root``, folders walked) that a rule records among its params: the first 16 hex digits of the SHA-256 over the
    step's normalized texts (:func:`step_texts`) by module name, then the files' paths and bytes."""
    root = Path(root)
    digest = hashlib.sha256()
    for name, text in sorted(step_texts(entry, root).items()):
        digest.update(f"{name}\0{text}\0".encode())
    for path in source_files(files, root):
        digest.update(f"{path.relative_to(root).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
