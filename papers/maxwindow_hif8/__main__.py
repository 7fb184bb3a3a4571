"""``python -m papers.maxwindow_hif8 <step>``: the thin steps the Snakemake rules run (read inputs, call the
package, write the output atomically). ``--config-json`` is the profile's study config (or the part a step needs).

Artifact layout the steps read by path: a training cell's logs in ``<runs>/<run>/seed<k>/`` (``train_log.csv``,
``saturation.json``, ``train_summary.json``, ``telemetry.csv.gz``, ``qat.json``) and its evaluations in
``<eval>/<precision>/<run>/seed<k>/<role>.json`` with precision ``hif8`` or ``bf16`` and role ``pretrain`` or
``shift``; the base model's in ``<eval>/bf16/base/<role>.json``. The context step reads the setup table's inputs
among its ``--cited`` artifacts: the base model's two evaluations and the recipe's first-seed ``train_log.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from common.cli import (
    COMPUTE_FLAGS,
    CONTEXT_FLAGS,
    DEVICE_FLAG,
    FIGURE_ARGUMENTS,
    MANY,
    REQUIRED,
    compute_settings,
    device_setting,
    evidence_settings,
    run_each,
    run_step,
    step_parser,
)
from common.config import json_object
from common.io import read_json, write_json


def train_run(args: argparse.Namespace) -> None:
    from .run import maxwindow_run
    from .settings import run_settings, train_config

    config = json_object(args.config_json)
    settings = run_settings(config, args.run_name)
    maxwindow_run(args.init, args.train, args.validation, train_config(config, settings["rate"], args.seed),
                  args.run_dir, args.out, observer=settings["observer"], warmup_steps=settings["warmup_steps"],
                  fmt=config["format"], observer_options=settings["observer_options"], max_val=settings["max_val"],
                  history_unit=config["history_unit"], amax_reduction=config["amax_reduction"],
                  device=device_setting(args))


def evaluate(args: argparse.Namespace) -> None:
    from common.eval import evaluate_checkpoint, write_evaluation

    settings = json_object(args.config_json)
    options = {**{k: settings[k] for k in ("window", "stride", "max_tokens", "batch_size")},
               "compute": compute_settings(args)}
    if not len(args.model) == len(args.out_pretrain) == len(args.out_shift):
        raise ValueError(f"{len(args.model)} models need as many --out-pretrain and --out-shift paths, got "
                         f"{len(args.out_pretrain)} and {len(args.out_shift)}")
    for model, out_pretrain, out_shift in zip(args.model, args.out_pretrain, args.out_shift, strict=True):
        pretrain = evaluate_checkpoint(model, args.pretrain, cloze=args.cloze, choice=args.choice, **options)
        shift = evaluate_checkpoint(model, args.shift, **options)
        write_evaluation(out_pretrain, pretrain)
        write_evaluation(out_shift, shift)


def summary(args: argparse.Namespace) -> None:
    from common.qat.seeds import parse_seed_cell

    from .claims import evaluation_key
    from .study import study_summary

    logs = {parse_seed_cell(p, depth=1): p for p in args.logs}
    saturation = {cell: read_json(Path(p).with_name("saturation.json")) for cell, p in logs.items()}
    seconds = {cell: read_json(Path(p).with_name("train_summary.json"))["seconds"] for cell, p in logs.items()}
    evaluations = {evaluation_key(path): read_json(path) for path in args.evaluations}
    write_json(args.out, study_summary(json_object(args.config_json), logs, saturation, evaluations, seconds))


def observer_study(args: argparse.Namespace) -> None:
    from .study import observer_cell

    write_json(args.out, observer_cell(json_object(args.config_json)))


def figure(args: argparse.Namespace) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")  # files only: never open a window
    import pandas as pd

    from common.report.figures import save_figure

    from . import figures

    if args.kind == "saturation":
        frames = {Path(p).parent.parent.name.split("-lr")[0]: pd.read_csv(p) for p in args.inputs}  # <run>/seed<k>
        fig = figures.plot_saturation(frames, args.warmup)
    else:
        data = read_json(args.inputs[0])
        fig = {"loss-curves": figures.plot_loss_curves, "downstream": figures.plot_downstream,
               "forgetting": figures.plot_forgetting, "observer-study": figures.plot_observer_study}[args.kind](data)
    save_figure(fig, args.png, args.pdf)


def figures(args: argparse.Namespace) -> None:
    """Every figure of ``--figure`` (each the arguments of one ``figure`` step) in this one process: the figure rule's
    one job for the whole report (:func:`common.cli.run_each`)."""
    run_each(build_parser(), "figure", args.figure)


def claims(args: argparse.Namespace) -> None:
    from common.report import write_claims

    from . import claims as paper
    from .regime import regime_card

    config = json_object(args.config_json)
    study = paper.Study.read(config, args.evaluations, args.logs, args.telemetry, args.observer_study)
    write_claims(args.out, paper.claims, config, study, evidence_settings(args), regime_card(study),
                 "maxwindow_hif8")


def cited_path(paths: Sequence[str], suffix: str) -> str:
    """The one path of ``paths`` ending ``suffix`` (ValueError naming how many there are)."""
    found = [p for p in paths if Path(p).as_posix().endswith(suffix)]
    if len(found) != 1:
        raise ValueError(f"--cited holds {len(found)} paths ending {suffix!r}; the setup table needs exactly one")
    return found[0]


def last_row(path: str) -> dict[str, str]:
    """The last row of a CSV file (ValueError when it has none)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise ValueError(f"{path!r} has no rows")
    return rows[-1]


