"""Train a causal LM from the command line (also under ``torchrun --nproc_per_node=N -m common.train``).

    python -m common.train --init small --tokenizer TOK --train train.jsonl --validation validation.jsonl \\
        --config train.json --run-dir RUN --out MODEL

``--init`` is an embedded architecture name (pretraining from scratch, seeded) or a checkpoint folder (continual
pretraining). ``--train`` and ``--validation`` are JSONL splits or their token shards (:mod:`common.data.shards`,
memory-mapped: for corpora too large for memory; the same batches either way). ``--device``
(:class:`common.compute.Compute`; default auto: CUDA when present, under torchrun ``cuda:$LOCAL_RANK``) is where it
trains; mixed precision is the config's ``bf16``. ``--config`` is a JSON object of
:class:`common.train.TrainConfig` fields; ``--config-json`` the same inline; ``--set key=value`` overrides single
fields. The trained model is saved (rank 0, atomically) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from common.cli import DEVICE_FLAG, device_setting
from common.data import load_tokenizer, load_tokens
from common.models import ARCHITECTURES, build_model, count_parameters, load_model, save_checkpoint

from .loop import TrainConfig, is_main_process, train


def _parse_overrides(pairs: list[str]) -> dict:
    values = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"--set expects key=value, got {pair!r}")
        key, raw = pair.split("=", 1)
        values[key] = json.loads(raw) if raw not in ("true", "false") else raw == "true"
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.train", description=__doc__.splitlines()[0])
    parser.add_argument("--init", required=True, help=f"architecture ({', '.join(ARCHITECTURES)}) or checkpoint folder")
    parser.add_argument("--tokenizer", type=Path, help="tokenizer folder (default: the checkpoint's own)")
    parser.add_argument("--train", type=Path, required=True,
                        help="training split: JSONL, or its token shards (python -m common.data shards)")
    parser.add_argument("--validation", type=Path, help="validation split (JSONL or shards) for periodic evaluation")
    parser.add_argument("--config", type=Path, help="JSON file of TrainConfig fields")
    parser.add_argument("--config-json", help="the same as an inline JSON object (merged over --config)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one field")
    parser.add_argument("--run-dir", type=Path, required=True, help="logs and resumable checkpoint")
    parser.add_argument("--out", type=Path, required=True, help="folder for the trained model")
    parser.add_argument(DEVICE_FLAG[0], **DEVICE_FLAG[1])
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        values = json.loads(args.config.read_text()) if args.config else {}
        values.update(json.loads(args.config_json) if args.config_json else {})
        config = TrainConfig.from_dict({**values, **_parse_overrides(args.set)})
        device = device_setting(args)
        if args.init in ARCHITECTURES:
            if args.tokenizer is None:
                raise ValueError("--tokenizer is required when --init is an architecture name")
            tokenizer = load_tokenizer(args.tokenizer)
            model = build_model(args.init, tokenizer, config.seed)
        else:
            model, tokenizer = load_model(args.init)
            if args.tokenizer is not None:
                tokenizer = load_tokenizer(args.tokenizer)
        train_tokens = load_tokens(tokenizer, args.train)
        val_tokens = load_tokens(tokenizer, args.validation, in_memory=True) if args.validation else None
    except (ValueError, OSError, json.JSONDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    summary = train(model, train_tokens, config, args.run_dir, val_tokens=val_tokens, device=device)
    if is_main_process():
        metadata = {"init": args.init, "train_split": str(args.train), "train_tokens": int(train_tokens.numel()),
                    "parameters": count_parameters(model), "training": summary}
        save_checkpoint(model.cpu(), tokenizer, args.out, metadata)
    return 0


if __name__ == "__main__":
    sys.exit(main())
