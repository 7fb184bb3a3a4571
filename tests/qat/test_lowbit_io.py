"""Files of a low-bit QAT checkpoint (common.qat.lowbit_io): the scales file and the qat record."""

import json

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from common.qat.lowbit_io import (
    LOWBIT_RECORD_VERSION,
    METADATA_FILE,
    SCALES_FILE,
    lowbit_record,
    lowbit_scales,
    read_lowbit_record,
    save_lowbit_scales,
)
from common.quantizers import attach_lowbit
from common.recipes import LowBitRecipe, recipe_from_dict


def test_scales_file_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 3))
    handle = attach_lowbit(model, ["0", "1"], LowBitRecipe(2))
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
    with pytest.raises(ValueError, match=r"record version None; this reader reads versions 1 \(a record without"):
        read_lowbit_record(tmp_path)
    (tmp_path / METADATA_FILE).write_text(json.dumps({"qat": {**qat, "format_version": 2}}))
    with pytest.raises(ValueError, match=r"record version 2; this reader reads versions 1"):
        read_lowbit_record(tmp_path)
    del qat["layers"]
    (tmp_path / METADATA_FILE).write_text(json.dumps({"qat": {**qat, "format_version": 1}}))
    with pytest.raises(ValueError, match=r"the low-bit QAT record lacks 'layers'"):
        read_lowbit_record(tmp_path)
    record = {**qat, "layers": ["0"], "format_version": 1, "method": "winq"}
    (tmp_path / METADATA_FILE).write_text(json.dumps({"qat": record}))
    assert read_lowbit_record(tmp_path) == record


def test_lowbit_record_is_versioned_and_keeps_its_fields():
    model = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 3))
    handle = attach_lowbit(model, ["1"], LowBitRecipe(1.58, activation_bits=8))
    assert lowbit_record(handle, method="noise", noise_sigma=1e-3) == {
        "format_version": LOWBIT_RECORD_VERSION, "bits": 1.58, "activation_bits": 8, "hadamard": False,
        "layers": ["1"], "recipe": {"type": "lowbit", "bits": 1.58, "activation_bits": 8, "hadamard": False,
                                    "name": None},
        "method": "noise", "noise_sigma": 1e-3}
    assert recipe_from_dict(lowbit_record(handle)["recipe"]) == LowBitRecipe(1.58, 8)
    assert LOWBIT_RECORD_VERSION == 1
    with pytest.raises(ValueError, match="method setting 'bits' would overwrite a low-bit record field"):
        lowbit_record(handle, bits=2)
    with pytest.raises(ValueError, match="method setting 'recipe' would overwrite a low-bit record field"):
        lowbit_record(handle, recipe="mine")
