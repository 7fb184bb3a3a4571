"""One training loop for pretraining, continual pretraining and QAT.

AdamW (weight decay on matrices only), linear warmup then cosine decay to ``min_lr_ratio * lr``, gradient
clipping, gradient accumulation, optional bf16 autocast, deterministic on CPU, tqdm progress, per-step CSV log
(``train_log.csv``), periodic evaluation (``eval_log.csv``), a checkpoint every ``checkpoint_every`` steps and
resume after a kill with the same final weights as an uninterrupted run. Under ``torchrun`` it runs DDP
(gloo on CPU, nccl on GPU) with the same global batch.

Data order is a pure function of ``(seed, step)``: the token stream is cut into non-overlapping sequences of
``seq_len + 1`` tokens; each epoch visits them in a ``torch.randperm`` order seeded by ``seed + epoch``;
global batch ``t`` is the next ``micro_batch_size * grad_accum * world_size`` sequences of that order, and
micro-step ``k`` of rank ``r`` takes the slice ``(k * world_size + r) * micro_batch_size`` of it. So 2 ranks with
``grad_accum = a`` see exactly the micro-batches of 1 rank with ``grad_accum = 2a``, and a resumed run sees
exactly the batches an uninterrupted run would. The stream is a ``torch.long`` tensor or, for corpora too large for
memory, its memory-mapped :class:`common.data.shards.TokenShards` (only the sequences of a batch are read).

QAT plugs in through :class:`Hooks` (called on every rank).
"""

from __future__ import annotations

import csv
import math
import os
import pickle
import random
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from common.compute import Compute
from common.data.shards import TokenShards
from common.io import atomic_path, write_json

from .config import TrainConfig, learning_rate

TRAIN_LOG_FIELDS = ("step", "loss", "lr", "grad_norm", "tokens", "seconds")
EVAL_LOG_FIELDS = ("step", "val_loss", "val_perplexity", "val_tokens")


class Hooks:
    """Override what you need; every method is called on every rank (``step`` counts optimizer steps from 0)."""

    def on_train_start(self, model: torch.nn.Module, start_step: int) -> None: ...
    def before_step(self, model: torch.nn.Module, step: int) -> None: ...
    def after_backward(self, model: torch.nn.Module, step: int) -> None: ...
    def after_optimizer_step(self, model: torch.nn.Module, step: int) -> None: ...
    def on_eval(self, model: torch.nn.Module, step: int, metrics: dict[str, float]) -> None: ...
    def state_dict(self) -> dict[str, Any]:
        return {}
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class SequenceSampler:
    """The data order of the module docstring."""

    def __init__(self, tokens: torch.Tensor | TokenShards, seq_len: int, seed: int):
        self.sequences = (tokens.numel() - 1) // seq_len
        if self.sequences < 1:
            raise ValueError(f"token stream of {tokens.numel()} tokens is shorter than seq_len + 1 = {seq_len + 1}")
        self.tokens, self.seq_len, self.seed = tokens, seq_len, seed
        self._orders: dict[int, torch.Tensor] = {}

    def _order(self, epoch: int) -> torch.Tensor:
        if epoch not in self._orders:
            self._orders = {epoch: torch.randperm(self.sequences, generator=torch.Generator().manual_seed(
                self.seed + epoch))}
        return self._orders[epoch]

    def batch(self, first: int, count: int) -> torch.Tensor:
        """Sequences ``first .. first + count - 1`` of the endless epoch-by-epoch order, shape (count, L + 1)."""
        rows = []
        for position in range(first, first + count):
            epoch, index = divmod(position, self.sequences)
            start = int(self._order(epoch)[index]) * self.seq_len
            rows.append(self.tokens[start : start + self.seq_len + 1])
        return torch.stack(rows)


def causal_lm_loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``batch`` (B, L + 1): inputs ``batch[:, :-1]``, targets ``batch[:, 1:]``."""
    logits = model(input_ids=batch[:, :-1]).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, tokens: torch.Tensor, seq_len: int, sequences: int,
                  batch_size: int) -> dict[str, float]:
    """Mean next-token loss on the first ``sequences`` non-overlapping sequences of ``tokens`` (fixed set)."""
    available = (tokens.numel() - 1) // seq_len
    count = min(sequences, available)
    if count < 1:
        raise ValueError(f"validation stream of {tokens.numel()} tokens is shorter than seq_len + 1")
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    for first in range(0, count, batch_size):
        rows = [tokens[i * seq_len : i * seq_len + seq_len + 1] for i in range(first, min(first + batch_size, count))]
        batch = torch.stack(rows).to(next(model.parameters()).device)
        total += float(causal_lm_loss(model, batch)) * len(rows) * seq_len
        n += len(rows) * seq_len
    model.train(was_training)
    return {"val_loss": total / n, "val_perplexity": math.exp(total / n), "val_tokens": n}


def is_main_process() -> bool:
    """Whether this process writes the run's files: rank 0 of a ``torchrun`` launch (``$RANK``), or the only one."""
    return int(os.environ.get("RANK", "0")) == 0


