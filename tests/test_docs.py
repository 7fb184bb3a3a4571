"""Every fenced ```python block of README.md and docs/**/*.md runs as a newcomer would paste it: alone, in a fresh
interpreter, from the repository root, offline, within a time limit.

A block is skipped only when its first line is a marker that says why, ``# docs: skip (needs a GPU)``; a marker
without a reason fails. Shell blocks (```bash) are not run.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
SKIP = re.compile(r"#\s*docs:\s*skip\b(.*)")
REASON = re.compile(r"\s*\((?P<reason>[^()]*\S[^()]*)\)\s*$")
TIMEOUT_S = 120  # a block runs in seconds on an idle CPU; the limit leaves room for a loaded CI machine
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONHASHSEED": "0"}


def python_blocks(text: str, source: str = "text") -> list[tuple[str, str]]:
    """``[(id, code)]`` of every fenced block tagged ``python`` in Markdown ``text``, ``id`` = ``source:line`` of the
    block's first line of code."""
    blocks = []
    for match in FENCE.finditer(text):
        if match.group(1).lower() == "python":
            line = text.count("\n", 0, match.start(2)) + 1
            blocks.append((f"{source}:{line}", match.group(2)))
    return blocks


def skip_reason(code: str) -> str | None:
    """The reason of a skip marker on the block's first line, None without a marker; ValueError for a marker that
    gives no reason in parentheses (or one that is not on the first line)."""
    lines = code.splitlines()
    for number, line in enumerate(lines):
        marker = SKIP.search(line)
        if marker is None:
            continue
        reason = REASON.fullmatch(marker.group(1))
        if number != 0 or reason is None:
            raise ValueError(f"a skip marker must be the block's first line and say why, as '# docs: skip (needs a "
                             f"GPU)'; got {line.strip()!r} on line {number + 1}")
        return reason.group("reason").strip()
    return None


BLOCKS = [block for document in DOCUMENTS
          for block in python_blocks(document.read_text(encoding="utf-8"), str(document.relative_to(ROOT)))]


def test_the_docs_hold_python_blocks():
    assert len(BLOCKS) >= 5, [block_id for block_id, _ in BLOCKS]


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[block_id for block_id, _ in BLOCKS])
def test_python_block_runs(code):
    reason = skip_reason(code)
    if reason is not None:
        pytest.skip(reason)
    done = subprocess.run([sys.executable, "-"], input=code, cwd=ROOT, env={**os.environ, **OFFLINE},
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, f"the block failed:\n{code}\n--- stderr ---\n{done.stderr[-4000:]}"


def test_blocks_are_found_with_their_lines_and_languages():
    text = "intro\n```python\nx = 1\n```\n\n```bash\nmake test\n```\n```Python title\ny = 2\nz = 3\n```\n"
    assert python_blocks(text, "a.md") == [("a.md:3", "x = 1\n"), ("a.md:10", "y = 2\nz = 3\n")]


def test_a_skip_needs_a_reason_on_the_first_line():
    assert skip_reason("# docs: skip (needs a GPU)\nimport torch\n") == "needs a GPU"
    assert skip_reason("#docs: skip(hub)\n") == "hub"
    assert skip_reason("import torch  # docs are fine\n") is None
    for bad in ("# docs: skip\nx = 1\n", "# docs: skip ()\n", "# docs: skip because\n", "x = 1\n# docs: skip (late)\n"):
        with pytest.raises(ValueError, match="must be the block's first line and say why"):
            skip_reason(bad)
