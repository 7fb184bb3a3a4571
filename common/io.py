"""Atomic artifact writing: every file a pipeline step produces appears whole or not at all.

Write to a temporary file in the destination folder, flush and fsync it, then ``os.replace`` it onto the final
name (atomic on POSIX). A step killed half-way leaves only a ``.tmp-*`` file that the next run ignores, so every
step is restartable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is renamed onto ``path``, on error removed."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".tmp-{final.name}.", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if tmp.is_file():
            with open(tmp, "rb+") as handle:
                os.fsync(handle.fileno())
        tmp.chmod(0o666 & ~_umask())  # mkstemp makes 0600 files; artifacts get the usual permissions
        os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path``. An old folder is first renamed
    aside (to a ``.tmp-*`` name) and removed only once the new one is in place, so a kill at any moment leaves the
    whole old folder, the whole new one, or none: never part of one."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}.", dir=final.parent))
    retired = None
    try:
        yield tmp
        tmp.chmod(0o777 & ~_umask())
        if final.exists():
            retired = tmp.with_name(f"{tmp.name}.old")
            os.replace(final, retired)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if retired is not None and retired.exists() and not final.exists():
            os.replace(retired, final)  # an error between the two renames: the old folder comes back
        raise
    if retired is not None:
        shutil.rmtree(retired)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Atomically write ``text`` (UTF-8)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON (byte-identical for identical data)."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def jsonl_line(record: dict[str, Any]) -> str:
    """One JSONL line of ``record``: UTF-8 text, keys sorted (identical records give identical bytes), a newline."""
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def write_jsonl(path: str | os.PathLike[str], records: Iterable[dict[str, Any]]) -> None:
    """Atomically write one JSON object a line (:func:`jsonl_line`)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(jsonl_line(record))


def read_jsonl(path: str | os.PathLike[str], expected: str = "a JSON object") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; ``ValueError`` naming ``path:line`` for a line that is
    not JSON or not an object (``expected`` describes the wanted object in that message)."""
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({err.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{line_no}: expected {expected}, got {type(record).__name__} "
                                 f"{line.strip()[:80]!r}")
            yield line_no, record
