"""One continual-pretraining run of the study: a pretrained checkpoint trained further on a shifted corpus,
either unquantized (the BF16 baseline; "BF16" = the model's own precision) or with HiF8 W8A8 QAT
(:func:`common.qat.attach_w8a8` on the paper's selection :func:`common.qat.w8a8_selection`: MLP gate/up/down,
the first 3 and last 2 of 26 blocks, or the same proportion, left unquantized) with one amax observer and an
optional BF16 warmup of ``warmup_steps`` optimizer steps (:class:`common.qat.BF16Warmup`).

A run resumes from ``run_dir/checkpoint.pt`` after a kill (the telemetry too); a checkpoint of another
configuration (e.g. another profile) is ignored and the run starts over. Outputs: the trained checkpoint
(``lowbit_metadata.json`` records the run and its saturation summary), and in ``run_dir`` the training logs of
:func:`common.train.train`, ``telemetry.csv`` (one row per quantized layer, tensor role and step; the header alone
for the baseline) and ``saturation.json`` (:func:`saturation_summary`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common.data import read_jsonl, token_stream
from common.io import atomic_path, write_json
from common.models import count_parameters, load_model, save_checkpoint
from common.observers import OBSERVER_NAMES
from common.qat import TELEMETRY_FIELDS, BF16Warmup, attach_w8a8, w8a8_selection
from common.train import TrainConfig, train


def saturation_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per tensor role: ``calls`` (layer-steps with a delayed scale, cold starts excluded), ``overflow_rate``
    (fraction of those where amax_t exceeded the prediction: a saturation event), ``mean_over_range`` and
    ``max_over_range`` (fraction of values above the predicted amax), ``mean_clipped`` (fraction clipped by the
    format's range)."""
    out: dict[str, dict[str, float]] = {}
    rows = list(rows)
    for role in sorted({r["role"] for r in rows}):
        mine = [r for r in rows if r["role"] == role and not r["cold_start"]]
        n = len(mine)
        out[role] = {"calls": n,
                     "overflow_rate": sum(bool(r["overflow"]) for r in mine) / n if n else 0.0,
                     "mean_over_range": sum(r["over_range_fraction"] for r in mine) / n if n else 0.0,
                     "max_over_range": max((r["over_range_fraction"] for r in mine), default=0.0),
                     "mean_clipped": sum(r["clipped_fraction"] for r in mine) / n if n else 0.0}
    return out


def qat_run(init: str | os.PathLike[str], train_split: str | os.PathLike[str],
            validation_split: str | os.PathLike[str] | None, config: TrainConfig, run_dir: str | os.PathLike[str],
            out: str | os.PathLike[str], *, observer: str | None, warmup_steps: int = 0, fmt: str = "hif8",
            observer_options: Mapping[str, Any] | None = None, max_val: float = 15.0) -> dict[str, Any]:
    """Train one run (module docstring); ``observer=None`` is the unquantized baseline. Returns the metadata."""
    if observer is not None and observer not in OBSERVER_NAMES:
        raise ValueError(f"unknown observer {observer!r}; valid: {', '.join(OBSERVER_NAMES)} (or None for BF16)")
    if not 0 <= warmup_steps <= config.max_steps:
        raise ValueError(f"warmup_steps must be in [0, max_steps={config.max_steps}], got {warmup_steps}")
    for flag, path in (("train split", train_split), ("validation split", validation_split)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"no {flag} at {str(path)!r}")
    model, tokenizer = load_model(init)
    train_tokens = token_stream(tokenizer, read_jsonl(train_split))
    val_tokens = token_stream(tokenizer, read_jsonl(validation_split)) if validation_split else None
    run_dir = Path(run_dir)
    handle, hooks, layers = None, None, []
    if observer is not None:
        layers = w8a8_selection(model)
        handle = attach_w8a8(model, layers, fmt=fmt, observer=observer, observer_options=dict(observer_options or {}),
                             max_val=max_val)
        hooks = BF16Warmup(handle, warmup_steps)
    summary = train(model, train_tokens, config, run_dir, val_tokens=val_tokens, hooks=hooks,
                    stale_checkpoint="restart")
    saturation = {}
    if handle is not None:
        rows = handle.telemetry_rows()
        handle.write_telemetry(run_dir / "telemetry.csv")
        saturation = saturation_summary(rows)
        handle.remove()  # the checkpoint holds the latent (unquantized) weights; quantization is a later step
    else:  # every run has the same files: the baseline's telemetry is the header alone
        with atomic_path(run_dir / "telemetry.csv") as tmp:
            tmp.write_text(",".join(TELEMETRY_FIELDS) + "\n", encoding="utf-8")
    write_json(run_dir / "saturation.json", saturation)
    metadata = {"init": str(init), "train_split": str(train_split), "train_tokens": int(train_tokens.numel()),
                "parameters": count_parameters(model), "training": summary,
                "qat": {"observer": observer, "format": fmt if observer else None, "warmup_steps": warmup_steps,
                        "max_val": max_val, "observer_options": dict(observer_options or {}), "layers": layers,
                        "saturation": saturation}}
    save_checkpoint(model.cpu(), tokenizer, out, metadata)
    return metadata
