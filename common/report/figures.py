"""Saving report figures: PNG (embedded in the HTML) and PDF (included by the LaTeX), written atomically with
byte-stable metadata (no timestamps or software versions: the same data gives the same bytes)."""

from __future__ import annotations

import os

import matplotlib.pyplot as plt

from common.io import atomic_path


def save_figure(fig: plt.Figure, png: str | os.PathLike[str], pdf: str | os.PathLike[str], *, dpi: int = 150) -> None:
    """Write ``fig`` to ``png`` and ``pdf`` atomically and close it."""
    for path, metadata in ((png, {"Software": None}), (pdf, {"CreationDate": None, "Producer": None})):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=os.fspath(path).rsplit(".", 1)[-1], dpi=dpi, bbox_inches="tight",
                        metadata=metadata)
    plt.close(fig)
