"""The training loop: schedule, data order, learning, resume after a kill, DDP equivalence."""

import csv
import math
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from common.train import Hooks, SequenceSampler, TrainConfig, learning_rate, train

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_setup


def read_log(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def test_learning_rate_schedule():
    config = TrainConfig(max_steps=11, lr=1.0, warmup_steps=2, min_lr_ratio=0.1)
    assert learning_rate(0, config) == 0.5
    assert learning_rate(1, config) == 1.0
    assert learning_rate(2, config) == pytest.approx(1.0)
    assert learning_rate(10, config) == pytest.approx(0.1)
    middle = 2 + (11 - 2 - 1) / 2
    assert learning_rate(int(middle), config) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))


def test_sampler_covers_each_epoch_once_and_is_seeded():
    tokens = torch.arange(101)
    sampler = SequenceSampler(tokens, seq_len=10, seed=3)
    epoch = sampler.batch(0, 10)
    assert sorted(epoch[:, 0].tolist()) == list(range(0, 100, 10))
    assert torch.equal(epoch[:, 1:], epoch[:, :-1] + 1)  # contiguous windows of L + 1 tokens
    assert torch.equal(SequenceSampler(tokens, 10, 3).batch(0, 10), epoch)
    assert not torch.equal(SequenceSampler(tokens, 10, 4).batch(0, 10), epoch)
    assert not torch.equal(sampler.batch(10, 10), epoch)  # the next epoch is reshuffled


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
        TrainConfig(max_steps=0)
    with pytest.raises(ValueError, match="unknown training option 'lr_max'"):
        TrainConfig.from_dict({"max_steps": 1, "lr_max": 1.0})


def test_smoke_model_learns(tmp_path):
    _, tokens, model = tiny_setup()
    config = TrainConfig(max_steps=40, seq_len=16, micro_batch_size=4, lr=3e-3, warmup_steps=4, eval_every=20,
                         progress=False)
    train(model, tokens, config, tmp_path, val_tokens=tokens[:400])
    losses = [float(r["loss"]) for r in read_log(tmp_path / "train_log.csv")]
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5
    evals = read_log(tmp_path / "eval_log.csv")
    assert [int(r["step"]) for r in evals] == [19, 39]
    assert float(evals[1]["val_loss"]) < float(evals[0]["val_loss"])


class Crash(Hooks):
    """Kills the run (as an interrupt would) right after optimizer step ``at_step``."""

    def __init__(self, at_step):
        self.at_step = at_step

    def after_optimizer_step(self, model, step):
        if step == self.at_step:
            raise KeyboardInterrupt("simulated kill")


def test_resume_after_kill_gives_the_same_weights(tmp_path):
    config = TrainConfig(max_steps=12, seq_len=16, micro_batch_size=2, grad_accum=2, lr=3e-3, warmup_steps=2,
                         checkpoint_every=5, progress=False)
    _, tokens, model = tiny_setup()
    train(model, tokens, config, tmp_path / "straight")
    _, _, interrupted = tiny_setup()
    with pytest.raises(KeyboardInterrupt):
        train(interrupted, tokens, config, tmp_path / "killed", hooks=Crash(at_step=7))
    assert (tmp_path / "killed" / "checkpoint.pt").exists()
    _, _, resumed = tiny_setup()  # a new process would start from a fresh model too
    summary = train(resumed, tokens, config, tmp_path / "killed")
    assert summary["resumed_from"] == 5
    for name, value in model.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    steps = [int(r["step"]) for r in read_log(tmp_path / "killed" / "train_log.csv")]
    assert steps == list(range(12))
    assert not (tmp_path / "killed" / "checkpoint.pt").exists()