def _distributed(device: torch.device | None) -> tuple[int, int, torch.device]:
    """``(rank, world size, device)``; ``device`` None: :class:`common.compute.Compute`'s ``auto`` (CUDA when present,
    ``cuda:$LOCAL_RANK`` under torchrun, else the CPU). The process group (under torchrun) uses nccl on CUDA, gloo on
    the CPU."""
    if device is None:
        device = Compute().torch_device()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if world > 1 else 0
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return rank, world, device


def _optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=config.lr, betas=(config.beta1, config.beta2), eps=1e-8)


def _rng_state() -> dict[str, Any]:
    """Every random stream's state as tensors and plain values (numpy's uint32 key as an int64 tensor), so that a
    checkpoint loads with ``torch.load(weights_only=True)`` and no global."""
    name, key, position, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "numpy": [name, torch.from_numpy(key.astype(np.int64)), position, has_gauss, cached],
            "python": random.getstate()}


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"].cpu())  # a CPU generator's state, whatever device the checkpoint was loaded to
    name, key, position, has_gauss, cached = state["numpy"]
    np.random.set_state((name, key.cpu().numpy().astype(np.uint32), position, has_gauss, cached))
    random.setstate(state["python"])


def _load_checkpoint(path: Path, device: torch.device) -> dict[str, Any] | None:
    """The resume state at ``path`` (None when there is none), loaded with ``torch.load(weights_only=True)``: tensors
    and plain Python values only (:func:`_rng_state` keeps numpy's state so), so that no pickle in a run folder
    executes code. ValueError naming the file and the globals it would import (a checkpoint of another program, or a
    crafted one)."""
    if not path.exists():
        return None
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as error:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        what = (f"globals {', '.join(unsafe)}" if unsafe
                else str(error).partition("WeightsUnpickler error:")[2].strip().split("\n\n")[0])
        raise ValueError(f"checkpoint {path} is refused: it holds objects other than tensors and plain Python values "
                         f"({what}), which loading would import and run; remove it to start over") from None


LOG_FILES = {"train_log.csv": TRAIN_LOG_FIELDS, "eval_log.csv": EVAL_LOG_FIELDS}


def _log_rows(path: Path, last_step: int) -> list[dict[str, str]]:
    """The rows of the CSV log ``path`` up to ``last_step`` (none when it does not exist)."""
    if not path.exists():
        return []
    with open(path, newline="") as handle:
        return [row for row in csv.DictReader(handle) if int(row["step"]) <= last_step]


