"""``python -m papers.winq <step>``: the thin steps the Snakemake rules run (read inputs, call the package, write the
output atomically). ``--config-json`` is the profile's study config (``settings.profile_config``).

Artifacts: a run's logs in ``--run-dir`` (``train_log.csv``, ``eval_log.csv``: the validation-perplexity curve,
``train_summary.json``, ``qat.json``) and its checkpoint in ``--out`` (latent weights, ``lowbit_metadata.json``,
``lowbit_scales.safetensors``); a Hessian cell and an evaluation are one JSON file each. The summary reads a run's
logs by the folder they lie in (``<runs>/<run>/eval_log.csv``), its evaluation as ``<eval>/<run>.json`` (``base``:
the full-precision base model), its Hessian cell as ``<hessian>/<run>.json`` and the ``size_report.json`` in its
quantized checkpoint folder (``.../trained/winq/<run>``). The claims read the summary, the runs' evaluations
(per-window and per-example scores) and the ``quantization_config.json`` of each quantized checkpoint folder, and
write ``claims.json`` (``common.report.claims_document``: rows and implementation checks).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from common.cli import CONTEXT_FLAGS, MANY, REQUIRED, evidence_settings, require_paths, run_step, step_parser
from common.config import json_object
from common.io import read_json, write_json

from .settings import FIGURES


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


def evaluate(args: argparse.Namespace) -> None:
    from common.eval import evaluate_checkpoint, write_evaluation

    settings = json_object(args.config_json)
    options = {k: settings[k] for k in ("window", "stride", "max_tokens", "batch_size")}
    write_evaluation(args.out, evaluate_checkpoint(args.model, args.split, cloze=args.cloze, choice=args.choice,
                                                   **options))


def summary(args: argparse.Namespace) -> None:
    from .study import study_summary

    curves = {Path(p).parent.name: p for p in args.curves}
    seconds = {run: read_json(Path(p).with_name("train_summary.json"))["seconds"] for run, p in curves.items()}
    evaluations = {Path(p).stem: read_json(p) for p in args.evaluations}
    hessians = {Path(p).stem: read_json(p) for p in args.hessians}
    bits = {Path(p).name: read_json(Path(p) / "size_report.json")["bits_per_weight"] for p in args.quantized}
    write_json(args.out, study_summary(json_object(args.config_json), curves, evaluations, hessians, seconds, bits))


def figure(args: argparse.Namespace) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")  # files only: never open a window
    from common.report.figures import save_figure

    from .figures import PLOTS

    save_figure(PLOTS[args.kind](read_json(args.summary)), args.png, args.pdf)


def claims(args: argparse.Namespace) -> None:
    from common.ptq.checkpoint import QUANT_CONFIG_FILE
    from common.report import claim_specs, claims_document

    from .claims import Study, study_checks, study_claims

    config = json_object(args.config_json)
    evaluations = {Path(p).stem: p for p in args.evaluations}
    study = Study(summary=read_json(args.summary), evaluations={run: read_json(p) for run, p in evaluations.items()},
                  quantized={Path(p).name: read_json(Path(p) / QUANT_CONFIG_FILE) for p in args.quantized},
                  summary_path=args.summary, evaluation_paths=evaluations)
    rows = study_claims(claim_specs(config["claims"]), study,
                        evidence_settings(args), config["settings"])
    write_json(args.out, claims_document(rows, study_checks(study)))


def context(args: argparse.Namespace) -> None:
    from common.report import figure_entries, training_seconds

    from .context import build_context
    from .figures import caption

    config = json_object(args.config_json)
    study = read_json(args.summary)
    stages = {f"QAT, {r['run']}": r["train_seconds"] for r in study["runs"]}
    stages |= {f"Hessian spectrum, {h['run']}": h["wall_time_s"] for h in study["hessian"]}
    stages |= training_seconds(args.base_model_metadata)
    write_json(args.out, build_context(
        config=config, profile=args.profile, summary=study, claims=read_json(args.claims),
        figures=figure_entries(args.figures, caption), artifacts=[*args.cited, args.summary, args.claims],
        rerun_examples=args.rerun_example,
        seeds={"training data order": args.seed, "noise": config["noise"]["seed"], "Hessian probes": args.seed,
               "workflow": args.seed}, stage_seconds=stages))


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
        ("evaluate", evaluate, "one model on the held-out split: perplexity and the zero-shot tasks",
         [("--config-json", req), ("--model", req), ("--split", req), ("--cloze", req), ("--choice", req),
          ("--out", req)]),
        ("summary", summary, "the study's summary over every run",
         [("--config-json", req), ("--curves", MANY), ("--evaluations", MANY),
          ("--hessians", {"nargs": "*", "default": []}), ("--quantized", MANY), ("--out", req)]),
        ("figure", figure, "one figure as PNG and PDF",
         [("kind", {"choices": list(FIGURES)}), ("--summary", req), ("--png", req), ("--pdf", req)]),
        ("claims", claims, "the claims table: estimates, intervals and verdicts of the config's predictions "
         "(--config-json: {claims, settings}), and the implementation checks",
         [("--config-json", req), ("--evidence-json", req), ("--summary", req), ("--evaluations", MANY),
          ("--quantized", MANY), ("--out", req)]),
        ("context", context, "the report context", [("--summary", req), *CONTEXT_FLAGS]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
