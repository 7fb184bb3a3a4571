"""What every ``python -m <package> <step>`` command line shares: running the chosen step with bad input reported
as one ``error: ...`` line and exit status 2 (no traceback), and checking that input paths exist."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

USER_ERRORS = (ValueError, KeyError, OSError)  # bad input: a value, a missing key or a missing/unreadable file


def run_step(args: argparse.Namespace) -> int:
    """``args.run(args)``; 0 on success, 2 (with the message on stderr) on bad input."""
    try:
        args.run(args)
    except USER_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


def require_paths(paths: Mapping[str, str | os.PathLike[str]]) -> None:
    """ValueError naming the first flag whose path does not exist."""
    for flag, path in paths.items():
        if not Path(path).exists():
            raise ValueError(f"{flag} {str(path)!r} does not exist")
