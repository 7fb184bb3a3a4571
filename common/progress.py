"""Progress bars for the long steps after training (scoring, SLQ probes, Monte Carlo sweeps, checkpoint
quantization): ``tqdm`` on stderr, shown when stderr is a terminal, or always with ``LOWBIT_PROGRESS=1`` (e.g. to
follow a Snakemake job in its log, where the bar redraws at most every 10 s), never with ``LOWBIT_PROGRESS=0``.
A bar never changes a result: it only wraps the iteration."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
ENV_VAR = "LOWBIT_PROGRESS"


def progress_enabled() -> bool:
    """Whether bars are drawn: ``LOWBIT_PROGRESS`` = 1 or 0 decides; unset, a terminal on stderr does."""
    setting = os.environ.get(ENV_VAR)
    if setting not in (None, "0", "1"):
        raise ValueError(f"{ENV_VAR} must be 0 or 1, got {setting!r}")
    return setting == "1" if setting is not None else sys.stderr.isatty()


def progress(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "it") -> Iterator[T]:
    """``iterable`` with a progress bar named ``desc`` when :func:`progress_enabled` (module docstring)."""
    if not progress_enabled():
        yield from iterable
        return
    interactive = sys.stderr.isatty()
    yield from tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr, dynamic_ncols=interactive,
                    mininterval=0.1 if interactive else 10.0)