def test_resume_restores_the_logs_a_workflow_manager_removed(tmp_path):
    """Snakemake removes an interrupted job's outputs (the logs) before it reruns it; the checkpoint's copy of the
    logs brings them back, so the resumed run's logs equal an uninterrupted run's (wall seconds aside)."""
    config = TrainConfig(max_steps=12, seq_len=16, micro_batch_size=2, lr=3e-3, warmup_steps=2, eval_every=3,
                         checkpoint_every=5, progress=False)
    _, tokens, model = tiny_setup()
    train(model, tokens, config, tmp_path / "straight", val_tokens=tokens[:400])
    _, _, interrupted = tiny_setup()
    with pytest.raises(KeyboardInterrupt):
        train(interrupted, tokens, config, tmp_path / "killed", val_tokens=tokens[:400], hooks=Crash(at_step=7))
    for name in ("train_log.csv", "eval_log.csv"):
        (tmp_path / "killed" / name).unlink()
    _, _, resumed = tiny_setup()
    assert train(resumed, tokens, config, tmp_path / "killed", val_tokens=tokens[:400])["resumed_from"] == 5
    for name in ("train_log.csv", "eval_log.csv"):
        straight, killed = (read_log(tmp_path / run / name) for run in ("straight", "killed"))
        assert [{k: v for k, v in row.items() if k != "seconds"} for row in killed] == [
            {k: v for k, v in row.items() if k != "seconds"} for row in straight], name
    assert [int(r["step"]) for r in read_log(tmp_path / "killed" / "eval_log.csv")] == [2, 5, 8, 11]


def test_checkpoint_from_another_config_is_refused(tmp_path):
    config = TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, checkpoint_every=2, progress=False)
    _, tokens, model = tiny_setup()
    with pytest.raises(KeyboardInterrupt):
        train(model, tokens, config, tmp_path, hooks=Crash(at_step=3))
    with pytest.raises(ValueError, match="another configuration"):
        train(model, tokens, TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, lr=1e-2), tmp_path)


def test_stale_checkpoint_restart_starts_over(tmp_path):
    config = TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, checkpoint_every=2, progress=False)
    other = TrainConfig(max_steps=4, seq_len=16, micro_batch_size=2, lr=1e-2, progress=False)
    _, tokens, model = tiny_setup()
    with pytest.raises(KeyboardInterrupt):
        train(model, tokens, config, tmp_path / "run", hooks=Crash(at_step=3))
    _, _, restarted = tiny_setup()
    summary = train(restarted, tokens, other, tmp_path / "run", stale_checkpoint="restart")
    assert summary["resumed_from"] == 0
    _, _, fresh = tiny_setup()
    train(fresh, tokens, other, tmp_path / "fresh")
    for name, value in fresh.state_dict().items():
        assert torch.equal(value, restarted.state_dict()[name]), name
    assert [int(r["step"]) for r in read_log(tmp_path / "run" / "train_log.csv")] == list(range(4))
    with pytest.raises(ValueError, match="stale_checkpoint must be 'error' or 'restart', got 'keep'"):
        train(fresh, tokens, other, tmp_path / "x", stale_checkpoint="keep")


def test_checkpoint_of_another_record_is_stale(tmp_path):
    """Same TrainConfig, another run record (e.g. other QAT settings): refused, or started over with "restart";
    the same record resumes."""
    config = TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, checkpoint_every=2, progress=False)
    _, tokens, model = tiny_setup()
    with pytest.raises(KeyboardInterrupt):
        train(model, tokens, config, tmp_path, hooks=Crash(at_step=3), record={"method": "a"})
    with pytest.raises(ValueError, match="run record"):
        train(model, tokens, config, tmp_path, record={"method": "b"})
    with pytest.raises(ValueError, match="run record"):
        train(model, tokens, config, tmp_path)
    _, _, resumed = tiny_setup()
    assert train(resumed, tokens, config, tmp_path, record={"method": "a"})["resumed_from"] == 2
    with pytest.raises(KeyboardInterrupt):
        train(model, tokens, config, tmp_path / "b", hooks=Crash(at_step=3), record={"method": "a"})
    assert train(model, tokens, config, tmp_path / "b", stale_checkpoint="restart",
                 record={"method": "b"})["resumed_from"] == 0



