"""``python -m papers.winq <step>``: the thin steps the Snakemake rules run (read inputs, call the package, write the
output atomically). ``--config-json`` is the profile's study config (``settings.profile_config``).

Artifacts: a run's logs in ``--run-dir`` (``train_log.csv``, ``eval_log.csv``: the validation-perplexity curve,
``train_summary.json``, ``qat.json``) and its checkpoint in ``--out`` (latent weights, ``lowbit_metadata.json``,
``lowbit_scales.safetensors``); a Hessian cell is one JSON file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common.cli import REQUIRED, require_paths, run_step, step_parser
from common.config import json_object
from common.io import write_json


def train_run(args: argparse.Namespace) -> None:
    from common.winq import WINQ_STRENGTH

    from .run import winq_run
    from .settings import run_settings, train_config

    config = json_object(args.config_json)
    settings = run_settings(config, args.run_name)
    interpolation = settings["interpolation"] or {}  # None for the methods that do not interpolate
    winq_run(args.init, args.train, args.validation, train_config(config, args.run_name, args.seed), args.run_dir,
             args.out, bits=settings["bits"], activation_bits=settings["activation_bits"], method=settings["method"],
             every=interpolation.get("every"), strength=interpolation.get("strength", WINQ_STRENGTH),
             noise_sigma=settings["noise_sigma"], noise_seed=settings["noise_seed"], hadamard=settings["hadamard"])

def hessian(args: argparse.Namespace) -> None:
    from .hessian import spectrum_cell

    config = json_object(args.config_json)
    require_paths({"--model": args.model, "--split": args.split})
    write_json(args.out, spectrum_cell(args.model, args.split, config["hessian"], config["train"]["seq_len"],
                                       args.seed))


def build_parser() -> argparse.ArgumentParser:
    req = REQUIRED
    return step_parser("python -m papers.winq", __doc__, [
        ("train", train_run, "one low-bit QAT run (baseline, winq, interpolation or noise)",
         [("--config-json", req), ("--run", {"dest": "run_name", "required": True}),
          ("--seed", {"type": int, "default": 0}), ("--init", req), ("--train", req), ("--validation", req),
          ("--run-dir", req), ("--out", req)]),
        ("hessian", hessian, "the Hessian spectrum of one trained low-bit model on a fixed batch of a split "
         "(sequences of train.seq_len tokens; --seed: the probes)",
         [("--config-json", req), ("--model", req), ("--split", req), ("--seed", {"type": int, "default": 0}),
          ("--out", req)]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