def context(args: argparse.Namespace) -> None:
    from common.report import figure_entries, training_seconds

    from .context import build_context, our_setup
    from .figures import caption
    from .settings import recipe

    config = json_object(args.config_json)
    study = read_json(args.summary)
    claims = read_json(args.claims)
    base = {role: read_json(cited_path(args.cited, f"/bf16/base/{role}.json")) for role in ("pretrain", "shift")}
    log_end = last_row(cited_path(args.cited, f"/{recipe(config)}/seed{config['seeds'][0]}/train_log.csv"))
    setup = our_setup(config, base=base, log_end=log_end, regime=claims.get("regime", []))
    stages = {f"continual pretraining, {r['run']} (seed {seed})": cell["train_seconds"] for r in study["runs"]
              for seed, cell in r["seeds"].items()}
    stages |= training_seconds(args.base_model_metadata)
    cited = [*args.cited, args.summary, args.observer_study, args.claims]
    write_json(args.out, build_context(
        config=config, profile=args.profile, summary=study, cell=read_json(args.observer_study), claims=claims,
        setup=setup, figures=figure_entries(args.figures, caption), artifacts=cited,
        rerun_examples=args.rerun_example,
        seeds={"training (data order), one cell each": ", ".join(map(str, config["seeds"])),
               "observer study": config["observer_study"]["seed"], "workflow": args.seed}, stage_seconds=stages))


def build_parser() -> argparse.ArgumentParser:
    req, many = REQUIRED, MANY
    return step_parser("python -m papers.maxwindow_hif8", __doc__, [
        ("train", train_run, "one continual-pretraining run (BF16 or HiF8 W8A8 QAT)",
         [("--config-json", req), ("--run", {"dest": "run_name", "required": True}),
          ("--seed", {"type": int, "default": 0}), ("--init", req), ("--train", req), ("--validation", req),
          ("--run-dir", req), ("--out", req), DEVICE_FLAG]),
        ("evaluate", evaluate, "models on both corpora (the zero-shot tasks on the pretraining corpus), one process",
         [("--config-json", req), ("--model", many), ("--pretrain", req), ("--shift", req), ("--cloze", req),
          ("--choice", req), ("--out-pretrain", many), ("--out-shift", many), *COMPUTE_FLAGS]),
        ("summary", summary, "the study's summary over every run",
         [("--config-json", req), ("--logs", many), ("--evaluations", many), ("--out", req)]),
        ("observer-study", observer_study, "the synthetic observer study", [("--config-json", req), ("--out", req)]),
        ("figure", figure, "one figure as PNG and PDF",
         [("kind", {"choices": ["loss-curves", "saturation", "downstream", "forgetting", "observer-study"]}),
          ("--inputs", many), ("--warmup", {"type": int, "default": 0}), ("--png", req), ("--pdf", req)]),
        ("figures", figures, "several figures as PNG and PDF, one process (the figure rule's job)",
         [FIGURE_ARGUMENTS]),
        ("claims", claims, "the claims table (claims.json: rows, implementation checks, verdict counts)",
         [("--config-json", req), ("--evidence-json", req), ("--evaluations", many), ("--logs", many),
          ("--telemetry", many), ("--observer-study", req), ("--out", req)]),
        ("context", context, "the report context",
         [("--summary", req), ("--observer-study", req), *CONTEXT_FLAGS]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
