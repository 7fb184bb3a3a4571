"""The one checkpoint loader (common.models.checkpoints): a float folder, a quantized checkpoint (the kind common.ptq
registers) and a low-bit QAT run (the kind common.qat registers) each load as themselves, to the last bit of their
logits; a named kind refuses another folder; a kind loads once the caller imported its writer, and is refused by name
before."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ptq_testing import TINY, logits, mlp_names, tiny_llama

from common.models import (
    checkpoint_kind,
    checkpoint_record,
    load_causal_lm,
    load_checkpoint,
    load_float_model,
    save_checkpoint,
)
from common.quantization import prepare, quantize_, release
from common.recipes import LowBitRecipe, get_recipe

ROOT = Path(__file__).resolve().parents[2]
INPUT = torch.randint(0, TINY["vocab_size"], (2, 12), generator=torch.Generator().manual_seed(5))
NVFP4_WA = get_recipe("NVFP4", activations=True)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """``{"float", "quantized", "lowbit"}`` checkpoint folders of the tiny Llama (the low-bit run: W2A8 with scales
    moved off their initial values, saved as a QAT run saves it) and ``"lowbit_logits"``, the run's logits."""
    from common.ptq import save_quantized_checkpoint
    from common.qat.lowbit_io import lowbit_record, lowbit_scales, save_lowbit_scales

    root = tmp_path_factory.mktemp("kinds")
    tiny_llama().save_pretrained(root / "float")
    save_quantized_checkpoint(tiny_llama(), None, NVFP4_WA, mlp_names(range(6)), root / "quantized")
    model = tiny_llama()
    handle = prepare(model, LowBitRecipe(2, 8))
    with torch.no_grad():
        for alpha in handle.alphas().values():
            alpha.mul_(0.75)
    lowbit_logits = logits(model, INPUT)
    record, scales = lowbit_record(handle, method="baseline"), lowbit_scales(handle)
    release(model)  # the latent weights, as common.qat.run saves them
    save_checkpoint(model, None, root / "lowbit", {"qat": record})
    save_lowbit_scales(scales, root / "lowbit")
    return {"float": root / "float", "quantized": root / "quantized", "lowbit": root / "lowbit",
            "lowbit_logits": lowbit_logits}


def test_a_float_folder_loads_as_stored(folders):
    loaded = load_checkpoint(folders["float"])
    assert (loaded.kind, loaded.record, loaded.handle) == (None, None, None)
    assert checkpoint_kind(folders["float"]) is None
    assert not loaded.model.training
    assert torch.equal(logits(loaded.model, INPUT), logits(tiny_llama(), INPUT))


def test_a_quantized_checkpoint_loads_rebuilt_with_its_input_hooks(folders):
    from common.ptq import read_quantization_config

    loaded = load_checkpoint(folders["quantized"])
    assert loaded.kind.name == checkpoint_kind(folders["quantized"]).name == "quantized"
    assert loaded.record == read_quantization_config(folders["quantized"])
    reference = tiny_llama()
    with quantize_(reference, NVFP4_WA, names=mlp_names(range(6))):
        assert torch.equal(logits(loaded.model, INPUT), logits(reference, INPUT))
    assert torch.equal(logits(load_causal_lm(folders["quantized"]), INPUT), logits(loaded.model, INPUT))


def test_a_low_bit_run_loads_with_its_quantizers_and_learned_scales(folders):
    from common.qat.lowbit_io import read_lowbit_record

    loaded = load_checkpoint(folders["lowbit"])
    assert loaded.kind.name == "lowbit_qat"
    assert loaded.kind.description == "low-bit QAT"
    assert loaded.record == read_lowbit_record(folders["lowbit"]) == checkpoint_record(folders["lowbit"], "lowbit_qat")
    assert loaded.record["method"] == "baseline"
    assert loaded.handle.recipe == LowBitRecipe(2, 8)
    assert torch.equal(logits(loaded.model, INPUT), folders["lowbit_logits"])
    latent = load_float_model(folders["lowbit"])  # the weights as stored: the plain latent model
    assert not any(hasattr(module, "parametrizations") for module in latent.modules())
    assert not torch.equal(logits(latent, INPUT), folders["lowbit_logits"])


def test_a_named_kind_refuses_another_folder(folders, tmp_path):
    with pytest.raises(ValueError, match=r"is not a low-bit QAT checkpoint: no lowbit_scales\.safetensors"):
        load_checkpoint(folders["float"], kind="lowbit_qat")
    with pytest.raises(ValueError, match=r"is not a quantized checkpoint \(needs quantization_config\.json"):
        checkpoint_record(folders["lowbit"], "quantized")
    with pytest.raises(ValueError, match=r"unknown checkpoint kind 'sparse'; valid checkpoint kinds: lowbit_qat, "
                                         r"quantized"):
        load_checkpoint(folders["float"], kind="sparse")
    both = tmp_path / "both"
    shutil.copytree(folders["quantized"], both)
    shutil.copy(folders["lowbit"] / "lowbit_scales.safetensors", both)
    with pytest.raises(ValueError, match=r"holds the marker files of 2 checkpoint kinds: lowbit_scales\.safetensors "
                                         r"\(lowbit_qat\), quantization_config\.json \(quantized\)"):
        load_checkpoint(both)


def test_a_kind_loads_once_its_writer_is_imported_and_is_refused_by_name_before(folders):
    """A fresh interpreter that imports common.models alone imports no writer, and refuses a folder of each known
    kind naming the package to import (never a float load that would drop the quantization); after the caller
    imports the writers, both load as themselves."""
    paths = [str(folders["quantized"]), str(folders["lowbit"])]
    script = ("import sys; from common.models import load_checkpoint\n"
              "print('common.ptq' in sys.modules, 'common.qat' in sys.modules)\n"
              f"for path in {paths!r}:\n"
              "    try:\n"
              "        load_checkpoint(path)\n"
              "    except ValueError as err:\n"
              "        print(err)\n"
              "import common.ptq, common.qat.lowbit_io\n"
              f"print(*[load_checkpoint(path).kind.name for path in {paths!r}])")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert run.stdout.splitlines() == [
        "False False",
        "checkpoint kind 'quantized' is not registered: import common.ptq, which writes it, before loading one",
        "checkpoint kind 'lowbit_qat' is not registered: import common.qat.lowbit_io, which writes it, before loading "
        "one",
        "quantized lowbit_qat"]


def test_a_kind_registered_with_another_marker_is_refused():
    from common.models import CheckpointKind, register_checkpoint_kind

    kind = CheckpointKind("quantized", "quantized", "other.json", lambda folder: {}, lambda folder: (None, None))
    with pytest.raises(ValueError, match=r"checkpoint kind 'quantized' has the marker file "
                                         r"'quantization_config\.json' \(CHECKPOINT_MARKERS\), not 'other\.json'"):
        register_checkpoint_kind(kind)
