"""What every ``python -m <package> <step>`` command line shares: a parser of named steps (:func:`step_parser`),
running the chosen step with bad input reported as one ``error: ...`` line and exit status 2 (no traceback), running
one step several times in one process (:func:`run_each`: a paper's figures), and checking that input paths exist."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.io import write_json

if TYPE_CHECKING:
    import torch

    from common.compute import Compute
    from common.uncertainty import Evidence

USER_ERRORS = (ValueError, KeyError, OSError)  # bad input: a value, a missing key or a missing/unreadable file
REQUIRED: dict[str, Any] = {"required": True}  # argparse options of a required flag
MANY: dict[str, Any] = {"nargs": "+", "required": True}  # ... of a required flag taking one or more values
# The flags every paper's ``context`` step shares (common.report builds the context from them)
CONTEXT_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--config-json", REQUIRED), ("--profile", REQUIRED), ("--seed", {"type": int, "required": True}),
    ("--claims", REQUIRED), ("--figures", MANY), ("--cited", {"nargs": "*", "default": []}),
    ("--base-model-metadata", {"nargs": "*", "default": []}), ("--rerun-example", {"nargs": "*", "default": []}),
    ("--out", REQUIRED))
# The flags of every model step (common.compute.Compute: where it runs, the dtype of its weights); a training
# step takes only the device (its mixed precision is the run's own `bf16` setting)
DEVICE_FLAG: tuple[str, dict[str, Any]] = (
    "--device", {"default": "auto", "help": "cpu, cuda, cuda:N or auto (the default: CUDA when present)"})
COMPUTE_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    DEVICE_FLAG, ("--dtype", {"default": "float32", "help": "weight dtype of an evaluation: float32, bfloat16 or "
                                                            "float16"}))
# The flag of a paper's ``figures`` step (:func:`run_each`): the arguments of one ``figure`` step, once per figure
FIGURE_ARGUMENTS: tuple[str, dict[str, Any]] = (
    "--figure", {"action": "append", "required": True, "metavar": "ARGUMENTS",
                 "help": "the arguments of one `figure` step as one shell-quoted string (repeat: one per figure)"})
Step = tuple[str, Callable[[argparse.Namespace], None], str, Sequence[tuple[str, dict[str, Any]]]]


def step_parser(prog: str, description: str | None, steps: Sequence[Step]) -> argparse.ArgumentParser:
    """A parser with one sub-command per ``(name, run, help, flags)`` step; ``flags`` are ``(flag, argparse
    options)`` pairs, and :func:`run_step` calls the chosen step's ``run(args)``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, run, help_text, flags in steps:
        command = sub.add_parser(name, help=help_text)
        for flag, options in flags:
            command.add_argument(flag, **options)
        command.set_defaults(run=run)
    return parser


def run_step(args: argparse.Namespace) -> int:
    """``args.run(args)``; 0 on success, 2 (with the message on stderr) on bad input."""
    try:
        args.run(args)
    except USER_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def run_each(parser: argparse.ArgumentParser, step: str, argument_lines: Sequence[str]) -> None:
    """Step ``step`` of ``parser`` once per entry of ``argument_lines`` (each that step's arguments in shell syntax),
    all in this process: what as many ``python -m <package> <step> ...`` commands write, with one interpreter start
    and one import of the step's libraries (a paper's figures step draws every figure of its report so, one job for
    the report's figures instead of one a figure). Every entry is parsed before any runs: a bad one fails the whole
    before any work."""
    parsed = [parser.parse_args([step, *shlex.split(line)]) for line in argument_lines]
    for args in parsed:
        args.run(args)


def require_paths(paths: Mapping[str, str | os.PathLike[str]]) -> None:
    """ValueError naming the first flag whose path does not exist."""
    for flag, path in paths.items():
        if not Path(path).exists():
            raise ValueError(f"{flag} {str(path)!r} does not exist")


def write_cell_records(cells: Sequence[Any], outs: Sequence[str | os.PathLike[str]],
                       evaluate: Callable[[Sequence[Any]], Sequence[Any]], flag: str = "--cells") -> None:
    """The step of several cells in one process: ``evaluate(cells)`` (one record a cell, in order), each record
    written to its own ``--out`` (JSON, atomically). ValueError before any work when the two lists do not pair
    (naming ``flag``, the cells' own)."""
    if len(cells) != len(outs):
        raise ValueError(f"{flag} and --out must pair up: {len(cells)} cells, {len(outs)} outputs")
    for out, record in zip(outs, evaluate(cells), strict=True):
        write_json(out, record)


def evidence_settings(args: argparse.Namespace) -> Evidence:
    """The interval settings of a step's ``--evidence-json`` (the workflow config's ``evidence``), ValueError
    naming a bad value."""
    from common.config import json_object
    from common.uncertainty import Evidence

    return Evidence.from_dict(json_object(args.evidence_json, "--evidence-json"))


def compute_settings(args: argparse.Namespace) -> Compute:
    """The device and dtype of a model step's ``--device`` / ``--dtype`` (:data:`COMPUTE_FLAGS`), ValueError naming
    a bad value."""
    from common.compute import Compute

    return Compute(args.device, args.dtype)


def device_setting(args: argparse.Namespace) -> torch.device:
    """The device of a training step's ``--device`` (:data:`DEVICE_FLAG`, :meth:`common.compute.Compute.torch_device`),
    ValueError naming a bad value or a CUDA device this machine lacks."""
    from common.compute import Compute

    return Compute(args.device).torch_device()
