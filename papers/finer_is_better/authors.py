"""The authors' published perplexity gaps, as data, and the statistics the report cites from them.

``data/authors_results.csv`` is the authors' table (GitHub ``clee1994/finer_is_better``, ``results/results.csv`` at
commit 482918d5aab17aee2d23e39e795f638ca7c7645c) normalised to one row per (model, scale, variant, block_size):
``gap = ppl(quantized) - ppl(BF16)`` and ``bf16_perplexity``, plus ``authors_row``, the row the value comes from.
``data/authors_results.source.yaml`` names the source, its sha256 and licence note, and how the two naming styles
of their rows were mapped to our variants and merged (the precise long-named value kept where both exist). Every
value is weights + activations (W+A): the authors' repository has no weights-only run.

Models carry the workflow's ``external_models`` names (:data:`MODELS`), so a paper-profile sweep point
``<model>-c1`` (the model as it is) meets its row here. The report's statistics are small functions of a gap table
with the columns ``model, scale, variant, block_size, gap``, the authors' or ours (:func:`gap_table`) alike:
:func:`gap_change` (one setting's gap beside another's at one block size, e.g. 4/6's cut of Llama's block-4 gap,
0.725 -> 0.270) and :func:`best_block` (the block size of the smallest gap, e.g. abs-max's minimum at block 16 for
Llama and Granite).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

DATA = Path(__file__).resolve().with_name("data")
RESULTS = DATA / "authors_results.csv"
MODELS = {"llama31_8b": "Llama-3.1-8B", "granite33_8b": "Granite-3.3-8B", "deepseek_7b": "DeepSeek-LLM-7B-Base",
          "qwen25_14b": "Qwen2.5-14B"}
SCALES = ("ue4m3", "ue5m3")
COLUMNS = ("model", "scale", "variant", "block_size", "gap", "bf16_perplexity", "authors_row")
KEY = ["model", "scale", "variant", "block_size"]
PAPER_OPERANDS = "wa"  # the authors' setting: weights and activations
PAPER_POINT = re.compile(r"^(?P<model>.+)-c1$")  # a sweep point at factor 1: the model as it is


def load_results(path: str | Path = RESULTS) -> pd.DataFrame:
    """The authors' table (ValueError naming a wrong column set, an unknown model or scale, a repeated cell or a
    gap that is not a finite number)."""
    table = pd.read_csv(path)
    if tuple(table.columns) != COLUMNS:
        raise ValueError(f"{path}: columns {list(table.columns)}, expected {list(COLUMNS)}")
    for column, allowed in (("model", MODELS), ("scale", SCALES)):
        unknown = sorted(set(table[column]) - set(allowed))
        if unknown:
            raise ValueError(f"{path}: unknown {column} {unknown[0]!r}; expected one of {', '.join(allowed)}")
    repeated = table[table.duplicated(KEY, keep=False)]
    if not repeated.empty:
        raise ValueError(f"{path}: cell {_key(repeated.iloc[0])} appears more than once")
    bad = table[~table["gap"].map(lambda g: isinstance(g, float) and math.isfinite(g))]
    if not bad.empty:
        raise ValueError(f"{path}: gap {bad.iloc[0]['gap']} of {_key(bad.iloc[0])} is not a finite number")
    return table


def _key(row: pd.Series) -> tuple[str, str, str, int]:
    return str(row["model"]), str(row["scale"]), str(row["variant"]), int(row["block_size"])


def source_path(results: str | Path = RESULTS) -> Path:
    """The provenance file beside a results table (``authors_results.csv`` -> ``authors_results.source.yaml``)."""
    return Path(results).with_suffix(".source.yaml")


def load_source(results: str | Path = RESULTS) -> dict[str, Any]:
    """The provenance of the table at ``results`` (repository, path, commit, sha256, licence, the naming map)."""
    return yaml.safe_load(source_path(results).read_text())


def citation(source: Mapping[str, Any]) -> str:
    """``<repository> <path> at commit <7 hex digits>`` of a provenance record."""
    return f"{source['repository']} {source['path']} at commit {source['commit'][:7]}"


def paper_model(point: str) -> str | None:
    """The authors' model a sweep point is (``llama31_8b-c1`` -> ``llama31_8b``), or None: another model, or a
    rescaled point (factor other than 1), which the authors never evaluated."""
    match = PAPER_POINT.fullmatch(point)
    return match["model"] if match is not None and match["model"] in MODELS else None


def gap_table(models: Iterable[Mapping[str, Any]], operands: str = PAPER_OPERANDS) -> pd.DataFrame:
    """Our gaps of one operand set as a gap table (``model`` is the sweep point) from point summaries
    (:func:`.model_study.gap_summary`)."""
    records = [{"model": m["model"], "scale": r["scale"], "variant": r["variant"], "block_size": r["block_size"],
                "gap": r["gap"]} for m in models for r in m["rows"] if r["operands"] == operands]
    return pd.DataFrame.from_records(records, columns=["model", "scale", "variant", "block_size", "gap"])


def gap(table: pd.DataFrame, model: str, scale: str, variant: str, block: int) -> float | None:
    """The gap of one cell of a gap table, or None when the table lacks it."""
    found = table[(table["model"] == model) & (table["scale"] == scale) & (table["variant"] == variant)
                  & (table["block_size"] == block)]["gap"]
    return float(found.iloc[0]) if len(found) else None


def gap_change(table: pd.DataFrame, model: str, reference: tuple[str, str], setting: tuple[str, str],
               block: int) -> tuple[float, float, float] | None:
    """``(g_ref, g, g / g_ref - 1)``: the gap of ``setting`` (scale, variant) beside ``reference``'s at ``block``
    (e.g. 4/6 beside abs-max, UE4M3, block 4: Llama 0.725 -> 0.270, -62.8%); None when either cell is missing."""
    ref, new = gap(table, model, *reference, block), gap(table, model, *setting, block)
    if ref is None or new is None:
        return None
    return ref, new, new / ref - 1


def best_block(table: pd.DataFrame, model: str, scale: str, variant: str, blocks: Sequence[int]) -> int | None:
    """The block size among ``blocks`` with the smallest gap (the first on a tie), or None when a block is
    missing (abs-max, UE4M3 over 4-256: block 16 for Llama and Granite, 4 for DeepSeek and Qwen)."""
    gaps = [gap(table, model, scale, variant, b) for b in blocks]
    if not blocks or any(g is None for g in gaps):
        return None
    return blocks[gaps.index(min(gaps))]
