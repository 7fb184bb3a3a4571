"""``python -m papers.finer_is_better <step>``: the thin steps the Snakemake rules run (each reads its inputs,
calls the package, and writes its output atomically). ``--config-json`` is the part of the paper's config the
step depends on (the rule passes only that part, so a change elsewhere reruns nothing)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from common.cli import CONTEXT_FLAGS, MANY, REQUIRED, require_paths, run_step, step_parser
from common.config import json_object
from common.io import read_json, write_json


def _read(paths: Sequence[str]) -> list[dict[str, Any]]:
    return [read_json(p) for p in paths]


def mse_cell(args: argparse.Namespace) -> None:
    from .numerical import numerical_cell

    write_json(args.out, numerical_cell(json_object(args.config_json), args.cell))


def ptq_cell(args: argparse.Namespace) -> None:
    from .model_study import model_cell

    require_paths({"--model": args.model, "--split": args.split})
    write_json(args.out, model_cell(json_object(args.config_json), args.cell, args.model, args.split))


def mse_summary(args: argparse.Namespace) -> None:
    from .numerical import summary

    write_json(args.out, summary(_read(args.cells), json_object(args.config_json)))


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
        figures.gap_figure(summary, args.png, args.pdf)


def claims(args: argparse.Namespace) -> None:
    from .claims import model_claims, numerical_claims

    thresholds = json_object(args.config_json)
    rows = numerical_claims(read_json(args.numerical), thresholds, args.numerical)
    rows += model_claims(_read(args.models), thresholds, args.models)
    write_json(args.out, [c.to_dict() for c in rows])


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
        seeds={"numerical draw": config["numerical"]["seed"], "workflow": args.seed}, stage_seconds=stages))


def build_parser() -> argparse.ArgumentParser:
    req, many = REQUIRED, MANY
    cell = "<element>-<scale>-b<block>-<variant>"
    thresholds = {"required": True, "help": "the claims thresholds"}
    return step_parser("python -m papers.finer_is_better", __doc__, [
        ("mse-cell", mse_cell, "one numerical cell: MSE vs sigma",
         [("--config-json", req), ("--cell", {"required": True, "help": cell}), ("--out", req)]),
        ("ptq-cell", ptq_cell, "one model-study cell: perplexity with fake-quantized MLP linears",
         [("--config-json", req), ("--cell", {"required": True, "help": f"{cell} or 'unquantized'"}),
          ("--model", req), ("--split", req), ("--out", req)]),
        ("mse-summary", mse_summary, "the numerical study's table and regions",
         [("--config-json", thresholds), ("--cells", many), ("--out", req)]),
        ("gap-summary", gap_summary, "one model's perplexity gaps",
         [("--model", req), ("--unquantized", req), ("--cells", many), ("--out", req)]),
        ("figure", figure, "one figure as PNG and PDF",
         [("kind", {"choices": ["mse", "brute-force-ratio", "gap"]}), ("--summary", req), ("--scale", {}),
          ("--variant", {}), ("--png", req), ("--pdf", req)]),
        ("claims", claims, "the claims table with computed verdicts",
         [("--config-json", thresholds), ("--numerical", req), ("--models", many), ("--out", req)]),
        ("context", context, "the report context", [("--numerical", req), ("--models", many), *CONTEXT_FLAGS]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