class RandomDraws(Hooks):
    """Draws from the numpy and Python streams after every optimizer step (what a hook's own randomness would)."""

    def __init__(self, crash_at=None):
        self.crash_at, self.draws = crash_at, {}

    def after_optimizer_step(self, model, step):
        self.draws[step] = (float(np.random.rand()), random.random())
        if step == self.crash_at:
            raise KeyboardInterrupt("simulated kill")


def test_checkpoint_is_plain_data_and_resumes_every_random_stream(tmp_path):
    """The checkpoint holds tensors and plain values only (numpy's random state too: loading with weights_only=True
    needs no global), and a resumed run continues the numpy and Python streams exactly where the checkpoint left
    them."""
    config = TrainConfig(max_steps=8, seq_len=16, micro_batch_size=2, checkpoint_every=4, progress=False, seed=3)
    _, tokens, model = tiny_setup()
    straight = RandomDraws()
    train(model, tokens, config, tmp_path / "straight", hooks=straight)
    killed = RandomDraws(crash_at=5)
    with pytest.raises(KeyboardInterrupt):
        train(tiny_setup()[2], tokens, config, tmp_path / "killed", hooks=killed)
    checkpoint = tmp_path / "killed" / "checkpoint.pt"
    assert torch.serialization.get_unsafe_globals_in_checkpoint(checkpoint) == []
    np.random.seed(99)  # a new process: other stream positions
    random.seed(99)
    resumed = RandomDraws()
    assert train(tiny_setup()[2], tokens, config, tmp_path / "killed", hooks=resumed)["resumed_from"] == 4
    assert resumed.draws == {step: straight.draws[step] for step in range(4, 8)}


class Marker:
    """An object whose unpickling would create the file ``path``: what a crafted checkpoint could run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def test_checkpoint_with_an_unknown_global_is_refused_without_running_it(tmp_path):
    config = TrainConfig(max_steps=4, seq_len=16, micro_batch_size=2, checkpoint_every=2, progress=False)
    _, tokens, model = tiny_setup()
    with pytest.raises(KeyboardInterrupt):
        train(model, tokens, config, tmp_path / "run", hooks=Crash(at_step=2))
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    state = torch.load(checkpoint, weights_only=False)  # trusted: this test wrote it
    torch.save({**state, "hooks": {"payload": Marker(tmp_path / "ran")}}, checkpoint)
    message = rf"checkpoint {re.escape(str(checkpoint))} is refused: .* \(globals io\.open\), .*remove it to start over"
    with pytest.raises(ValueError, match=message):
        train(tiny_setup()[2], tokens, config, tmp_path / "run")
    assert not (tmp_path / "ran").exists()


@pytest.mark.slow
def test_ddp_two_processes_match_one(tmp_path):
    worker = Path(__file__).parent / "ddp_worker.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
                    str(worker), str(tmp_path)], check=True, env=env, capture_output=True, timeout=300)
    ddp_weights = torch.load(tmp_path / "weights.pt")
    _, tokens, model = tiny_setup()
    config = TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, grad_accum=4, lr=3e-3, warmup_steps=2,
                         progress=False)
    train(model, tokens, config, tmp_path / "single")
    # The gradients agree to float32 rounding only (gloo averages two half-sums, one process sums four quarters),
    # and Adam's g / sqrt(v) carries an ulp of an almost-zero gradient into a full-size step: after 6 steps at
    # lr 3e-3 the largest difference seen is 1.1e-6 under oneMKL's AVX2 kernels and 7.6e-6 under the pinned SSE2
    # ones (envs/numerics.env), of up to 0.018 a weight moves. A gradient averaged wrongly moves weights by about
    # lr a step, so atol lr / 100 tells the two apart whatever the numerical path
    for name, value in model.state_dict().items():
        torch.testing.assert_close(ddp_weights[name], value, rtol=1e-5, atol=config.lr / 100, msg=name)
    ddp_log = read_log(tmp_path / "run" / "train_log.csv")
    single_log = read_log(tmp_path / "single" / "train_log.csv")
    for a, b in zip(ddp_log, single_log, strict=True):
        assert float(a["loss"]) == pytest.approx(float(b["loss"]), rel=1e-5)
        assert a["tokens"] == b["tokens"]
