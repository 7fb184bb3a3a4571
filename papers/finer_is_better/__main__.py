"""``python -m papers.finer_is_better <step>``: the thin steps the Snakemake rules run (each reads its inputs,
calls the package, and writes its output atomically). ``--config-json`` is the part of the paper's config the
step depends on (the rule passes only that part, so a change elsewhere reruns nothing)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.cli import (
    COMPUTE_FLAGS,
    CONTEXT_FLAGS,
    FIGURE_ARGUMENTS,
    MANY,
    REQUIRED,
    compute_settings,
    evidence_settings,
    require_paths,
    run_each,
    run_step,
    step_parser,
    write_cell_records,
)
from common.config import json_object
from common.io import read_json, write_json

from .authors import RESULTS
from .settings import FIGURES

PAPER_RESULTS = ("--paper-results", {"default": str(RESULTS), "help": "the authors' published gaps (CSV, with its "
                                     ".source.yaml beside it)"})


def _read(paths: Sequence[str]) -> list[dict[str, Any]]:
    return [read_json(p) for p in paths]


def mse_cells(args: argparse.Namespace) -> None:
    from .numerical import numerical_cell

    config = json_object(args.config_json)
    write_cell_records(args.cells, args.out, lambda cells: [numerical_cell(config, cell) for cell in cells])


def ptq_cells(args: argparse.Namespace) -> None:
    from .model_study import model_cells

    require_paths({"--model": args.model, "--split": args.split})
    config, compute = json_object(args.config_json), compute_settings(args)
    write_cell_records(args.cells, args.out, lambda cells: model_cells(config, cells, args.operands, args.model,
                                                                       args.split, compute))


def ptq_unquantized(args: argparse.Namespace) -> None:
    from .model_study import unquantized_cell

    require_paths({"--model": args.model, "--split": args.split})
    config = json_object(args.config_json)
    write_json(args.out, unquantized_cell(config, args.model, args.split, compute_settings(args)))


def mse_summary(args: argparse.Namespace) -> None:
    from .numerical import summary

    config = json_object(args.config_json)
    write_json(args.out, summary(_read(args.cells), config["regions"], config["element"]))


def gap_summary(args: argparse.Namespace) -> None:
    from .model_study import gap_summary as build

    write_json(args.out, build(args.model, read_json(args.unquantized), _read(args.cells)))


def figure(args: argparse.Namespace) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")  # files only: never open a window
    from . import figures

    summary = read_json(args.summary)
    if args.kind == "mse":
        figures.mse_figure(summary, args.scale, args.variant, args.png, args.pdf)
    elif args.kind == "brute-force-ratio":
        figures.brute_force_ratio_figure(summary, args.scale, args.png, args.pdf)
    else:
        if not (args.models and args.operands and args.evidence_json):
            raise ValueError("figure sweep needs --models, --operands and --evidence-json")
        figures.sweep_figure(summary, _read(args.models), args.operands, evidence_settings(args), args.png, args.pdf)


def figures(args: argparse.Namespace) -> None:
    """Every figure of ``--figure`` (each the arguments of one ``figure`` step) in this one process: the figure rule's
    one job for the whole report (:func:`common.cli.run_each`)."""
    run_each(build_parser(), "figure", args.figure)


def claims(args: argparse.Namespace) -> None:
    from common.report import write_claims

    from . import claims as paper
    from .regime import regime_card

    config = json_object(args.config_json)
    study = paper.Study(config, read_json(args.numerical), _read(args.models), args.numerical, args.models,
                        args.paper_results)
    write_claims(args.out, paper.claims, paper.claim_entries(config["claims"]), study, evidence_settings(args),
                 regime_card(config, study.models), "finer_is_better")


def context(args: argparse.Namespace) -> None:
    from common.report import figure_entries, training_seconds

    from .context import build_context
    from .figures import caption

    config = json_object(args.config_json)
    numerical, models = read_json(args.numerical), _read(args.models)
    stages = {"numerical study (cells)": numerical["wall_time_s"]}
    stages |= {f"model study, {m['model']} (cells)": m["wall_time_s"] for m in models}
    stages |= training_seconds(args.base_model_metadata)
    figures = figure_entries(args.figures, caption)
    cited = [*args.cited, args.numerical, *args.models, args.claims]
    write_json(args.out, build_context(
        config=config, profile=args.profile, numerical=numerical, models=models, claims=read_json(args.claims),
        figures=figures, artifacts=cited, rerun_examples=args.rerun_example,
        seeds={"numerical draw": config["numerical"]["seed"], "workflow": args.seed}, stage_seconds=stages,
        paper_results=args.paper_results,
        base_models={Path(p).parent.name: read_json(p) for p in args.base_model_metadata}))


def build_parser() -> argparse.ArgumentParser:
    req, many = REQUIRED, MANY
    cell = "<element>-<scale>-b<block>-<variant>"
    return step_parser("python -m papers.finer_is_better", __doc__, [
        ("mse-cells", mse_cells, "numerical cells, one process: MSE vs sigma",
         [("--config-json", req), ("--cells", {"nargs": "+", "required": True, "help": cell}),
          ("--out", {"nargs": "+", "required": True})]),
        ("ptq-cells", ptq_cells, "model-study cells of one model and operand set: perplexity with fake-quantized "
         "MLP linears", [("--config-json", req), ("--cells", {"nargs": "+", "required": True, "help": cell}),
                         ("--operands", {"required": True, "choices": ["w", "wa"]}), ("--model", req),
                         ("--split", req), ("--out", {"nargs": "+", "required": True}), *COMPUTE_FLAGS]),
        ("ptq-unquantized", ptq_unquantized, "the model study's reference: perplexity and weight sigmas",
         [("--config-json", req), ("--model", req), ("--split", req), ("--out", req), *COMPUTE_FLAGS]),
        ("mse-summary", mse_summary, "the numerical study's table, regions and the claims' sigmas",
         [("--config-json", req), ("--cells", many), ("--out", req)]),
        ("gap-summary", gap_summary, "one model's perplexity gaps",
         [("--model", req), ("--unquantized", req), ("--cells", many), ("--out", req)]),
        ("figure", figure, "one figure as PNG and PDF",
         [("kind", {"choices": list(FIGURES)}), ("--summary", {"required": True, "help": "the numerical summary"}),
          ("--scale", {}), ("--variant", {}), ("--models", {"nargs": "+", "help": "sweep: the point summaries"}),
          ("--operands", {"choices": ["w", "wa"]}), ("--evidence-json", {}), ("--png", req), ("--pdf", req)]),
        ("figures", figures, "several figures as PNG and PDF, one process (the figure rule's job)",
         [FIGURE_ARGUMENTS]),
        ("claims", claims, "the claims document: rows with predictions, intervals and verdicts, and the checks",
         [("--config-json", req), ("--evidence-json", req), ("--numerical", req), ("--models", many),
          ("--out", req), PAPER_RESULTS]),
        ("context", context, "the report context", [("--numerical", req), ("--models", many), PAPER_RESULTS,
                                                    *CONTEXT_FLAGS]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