def _write_log(path: Path, fields_: tuple[str, ...], rows: list[dict[str, str]]) -> None:
    """Atomically (re)write the CSV log ``path`` with ``rows``: a resumed run continues it after its checkpoint."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields_)
        writer.writeheader()
        writer.writerows(rows)


def train(model: torch.nn.Module, train_tokens: torch.Tensor | TokenShards, config: TrainConfig, run_dir: str | Path, *,
          val_tokens: torch.Tensor | None = None, hooks: Hooks | None = None,
          stale_checkpoint: str = "error", record: Mapping[str, Any] | None = None,
          device: torch.device | None = None) -> dict[str, Any]:
    """Train ``model`` in place on ``device`` (None: CUDA when present, see :func:`_distributed`; e.g.
    :meth:`common.compute.Compute.torch_device`); logs and checkpoints go to ``run_dir``. Returns a summary dict.

    A ``run_dir/checkpoint.pt`` from an earlier run with the same config, world size and ``record`` is resumed
    from. ``record`` is what else defines the run beyond the :class:`TrainConfig` (JSON-like, e.g. a QAT method's
    settings: two runs of one config with other quantizers must not resume each other); it is stored in the
    checkpoint and compared as a whole. A checkpoint written by another configuration, world size or record is
    stale: a ValueError with ``stale_checkpoint="error"``, ignored (the run starts over and replaces it) with
    ``"restart"``, e.g. for a pipeline step whose parameters changed.
    """
    if stale_checkpoint not in ("error", "restart"):
        raise ValueError(f"stale_checkpoint must be 'error' or 'restart', got {stale_checkpoint!r}")
    hooks = hooks or Hooks()
    run_dir = Path(run_dir)
    rank, world, device = _distributed(device)
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    random.seed(config.seed)
    model.to(device).train()
    optimizer = _optimizer(model, config)
    sampler = SequenceSampler(train_tokens, config.seq_len, config.seed)
    checkpoint_path = run_dir / "checkpoint.pt"
    start_step = 0
    state = _load_checkpoint(checkpoint_path, device)
    record = dict(record or {})
    if state is not None and (state["config"] != asdict(config) or state["world_size"] != world
                              or state.get("record", {}) != record):
        if stale_checkpoint == "error":
            raise ValueError(f"checkpoint {checkpoint_path} was written by another configuration (training config, "
                             "world size or run record); remove it to start over")
        state = None
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        hooks.load_state_dict(state["hooks"])
        _set_rng_state(state["rng"])
        start_step = state["step"]
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        # the checkpoint's copy of the logs: the files may be gone (a workflow manager removes the outputs of an
        # interrupted job before it reruns it) or hold steps after the checkpoint; older checkpoints have none
        saved = state.get("logs") if state is not None else None
        for name, fields_ in LOG_FILES.items():
            rows = saved[name] if saved is not None else _log_rows(run_dir / name, start_step - 1)
            _write_log(run_dir / name, fields_, rows)
    ddp = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if config.bf16 else nullcontext())
    global_batch = config.micro_batch_size * config.grad_accum * world
    hooks.on_train_start(model, start_step)

    progress = None
    if rank == 0 and config.progress:
        from tqdm import tqdm

        progress = tqdm(total=config.max_steps, initial=start_step, desc="train", unit="step", mininterval=2.0)
    started = time.perf_counter()
    for step in range(start_step, config.max_steps):
        hooks.before_step(model, step)
        lr = learning_rate(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = sampler.batch(step * global_batch, global_batch)
        loss_sum = 0.0
        for k in range(config.grad_accum):
            first = (k * world + rank) * config.micro_batch_size
            micro = batch[first : first + config.micro_batch_size].to(device)
            sync = nullcontext() if world == 1 or k == config.grad_accum - 1 else ddp.no_sync()
            with sync:  # DDP all-reduces gradients once, on the last micro-step
                with autocast:
                    loss = causal_lm_loss(ddp, micro)
                (loss / config.grad_accum).backward()
            loss_sum += float(loss.detach())
        hooks.after_backward(model, step)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        hooks.after_optimizer_step(model, step)
        mean_loss = loss_sum / config.grad_accum
        if world > 1:
            reduced = torch.tensor([mean_loss], device=device)
            dist.all_reduce(reduced)
            mean_loss = float(reduced) / world
        done = step + 1
        if rank == 0:
            _append_row(run_dir / "train_log.csv", TRAIN_LOG_FIELDS,
                        {"step": step, "loss": mean_loss, "lr": lr, "grad_norm": grad_norm,
                         "tokens": done * global_batch * config.seq_len,
                         "seconds": round(time.perf_counter() - started, 3)})
            if progress is not None:
                progress.set_postfix(loss=f"{mean_loss:.3f}", lr=f"{lr:.2e}", refresh=False)
                progress.update(1)
        if val_tokens is not None and config.eval_every and (done % config.eval_every == 0 or done == config.max_steps):
            metrics = evaluate_loss(model, val_tokens.to(device), config.seq_len, config.eval_sequences,
                                    config.micro_batch_size)
            hooks.on_eval(model, step, metrics)
            if rank == 0:
                _append_row(run_dir / "eval_log.csv", EVAL_LOG_FIELDS, {"step": step, **metrics})
        if config.checkpoint_every and done % config.checkpoint_every == 0 and done < config.max_steps:
            _save_checkpoint(checkpoint_path, model, optimizer, hooks, config, done, world, rank, record)
    if progress is not None:
        progress.close()
    if rank == 0:
        checkpoint_path.unlink(missing_ok=True)
    summary = {"steps": config.max_steps, "resumed_from": start_step, "world_size": world,
               "tokens": config.max_steps * global_batch * config.seq_len,
               "seconds": round(time.perf_counter() - started, 3), "config": asdict(config)}
    if rank == 0:
        write_json(run_dir / "train_summary.json", summary)
    return summary


def _append_row(path: Path, fields_: tuple[str, ...], row: dict[str, Any]) -> None:
    with open(path, "a", newline="") as handle:
        csv.DictWriter(handle, fieldnames=fields_).writerow(row)
        handle.flush()


def _save_checkpoint(path: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, hooks: Hooks,
                     config: TrainConfig, step: int, world: int, rank: int, record: dict[str, Any]) -> None:
    if rank != 0:
        return
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "hooks": hooks.state_dict(),
             "rng": _rng_state(), "step": step, "config": asdict(config), "world_size": world, "record": record,
             "logs": {name: _log_rows(path.parent / name, step - 1) for name in LOG_FILES}}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
