"""The library installs into a user's own environment: the wheel built from the tracked files, installed with
``--no-deps`` into a new virtual environment whose other packages are the project's pinned set (``envs/``), passes
``pip check``, satisfies every extra without an index, runs the README's front-door example from a folder outside the
repository, and renders a report template from the installed package.

The new environment gets the pinned set without copying it (torch is several GB): a ``.pth`` file in its
site-packages names a folder of links to every entry of this interpreter's site-packages, except those of this
project (installed editable from a checkout) and of the packages of ``envs/requirements-nodeps.txt`` (installed with
``--no-deps`` on purpose, so their declared dependencies are missing and ``pip check`` would report them). Nothing is
downloaded: every pip call runs with ``--no-index``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from shared_testing import made_once

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "lowbit-lab"
EXTRAS = ("eval", "export", "reports", "pipeline")
FRONT_DOOR = "## The library through its front door"
SHIPPED_DATA = ("common/report/templates/*.j2", "papers/finer_is_better/data/*")
"""The data files the wheel must hold (pyproject.toml's ``[tool.setuptools.package-data]``), as globs of the tree."""
TIMEOUT_S = 300
ENV = {**{key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")},
       "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
       "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def run(*command: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
        code: str | None = None) -> subprocess.CompletedProcess[str]:
    """``command`` (``code`` on its standard input), asserted to succeed; its completed process."""
    done = subprocess.run([str(part) for part in command], cwd=cwd, input=code, env=ENV, capture_output=True,
                          text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def front_door_example(readme: str) -> str:
    """The first ```python block under the README's heading :data:`FRONT_DOOR`."""
    section = readme.split(f"\n{FRONT_DOOR}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert block is not None, f"no python block under {FRONT_DOOR!r} in README.md"
    return block.group(1)


def tracked_files() -> list[str]:
    """The files of the work tree git knows or would add (tracked, or untracked and not ignored), that exist."""
    listed = run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def unpinned_entries() -> set[str]:
    """The site-packages entries of this project and of the ``--no-deps`` packages of envs/, which the new
    environment leaves out."""
    nodeps = [re.split(r"[=<>!~;\[\s]", line.strip(), maxsplit=1)[0]
              for line in (ROOT / "envs" / "requirements-nodeps.txt").read_text().splitlines()
              if line.strip() and not line.lstrip().startswith("#")]
    entries = set()
    for name in (PROJECT, *nodeps):
        try:
            files = importlib.metadata.distribution(name).files or ()
        except importlib.metadata.PackageNotFoundError:
            continue
        entries |= {Path(file).parts[0] for file in files} - {"..", "__pycache__"}
    return entries


def make_environment(root: Path) -> None:
    """Under ``root``: ``wheel/`` (the wheel built from a copy of the tracked files in ``source/``), ``pinned/`` (the
    links to the pinned set), ``venv/`` (the new environment, the wheel installed with ``--no-deps``)."""
    source, wheel_dir, pinned, venv = (root / name for name in ("source", "wheel", "pinned", "venv"))
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--quiet",
        "-w", wheel_dir, source)
    pinned.mkdir()
    left_out = unpinned_entries()
    for site in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
        for entry in Path(site).iterdir():
            if entry.name not in left_out and entry.suffix != ".pth" and not (pinned / entry.name).exists():
                (pinned / entry.name).symlink_to(entry)
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "pinned-set.pth").write_text(f"{pinned}\n")  # pip too comes from the pinned set
    [wheel] = wheel_dir.glob("*.whl")
    run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet", wheel)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``wheel`` (its path), ``python`` (the new environment's interpreter), ``site`` (its site-packages)."""
    root = made_once(tmp_path_factory, "packaging", lambda shared: make_environment(shared / "packaging"))
    root /= "packaging"
    python = root / "venv" / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    [wheel] = (root / "wheel").glob("*.whl")
    return SimpleNamespace(wheel=wheel, python=python, site=Path(site).resolve())


def test_the_wheel_holds_the_packages_and_the_data_their_code_reads(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    tracked = tracked_files()
    modules = {name for name in tracked if name.startswith(("common/", "papers/")) and name.endswith(".py")}
    data = {name for pattern in SHIPPED_DATA for name in tracked if Path(name).match(pattern)}
    assert {"common/report/templates/report.html.j2", "common/report/templates/report.tex.j2",
            "common/report/templates/index.html.j2", "papers/finer_is_better/data/authors_results.csv",
            "papers/finer_is_better/data/authors_results.source.yaml"} <= data
    assert modules - names == set()
    assert data - names == set()
    assert not {name for name in names if name.startswith(("tests/", "workflow/", "bench/", "envs/"))}


def test_pip_check_passes_in_a_new_environment_of_the_pinned_set(installed):
    run(installed.python, "-m", "pip", "check")


def test_every_extra_is_satisfied_by_the_pinned_set_with_nothing_to_download(installed, tmp_path):
    report = tmp_path / "report.json"
    run(installed.python, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet", "--report", report,
        f"{PROJECT}[{','.join(EXTRAS)}] @ {installed.wheel.as_uri()}")
    assert [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]] == []


def test_the_readme_front_door_runs_from_the_wheel_outside_the_repository(installed, tmp_path):
    assert not tmp_path.resolve().is_relative_to(ROOT)
    code = front_door_example((ROOT / "README.md").read_text(encoding="utf-8"))
    assert "from common.quantization import" in code
    done = run(installed.python, "-", cwd=tmp_path,
               code=f"{code}\nimport common\nprint('common.__file__ =', common.__file__)\n")
    assert "largest logit change under NVFP4:" in done.stdout
    location = Path(done.stdout.rsplit("common.__file__ = ", 1)[1].strip()).resolve()
    assert location == installed.site / "common" / "__init__.py"


RENDER = """
import sys
from pathlib import Path

from common.report import render
from common.report.claims import verdict_counts
from papers.finer_is_better import authors

assert Path(render.TEMPLATES).is_relative_to(sys.argv[1]), render.TEMPLATES
for template in sorted(Path(render.TEMPLATES).glob("*.j2")):
    render._environment(template.name.endswith(".html.j2")).get_template(template.name)
    print("loaded", template.name)
render.render_index([{"title": "A paper", "href": "a.html", "counts": verdict_counts(["reproduced"]),
                      "outside_regime": 0, "tested": 1, "listed": 2, "findings": 0, "checks": "1 of 1"}],
                    "index.html")
print("rendered", len(Path("index.html").read_text()))
print("authors", len(authors.load_results()), authors.citation(authors.load_source()))
"""


def test_a_report_template_renders_from_the_installed_package(installed, tmp_path):
    done = run(installed.python, "-", installed.site, cwd=tmp_path, code=RENDER)
    assert done.stdout.count("loaded ") == 3
    page = (tmp_path / "index.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "A paper" in page
    assert re.search(r"^authors [1-9]\d* ", done.stdout, re.MULTILINE)
