"""The setup table that opens a report's "Question and method": the paper's setup beside ours, aspect by aspect
(model and size, data, tokens, sequence length, steps, learning rates, seeds, layers quantized, evaluation). The
paper's side is text in the paper's ``config.yaml`` (``paper_setup:``); ours is built by the paper's context step from
the config and artifacts the run used, with the small formatters below."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def setup_rows(paper: Mapping[str, str], ours: Mapping[str, str]) -> list[dict[str, str]]:
    """The setup table: one ``{"aspect", "paper", "ours"}`` per aspect, in the order of ``paper`` (the config's
    ``paper_setup:``, the paper's side as text); ``ours`` is the same aspects measured or read from the run's config
    (ValueError naming an aspect either side lacks, or an empty entry)."""
    missing, extra = [a for a in paper if a not in ours], [a for a in ours if a not in paper]
    if missing or extra:
        raise ValueError(f"the setup table's aspects differ: ours lacks {missing or 'nothing'}, the paper's "
                         f"lacks {extra or 'nothing'}")
    empty = [a for a in paper if not (str(paper[a]).strip() and str(ours[a]).strip())]
    if empty:
        raise ValueError(f"setup aspects {empty} are empty on one side")
    return [{"aspect": a, "paper": str(paper[a]), "ours": str(ours[a])} for a in paper]


def number_list(values: Sequence[Any]) -> str:
    """``4, 8, 0.5``: floats by ``%g``, the rest as they are."""
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def model_size(name: str, base_models: Mapping[str, Mapping[str, Any]]) -> str:
    """``name (9.87M parameters)`` for an embedded base model with recorded metadata (``base_models``: name ->
    ``lowbit_metadata.json``), else ``name``."""
    parameters = base_models.get(name, {}).get("parameters")
    return name if parameters is None else f"{name} ({parameters / 1e6:.3g}M parameters)"


def scored_corpus(corpus: str | None, base_models: Mapping[str, Mapping[str, Any]]) -> str:
    """The corpus a study scores: ``corpus``, or (None) the pretraining corpus, named by the folder of a base model's
    recorded training split where one is recorded."""
    if corpus is not None:
        return corpus
    named = sorted({Path(m["train_split"]).parent.name for m in base_models.values() if m.get("train_split")})
    return f"{' / '.join(named) or 'the pretraining corpus'} (the base model's pretraining corpus)"


def first_tokens(max_tokens: int | None) -> str:
    """``the first N tokens of the split``, or the whole split (None)."""
    return "the whole split" if max_tokens is None else f"the first {max_tokens} tokens of the split"
