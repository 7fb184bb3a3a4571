"""common.models.external: a local folder or a hub id (resolved from a stand-in Hugging Face cache, offline) becomes
a folder of links that loads as the checkpoint itself; what is missing is named with the command that fetches it."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from common.models import load_model
from common.models.__main__ import main
from common.models.external import link_external_model, missing_hub_sources, resolve_external_model

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_hub_cache(cache: Path, repo_id: str, checkpoint: Path) -> Path:
    """A Hugging Face cache holding ``checkpoint``'s files as the snapshot of ``repo_id`` at ``main`` (the layout
    huggingface_hub reads: models--<org>--<name>/refs/main and snapshots/<commit>/)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    for path in checkpoint.iterdir():
        (snapshot / path.name).write_bytes(path.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    return cache


def assert_same_model(a: Path, b: Path) -> None:
    (model_a, _), (model_b, _) = load_model(a), load_model(b)
    state_a, state_b = model_a.state_dict(), model_b.state_dict()
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[key], state_b[key]) for key in state_a)


def test_a_local_folder_is_linked_file_by_file(tiny_checkpoint, tmp_path):
    out = link_external_model({"path": str(tiny_checkpoint.model)}, tmp_path / "external" / "mine")
    files = sorted(p.name for p in tiny_checkpoint.model.iterdir() if p.is_file())
    assert sorted(p.name for p in out.iterdir()) == files
    assert all((out / name).is_symlink() for name in files)
    assert (out / "config.json").resolve() == (tiny_checkpoint.model / "config.json").resolve()
    assert_same_model(out, tiny_checkpoint.model)


def test_hidden_bookkeeping_files_are_not_linked(tiny_checkpoint, tmp_path):
    source = tmp_path / "built"
    shutil.copytree(tiny_checkpoint.model, source)
    (source / ".snakemake_timestamp").touch()
    (source / ".cache" / "huggingface").mkdir(parents=True)
    (source / ".cache" / "huggingface" / "model.safetensors.lock").touch()
    out = link_external_model({"path": str(source)}, tmp_path / "linked")
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in tiny_checkpoint.model.iterdir()
                                                          if p.is_file())


def test_a_hub_id_resolves_from_the_cache_offline(tiny_checkpoint, tmp_path, offline_cache):
    snapshot = fake_hub_cache(offline_cache, "org/tiny", tiny_checkpoint.model)
    assert resolve_external_model({"hub": "org/tiny"}) == snapshot
    out = link_external_model({"hub": "org/tiny", "revision": "main"}, tmp_path / "linked")
    assert (out / "model.safetensors").resolve() == (snapshot / "model.safetensors").resolve()
    assert_same_model(out, tiny_checkpoint.model)
    assert missing_hub_sources([{"hub": "org/tiny"}]) == []


def test_what_is_missing_offline_is_named_with_its_fetch_command(tmp_path, offline_cache, capsys):
    with pytest.raises(ValueError, match=r"hub model 'org/absent' is unavailable: offline \(HF_HUB_OFFLINE=1\) and "
                                         r"not in the Hugging Face cache; fetch it with `hf download org/absent`"):
        resolve_external_model({"hub": "org/absent"})
    assert missing_hub_sources([{"hub": "org/absent"}, {"path": str(tmp_path / "nowhere")}],
                               [("lowbit/no_such_dataset", "raw")]) == [
        "hub model 'org/absent': not in the Hugging Face cache; `hf download org/absent`",
        f"external model path {str(tmp_path / 'nowhere')!r}: no config.json there",
        "hub dataset 'lowbit/no_such_dataset' (raw): not in the Hugging Face cache; "
        "`python -c \"import datasets; datasets.load_dataset('lowbit/no_such_dataset', 'raw')\"`",
    ]
    out = tmp_path / "out"
    assert main(["link", "--source", json.dumps({"hub": "org/absent"}), "--out", str(out)]) == 2
    assert "hf download org/absent" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("source", "message"), [
    ({}, r"needs exactly one of path, hub"),
    ({"path": "a", "hub": "b"}, r"needs exactly one of path, hub"),
    ({"hub": ""}, r"needs exactly one of path, hub \(a non-empty string\)"),
    ({"hub": "a/b", "branch": "x"}, r"needs exactly one of path, hub .* got \{'hub': 'a/b', 'branch': 'x'\}"),
    ({"path": "/x", "revision": "main"}, r"'revision' applies to a hub model, not a local path"),
    ("org/model", r"an external model source must be a mapping, got 'org/model'"),
])
def test_bad_sources_name_the_value(source, message):
    with pytest.raises(ValueError, match=message):
        resolve_external_model(source)


def test_a_folder_without_a_config_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"external model path '.*' is not a Hugging Face checkpoint folder"):
        link_external_model({"path": str(tmp_path)}, tmp_path / "out")
    assert not (tmp_path / "out").exists()
