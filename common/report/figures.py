"""Saving report figures: PNG (embedded in the HTML) and PDF (included by the LaTeX), written atomically with
byte-stable metadata (no timestamps or software versions: the same data gives the same bytes)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import matplotlib.pyplot as plt

from common.io import atomic_path


def save_figure(fig: plt.Figure, png: str | os.PathLike[str], pdf: str | os.PathLike[str], *, dpi: int = 150) -> None:
    """Write ``fig`` to ``png`` and ``pdf`` atomically and close it."""
    for path, metadata in ((png, {"Software": None}), (pdf, {"CreationDate": None, "Producer": None})):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=os.fspath(path).rsplit(".", 1)[-1], dpi=dpi, bbox_inches="tight",
                        metadata=metadata)
    plt.close(fig)


def set_report_theme() -> None:
    """The look of every report figure: seaborn's ``whitegrid`` style at ``paper`` scale."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")


def lookup_caption(captions: Mapping[str, str], figure_id: str) -> str:
    """``captions[figure_id]``; ValueError naming an unknown id and the valid ones."""
    if figure_id not in captions:
        raise ValueError(f"unknown figure id {figure_id!r}; valid: {', '.join(captions)}")
    return captions[figure_id]
