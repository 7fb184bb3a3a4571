"""Analyses from the command line.

    python -m common.analysis advise --model DIR [--block-sizes 8,16,32] [--out advice.md|advice.json|advice.html]

``advise`` (:mod:`common.analysis.advice`): for every linear weight of a Hugging Face causal LM folder, the measured
and predicted FP4 block-quantization error per scale format and block size, the block sizes that invert, and the
recommended block size and scale. Markdown on stdout without ``--out``; with it, written atomically as Markdown,
JSON (every number) or self-contained HTML by its extension. Bad input (a missing folder, a bad block-size list, an
unknown extension) is one ``error: ...`` line and exit status 2. Reads weights only: no data, no GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from common.cli import run_step, step_parser

from .advice import DEFAULT_BLOCK_SIZES, advise, check_output, parse_block_sizes, render_markdown, write_advice


def advise_step(args: argparse.Namespace) -> None:
    sizes = parse_block_sizes(args.block_sizes)
    if args.out is not None:
        check_output(args.out)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    advice = advise(args.model, sizes)
    if args.out is None:
        sys.stdout.write(render_markdown(advice))
    else:
        write_advice(advice, args.out)


def build_parser() -> argparse.ArgumentParser:
    return step_parser("python -m common.analysis", __doc__.splitlines()[0], [
        ("advise", advise_step, "which block size and scale format for a model's linear weights",
         [("--model", {"required": True, "help": "Hugging Face causal LM folder (local files only)"}),
          ("--block-sizes", {"default": ",".join(map(str, DEFAULT_BLOCK_SIZES)),
                             "help": "comma-separated block sizes (default: %(default)s)"}),
          ("--out", {"help": "advice.md, advice.json or advice.html (default: Markdown on stdout)"})]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
