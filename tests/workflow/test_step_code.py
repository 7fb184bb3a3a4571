"""The digest of a step's code (workflow/step_code.py) on a planted project: the slice of the entry file, the closure
of the modules it imports (function-level, relative and lazy ones included), and what changes it and what does not."""

import re
from pathlib import Path

import pytest

from workflow.step_code import module_text, step_code, step_texts

PLANTED = {
    "pkg/__init__.py": '"""The package."""\n',
    "pkg/__main__.py": (
        '"""Steps."""\n'
        "from pkg.shared import HELPER_VALUE\n"
        "from pkg import other\n"
        "LIMIT = 3  # the cells' limit\n"
        "\n"
        "def _clip(x):\n"
        "    return min(x, LIMIT)\n"
        "\n"
        "def cells(args):\n"
        '    """Cells."""\n'
        "    from .numerics import compute\n"
        "    return _clip(compute(args)) + HELPER_VALUE\n"
        "\n"
        "def figures(args):\n"
        "    return other.draw(args)\n"
    ),
    "pkg/shared.py": "HELPER_VALUE = 1\n",
    "pkg/numerics.py": "def compute(x):\n    from pkg.lazy_pkg import kernel\n    return kernel(x)\n",
    "pkg/other.py": "def draw(x):\n    return x\n",
    "pkg/lazy_pkg/__init__.py": "from pkg.lazy import lazy_exports\n"
                                "__getattr__, __dir__, _LAZY = lazy_exports(__name__, {'kernels': ('kernel',)})\n",
    "pkg/lazy_pkg/kernels.py": "def kernel(x):\n    return 2 * x\n",
    "pkg/lazy.py": "def lazy_exports(name, table):\n    return None, None, []\n",
    "pkg/templates/page.html": "<p>{{ x }}</p>\n",
}


@pytest.fixture
def project(tmp_path) -> Path:
    for name, text in PLANTED.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def edit(root: Path, name: str, old: str, new: str) -> None:
    path = root / name
    text = path.read_text()
    assert old in text, (name, old)
    path.write_text(text.replace(old, new))


def digest(root: Path, entry: str = "pkg.__main__:cells", *files: str) -> str:
    module_text.cache_clear()  # the planted files change between the calls of a test
    return step_code(entry, *files, root=root)


def test_the_slice_and_the_closure_of_a_step(project):
    texts = step_texts("pkg.__main__:cells", project)
    assert sorted(texts) == ["pkg", "pkg.__main__:cells", "pkg.lazy", "pkg.lazy_pkg", "pkg.lazy_pkg.kernels",
                             "pkg.numerics", "pkg.shared"]  # not pkg.other: only figures imports it
    assert texts["pkg.__main__:cells"] == (
        "from pkg.shared import HELPER_VALUE\nLIMIT = 3  # the cells' limit\ndef _clip(x):\n    return min(x, LIMIT)\n"
        "def cells(args):\n    from .numerics import compute\n    return _clip(compute(args)) + HELPER_VALUE")
    assert texts["pkg"] == ""  # a docstring only


@pytest.mark.parametrize(("name", "old", "new"), [
    ("pkg/__main__.py", '"""Cells."""', '"""Cells, reworded\n    over two lines."""'),  # a docstring
    ("pkg/__main__.py", "    return other.draw(args)\n", "    return other.draw(args) + 1\n"),  # another step
    ("pkg/other.py", "return x", "return -x"),  # a module only another step imports
    ("pkg/numerics.py", "def compute", "# a comment line\n\ndef compute"),  # a comment line, a blank line
    ("pkg/shared.py", "HELPER_VALUE = 1\n", "HELPER_VALUE = 1   \n"),  # trailing spaces
])
def test_what_leaves_the_digest_as_it_is(project, name, old, new):
    before = digest(project)
    edit(project, name, old, new)
    assert digest(project) == before


@pytest.mark.parametrize(("name", "old", "new"), [
    ("pkg/__main__.py", "LIMIT = 3", "LIMIT = 4"),  # a constant the step reads through a helper
    ("pkg/__main__.py", "from pkg.shared import HELPER_VALUE", "from pkg.other import draw as HELPER_VALUE"),
    ("pkg/numerics.py", "return kernel(x)", "return kernel(x) + 0"),  # a module the step imports in a function
    ("pkg/lazy_pkg/kernels.py", "2 * x", "3 * x"),  # a submodule a package re-exports lazily
    ("pkg/lazy_pkg/__init__.py", "from pkg.lazy", "X = 1\nfrom pkg.lazy"),  # a package on the way
])
def test_what_changes_the_digest(project, name, old, new):
    before = digest(project)
    edit(project, name, old, new)
    assert digest(project) != before


def test_a_whole_module_entry_and_the_files_a_step_reads(project):
    whole = digest(project, "pkg.__main__")
    assert whole != digest(project)
    edit(project, "pkg/__main__.py", "return other.draw(args)", "return other.draw(args) * 2")
    assert digest(project, "pkg.__main__") != whole  # the whole module: every step of it
    with_files = digest(project, "pkg.__main__:cells", "pkg/templates")
    assert with_files != digest(project)
    edit(project, "pkg/templates/page.html", "<p>", "<div>")
    assert digest(project, "pkg.__main__:cells", "pkg/templates") != with_files  # byte for byte


def test_two_functions_slice_both(project):
    assert digest(project, "pkg.__main__:cells,figures") not in (digest(project), digest(project, "pkg.__main__"))
    assert "pkg.other" in step_texts("pkg.__main__:cells,figures", project)


@pytest.mark.parametrize(("entry", "files", "message"), [
    ("pkg.__main__:draw", (), "step 'pkg.__main__:draw': no function 'draw'"),
    ("pkg.missing", (), "step 'pkg.missing': module 'pkg.missing' is not a file"),
    ("pkg.__main__:cells", ("pkg/nothing",), "step file 'pkg/nothing' does not exist"),
])
def test_a_bad_entry_is_named(project, entry, files, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        digest(project, entry, *files)


def test_every_rule_digests_the_step_its_shell_runs():
    """Each rule that runs ``python -m <module> <step>`` names that module's step in its ``code`` param (the check a
    new rule meets: its results go stale when its code changes)."""
    root = Path(__file__).resolve().parents[2]
    rules = [*sorted((root / "workflow/rules").glob("*.smk")), *sorted((root / "papers").glob("*/rules.smk"))]
    shared = {"WQ_TRAIN": (root / "papers/winq/rules.smk").read_text().split("WQ_TRAIN = (")[1].split(")\n")[0]}
    checked = 0
    for path in rules:
        for block in re.split(r"(?m)^(?=rule \w+:)", path.read_text())[1:]:
            name = block.split(":")[0].removeprefix("rule ")
            shell = block.split("    shell:\n")[-1] if "    shell:\n" in block else ""
            shell = shared.get(shell.strip(), shell)
            run = re.search(r"-m ([a-z0-9_.]+)", shell)
            if run is None:
                continue
            code = re.search(r'code=step_code\("([^"]+)"', block)
            assert code is not None, f"{path.name}: rule {name} runs python -m {run[1]} without a code param"
            assert code[1].startswith(run[1] + "."), f"{path.name}: rule {name} runs {run[1]}, digests {code[1]}"
            step_code(code[1], root=root)  # the entry exists
            checked += 1
    assert checked >= 50
