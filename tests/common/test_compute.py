"""common.compute.Compute: validation naming the value, device resolution, and placing a model (on one device, or
spread over several GPUs when it does not fit one: the layout computed here with the GPUs' free memory given)."""

import sys
from pathlib import Path

import accelerate
import pytest
import torch
from accelerate.utils import compute_module_sizes

from common.compute import HEADROOM, Compute, gpu_layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ptq"))
from ptq_testing import tiny_llama


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


def weight_bytes(model: torch.nn.Module, dtype: torch.dtype) -> int:
    return compute_module_sizes(model, dtype=dtype)[""]


def test_a_model_that_fits_the_first_gpu_stays_whole():
    model = tiny_llama(num_hidden_layers=4)
    need = weight_bytes(model, torch.bfloat16)
    assert need == sum(p.numel() for p in model.parameters()) * 2 + 16  # bf16 weights and the fp32 rotary buffers
    assert gpu_layout(model, torch.bfloat16, {0: int(need / HEADROOM) + 1, 1: 10**9}) is None
    assert gpu_layout(model, torch.float32, {0: int(need / HEADROOM) + 1, 1: 10**9}) is not None  # twice the bytes


def test_a_model_too_large_for_one_gpu_is_spread_in_whole_decoder_layers():
    model = tiny_llama(num_hidden_layers=4)
    need = weight_bytes(model, torch.bfloat16)
    layout = gpu_layout(model, torch.bfloat16, {0: need, 1: need})  # 90% of one GPU is too little, of two enough
    assert set(layout.values()) == {0, 1}
    assert list(layout.values()) == sorted(layout.values())  # in module order: the first layers on the first GPU
    assert layout["model.embed_tokens"] == 0
    assert layout["lm_head"] == 1
    assert {name for name in layout if name.startswith("model.layers.")} == {f"model.layers.{i}" for i in range(4)}
    for name, _ in model.named_parameters():  # every weight placed, by its module or an ancestor
        assert any(name == key or name.startswith(key + ".") for key in layout), name


def test_a_model_the_gpus_cannot_hold_is_refused_naming_the_sizes():
    model = tiny_llama(num_hidden_layers=4)
    need = weight_bytes(model, torch.bfloat16)
    with pytest.raises(ValueError, match=rf"the model's weights need {need / 2**30:.3g} GiB in bfloat16, more than 90% "
                                         r"of the free memory of its 2 GPU\(s\) .* offload to the CPU is not "
                                         r"supported"):
        gpu_layout(model, torch.bfloat16, {0: need // 3, 1: need // 3})
    with pytest.raises(ValueError, match="at least one GPU"):
        gpu_layout(model, torch.bfloat16, {})


@pytest.mark.parametrize(("device", "local_rank", "spread"), [("auto", None, True), ("cuda", None, True),
                                                              ("cuda:0", None, False), ("cuda", "0", False)])
def test_place_spreads_only_where_the_device_leaves_the_choice_open(monkeypatch, device, local_rank, spread):
    """Two GPUs faked, each with too little memory for the whole model: "auto" and "cuda" dispatch it over both
    with the layout above (dispatch faked: nothing runs on a GPU); a GPU index or torchrun pins it to one."""
    model = tiny_llama(num_hidden_layers=4)
    need = weight_bytes(model, torch.bfloat16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index: (need, 2 * need))
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    dispatched, moved = {}, {}
    monkeypatch.setattr(accelerate, "dispatch_model", lambda m, device_map: dispatched.update(map=device_map) or m)
    monkeypatch.setattr(torch.nn.Module, "to", lambda m, **kwargs: moved.update(kwargs) or m)
    assert Compute(device, "bfloat16").place(model) is model
    if spread:
        assert dispatched["map"] == gpu_layout(model, torch.bfloat16, {0: need, 1: need})
        assert moved == {"dtype": torch.bfloat16}  # cast here, placed by the dispatch
    else:
        assert dispatched == {}
        assert moved == {"device": torch.device("cuda", 0), "dtype": torch.bfloat16}
