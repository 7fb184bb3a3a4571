"""Reading a model study's perplexity gaps: where finer stops being better."""

from __future__ import annotations

from collections.abc import Mapping


def gap_inverts(gaps: Mapping[int, float], tol: float) -> bool:
    """Finer stopped being better: the smallest block's perplexity gap (``gaps``: block size -> gap) exceeds the
    best gap by more than ``tol`` of it (the U-shape of *Finer is Better*, the inversion of *Is finer better?*);
    False for no gaps."""
    if not gaps:
        return False
    smallest, best = gaps[min(gaps)], min(gaps.values())
    return smallest > best + tol * abs(best) and smallest > best
