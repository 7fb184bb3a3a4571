"""Files of a low-bit QAT checkpoint (common.qat.lowbit_io): the scales file and the qat record."""

import json

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from common.qat import attach_lowbit
from common.qat.lowbit_io import (
    METADATA_FILE,
    SCALES_FILE,
    lowbit_scales,
    read_lowbit_record,
    save_lowbit_scales,
)


def test_scales_file_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 3))
    handle = attach_lowbit(model, ["0", "1"], 2)
    scales = lowbit_scales(handle)
    assert sorted(scales) == ["0.alpha", "1.alpha"]
    assert scales["0.alpha"].shape == (4, 1)
    assert not scales["0.alpha"].requires_grad
    path = save_lowbit_scales(scales, tmp_path)
    assert path == tmp_path / SCALES_FILE == tmp_path / "lowbit_scales.safetensors"
    saved = load_file(path)
    for key, alpha in handle.alphas().items():
        assert torch.equal(saved[f"{key}.alpha"], alpha.detach())


def test_read_lowbit_record_names_what_is_missing(tmp_path):
    with pytest.raises(ValueError, match=r"is not a low-bit QAT checkpoint: no lowbit_scales\.safetensors"):
        read_lowbit_record(tmp_path)
    save_lowbit_scales({"0.alpha": torch.ones(4, 1)}, tmp_path)
    with pytest.raises(ValueError, match=r"lowbit_metadata\.json' has no low-bit QAT record \('qat' with 'bits'\)"):
        read_lowbit_record(tmp_path)
    (tmp_path / METADATA_FILE).write_text(json.dumps({"init": "smoke"}))
    with pytest.raises(ValueError, match=r"has no low-bit QAT record"):
        read_lowbit_record(tmp_path)
    qat = {"bits": 4, "activation_bits": None, "hadamard": False, "layers": ["0"]}
    (tmp_path / METADATA_FILE).write_text(json.dumps({"qat": qat}))
    assert read_lowbit_record(tmp_path) == qat
