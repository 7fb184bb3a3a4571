"""``SHA256SUMS`` files in the format of GNU ``sha256sum`` (``<hex>  <path>``), verifiable with ``sha256sum -c``.

Paths are written relative to the folder ``sha256sum -c`` is run from (the repository root for reports).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from common.io import sha256_file, write_text


def write_sha256sums(path: str | os.PathLike[str], files: Iterable[str | os.PathLike[str]],
                     root: str | os.PathLike[str] = ".") -> list[str]:
    """Write the checksums of ``files`` (relative to ``root``, sorted, each once) to ``path``; return the lines."""
    root = Path(root)
    names = sorted({Path(f).as_posix() for f in files})
    missing = [name for name in names if not (root / name).is_file()]
    if missing:
        raise ValueError(f"cannot checksum {missing[0]!r}: not a file under {str(root)!r}")
    lines = [f"{sha256_file(root / name)}  {name}" for name in names]
    write_text(path, "".join(line + "\n" for line in lines))
    return lines


def verify_sha256sums(path: str | os.PathLike[str], root: str | os.PathLike[str] = ".") -> list[str]:
    """The paths whose current sha256 differs from ``path``'s line (or that are missing); empty when all match."""
    failed = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        digest, name = line.split("  ", 1)
        target = Path(root) / name
        if not target.is_file() or sha256_file(target) != digest:
            failed.append(name)
    return failed
