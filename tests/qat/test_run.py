"""The QAT run skeleton (common.qat.run): seed cells and the attachment protocol on a real training run."""

import pytest
import torch

from common.io import read_json
from common.models import load_float_model
from common.qat.lowbit_io import LowBitAttachment, load_lowbit_model, read_lowbit_record
from common.qat.run import QAT_RECORD_FILE, Attachment, qat_run
from common.qat.seeds import parse_seed_cell, seed_cell
from common.quantization import prepare
from common.recipes import LowBitRecipe
from common.train import TrainConfig


def test_seed_cells_round_trip_and_name_bad_paths():
    assert seed_cell("w2-winq", 1) == "w2-winq/seed1"
    assert parse_seed_cell("results/models/trained/winq/w2-winq/seed1") == ("w2-winq", 1)
    assert parse_seed_cell("results/winq/runs/w2-winq/seed12/train_log.csv", depth=1) == ("w2-winq", 12)
    with pytest.raises(ValueError, match=r"'results/winq/w2-winq' has no <run>/seed<k> cell 0 parts"):
        parse_seed_cell("results/winq/w2-winq")
    with pytest.raises(ValueError, match="no <run>/seed<k> cell"):
        parse_seed_cell("a/run/seed01")
    with pytest.raises(ValueError, match="a seed is an integer >= 0, got -1"):
        seed_cell("run", -1)


class Recording(Attachment):
    def __init__(self):
        super().__init__({"method": "none"})
        self.calls = []

    def prepare(self, train_tokens):
        self.calls.append(("prepare", int(train_tokens.numel())))

    def finish(self, run_dir):
        self.calls.append(("finish", run_dir.name))
        return {"extra": 3}

    def save(self, out):
        self.calls.append(("save", (out / "config.json").is_file()))


def test_qat_run_calls_the_attachment_in_order_and_records_it(tiny_checkpoint, tmp_path):
    attachment = Recording()
    config = TrainConfig(max_steps=2, seq_len=16, micro_batch_size=2, progress=False, seed=3)
    meta = qat_run(tiny_checkpoint.model, tiny_checkpoint.train, None, config, tmp_path / "run", tmp_path / "out",
                   lambda model: attachment)
    # the training split's tokens before training; save after the folder exists
    assert attachment.calls == [("prepare", meta["train_tokens"]), ("finish", "run"), ("save", True)]
    assert meta["qat"] == {"method": "none", "extra": 3}
    assert meta["training"]["config"]["seed"] == 3
    assert read_json(tmp_path / "run" / QAT_RECORD_FILE) == {"method": "none"}
    assert read_json(tmp_path / "out" / "lowbit_metadata.json")["qat"] == meta["qat"]
    with pytest.raises(ValueError, match="no validation split at"):
        qat_run(tiny_checkpoint.model, tiny_checkpoint.train, tmp_path / "none.jsonl", config, tmp_path / "r",
                tmp_path / "o", lambda model: attachment)


def test_only_rank_0_writes_the_run(tiny_checkpoint, tmp_path, monkeypatch):
    """Under torchrun every rank trains; a rank other than 0 ($RANK) writes no record, artifact or checkpoint."""
    monkeypatch.setenv("RANK", "1")
    attachment = Recording()
    config = TrainConfig(max_steps=2, seq_len=16, micro_batch_size=2, progress=False)
    meta = qat_run(tiny_checkpoint.model, tiny_checkpoint.train, None, config, tmp_path / "run", tmp_path / "out",
                   lambda model: attachment)
    assert attachment.calls == [("prepare", meta["train_tokens"])]
    assert meta["training"]["steps"] == 2
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "run" / QAT_RECORD_FILE).exists()


def test_prepare_comes_before_any_file_and_may_refuse(tiny_checkpoint, tmp_path):
    """A ValueError of ``prepare`` (a method that cannot use the split) leaves no record and no checkpoint; the base
    class prepares nothing."""
    class Refusing(Recording):
        def prepare(self, train_tokens):
            raise ValueError(f"cannot use {int(train_tokens.numel())} tokens")

    config = TrainConfig(max_steps=2, seq_len=16, micro_batch_size=2, progress=False)
    with pytest.raises(ValueError, match=r"cannot use \d+ tokens"):
        qat_run(tiny_checkpoint.model, tiny_checkpoint.train, None, config, tmp_path / "run", tmp_path / "out",
                lambda model: Refusing())
    assert not (tmp_path / "run").exists()
    assert not (tmp_path / "out").exists()
    assert Attachment({}).prepare(torch.arange(4)) is None


def test_lowbit_attachment_leaves_a_checkpoint_that_rebuilds_q_w(tiny_checkpoint, tmp_path):
    handles = []

    def attach(model):
        handles.append(prepare(model, LowBitRecipe(2), names=["model.layers.0.mlp.down_proj"]))
        return LowBitAttachment(handles[0], method="baseline")

    config = TrainConfig(max_steps=2, seq_len=16, micro_batch_size=2, progress=False)
    qat_run(tiny_checkpoint.model, tiny_checkpoint.train, None, config, tmp_path / "run", tmp_path / "out", attach)
    plain = load_float_model(tmp_path / "out")  # released: a plain checkpoint of the latent weights
    assert not any(hasattr(module, "parametrizations") for module in plain.modules())
    record = read_lowbit_record(tmp_path / "out")
    assert record["format_version"] == 1
    assert record["method"] == "baseline"
    model, _, handle = load_lowbit_model(tmp_path / "out")
    weight = model.get_submodule("model.layers.0.mlp.down_proj").weight
    assert torch.equal(weight, handle.quantized_weight("model.layers.0.mlp.down_proj"))


def test_a_killed_run_resumes_only_onto_the_same_initial_weights(tiny_checkpoint, tmp_path, monkeypatch):
    """The run record compared on resume names the init model's weights: the same run of another base model
    (here: the same folder copied, then its weights changed) starts over instead of continuing the checkpoint."""
    import shutil

    from paper_testing import KilledError, killed_train
    from safetensors.torch import load_file, save_file

    import common.qat.run as run_module

    config = TrainConfig(max_steps=4, seq_len=16, micro_batch_size=2, checkpoint_every=2, progress=False, seed=0)

    def run(init, out):
        return qat_run(init, tiny_checkpoint.train, None, config, tmp_path / "run", out, lambda model: Recording())

    with monkeypatch.context() as patch:
        patch.setattr(run_module, "train", killed_train(run_module.train, at_step=2))
        with pytest.raises(KilledError):
            run(tiny_checkpoint.model, tmp_path / "a")
    other = tmp_path / "other-base"
    shutil.copytree(tiny_checkpoint.model, other)
    weights = load_file(other / "model.safetensors")
    first = next(iter(weights))
    weights[first] = weights[first] + 1.0
    save_file(weights, other / "model.safetensors", metadata={"format": "pt"})
    assert run(other, tmp_path / "b")["training"]["resumed_from"] == 0  # another init: started over
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "train", killed_train(run_module.train, at_step=2))
        with pytest.raises(KilledError):
            run(tiny_checkpoint.model, tmp_path / "a")
    assert run(tiny_checkpoint.model, tmp_path / "a")["training"]["resumed_from"] == 2  # the same init: resumed
