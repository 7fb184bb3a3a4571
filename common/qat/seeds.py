"""Seeds as a level of every training cell's path (:mod:`common.qat.run`): ``<run>/seed<k>``, e.g.
``results/models/trained/winq/w2-winq/seed1``, and of everything made from it (its logs, quantized checkpoint and
evaluations), so two seeds of one run are two file targets and a claim pairs runs by seed. Names only (no torch):
the rules, the studies and the claims read them."""

from __future__ import annotations

import os
import re
from pathlib import Path

SEED_CELL = re.compile(r"seed(?P<seed>0|[1-9][0-9]*)")


def seed_cell(run: str, seed: int) -> str:
    """The path of seed ``seed`` of run ``run`` below a paper's folder: ``<run>/seed<seed>``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"a seed is an integer >= 0, got {seed!r}")
    return f"{run}/seed{seed}"


def parse_seed_cell(path: str | os.PathLike[str], depth: int = 0) -> tuple[str, int]:
    """``(run, seed)`` of a path whose parts ``..., <run>, seed<k>`` end ``depth`` parts before its end (``depth=1``
    for a file in the cell's folder, ``.../<run>/seed<k>/train_log.csv``). ValueError naming a path without a seed
    level there."""
    parts = Path(path).parts
    if len(parts) < depth + 2 or not SEED_CELL.fullmatch(parts[len(parts) - depth - 1]):
        raise ValueError(f"{str(path)!r} has no <run>/seed<k> cell {depth} parts before its end")
    return parts[len(parts) - depth - 2], int(parts[len(parts) - depth - 1][4:])
