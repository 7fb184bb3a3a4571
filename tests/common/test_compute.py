"""common.compute.Compute: validation naming the value, device resolution, and placing a model."""

import pytest
import torch

from common.compute import Compute


@pytest.mark.parametrize(("device", "dtype", "message"), [
    ("gpu", "float32", r"unknown device 'gpu'; valid: cpu, cuda, cuda:N, auto"),
    ("cuda:x", "float32", r"unknown device 'cuda:x'"),
    ("cpu:0", "float32", r"unknown device 'cpu:0'"),
    ("cpu", "fp8", r"unknown dtype 'fp8'; valid: float32, bfloat16, float16"),
])
def test_bad_settings_name_the_value(device, dtype, message):
    with pytest.raises(ValueError, match=message):
        Compute(device, dtype)


def test_from_dict_defaults_and_unknown_keys():
    assert Compute.from_dict({}) == Compute("auto", "float32")
    assert Compute.from_dict({"dtype": "bfloat16"}).torch_dtype() is torch.bfloat16
    with pytest.raises(ValueError, match="unknown compute setting 'threads'; valid: device, dtype"):
        Compute.from_dict({"threads": 2})
    with pytest.raises(ValueError, match="compute settings must be a mapping, got 'cpu'"):
        Compute.from_dict("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only machine's answers")
def test_devices_without_cuda():
    assert Compute("auto").torch_device() == torch.device("cpu")
    assert Compute("cpu").torch_device() == torch.device("cpu")
    for name in ("cuda", "cuda:1"):
        with pytest.raises(ValueError, match=rf"device '{name}' was asked for, but torch finds no CUDA device"):
            Compute(name).torch_device()


def test_a_cuda_device_always_carries_its_index(monkeypatch):
    """torch.cuda.set_device refuses a CUDA device without an index: "cuda" and "auto" resolve to cuda:$LOCAL_RANK
    under torchrun, else to the current device (CUDA faked present: only the names are built)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert Compute("cuda").torch_device() == torch.device("cuda", 2)
    assert Compute("auto").torch_device() == torch.device("cuda", 2)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert Compute("cuda").torch_device() == torch.device("cuda", 3)
    assert Compute("cuda:1").torch_device() == torch.device("cuda", 1)


def test_place_casts_float_weights_and_keeps_the_parameters():
    model = torch.nn.Linear(4, 3)
    weight = model.weight
    expected = weight.detach().to(torch.bfloat16)
    placed = Compute("cpu", "bfloat16").place(model)
    assert placed is model
    assert model.weight is weight  # cast in place: handles holding the parameter stay valid
    assert model.weight.dtype is torch.bfloat16
    assert torch.equal(model.weight.detach(), expected)
