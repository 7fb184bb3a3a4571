"""One JSON record per evaluation: what was evaluated, on what, the metric values with their counts, versions.

    {"record_version": 1,
     "model": {...},            # e.g. describe_model(): path, class, parameters, context length, dtype
     "quantization": {...}|null, # the recipe the model was quantized with, null for the unquantized model
     "data": {...},             # split file (path, sha256, documents, tokens), window/stride, task files, counts
     "metrics": {"perplexity": {...}, "cloze": {...}, ...},   # each group carries its counts and wall_time_s
     "versions": {"python", "torch", "transformers"},
     "wall_time_s": float}
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch
import transformers

from common.io import sha256_file, write_json

from .logprobs import config_max_length

RECORD_VERSION = 1
REQUIRED_FIELDS = ("record_version", "model", "quantization", "data", "metrics", "versions", "wall_time_s")


def file_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """{"path", "sha256"} of a data file, so a record names exactly the bytes it was computed on."""
    return {"path": str(path), "sha256": sha256_file(path)}


def describe_model(model: torch.nn.Module, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Model block of a record: folder, class, parameter count, context length, dtype of the first parameter."""
    first = next(model.parameters(), None)
    return {
        "path": None if path is None else str(path),
        "class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "max_length": config_max_length(model),
        "dtype": None if first is None else str(first.dtype).removeprefix("torch."),
    }


def evaluation_record(
    model_info: dict[str, Any],
    quantization: dict[str, Any] | None,
    data: dict[str, Any],
    metrics: dict[str, dict[str, Any]],
    *,
    wall_time_s: float | None = None,
) -> dict[str, Any]:
    """Assemble a record (layout in the module docstring). ``metrics`` maps a group name to the dict returned by
    ``perplexity``/``score_cloze``/``score_choice``/...; ``wall_time_s`` defaults to the sum of the groups'."""
    for name, value in (("model_info", model_info), ("data", data)):
        if not isinstance(value, dict) or not value:
            raise ValueError(f"{name} must be a non-empty dict, got {value!r}")
    if quantization is not None and not isinstance(quantization, dict):
        raise ValueError(f"quantization must be a dict or None, got {quantization!r}")
    if not isinstance(metrics, dict) or not metrics:
        raise ValueError(f"metrics must be a non-empty dict of metric groups, got {metrics!r}")
    for group, values in metrics.items():
        if not isinstance(values, dict):
            raise ValueError(f"metric group {group!r} must be a dict, got {values!r}")
        if wall_time_s is None and "wall_time_s" not in values:
            raise ValueError(f"metric group {group!r} has no wall_time_s; pass wall_time_s")
    if wall_time_s is None:
        wall_time_s = sum(values["wall_time_s"] for values in metrics.values())
    return {
        "record_version": RECORD_VERSION,
        "model": model_info,
        "quantization": quantization,
        "data": data,
        "metrics": metrics,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "wall_time_s": wall_time_s,
    }


def write_evaluation(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Atomically write a record from ``evaluation_record`` as key-sorted JSON (``common.io.write_json``)."""
    missing = [field for field in REQUIRED_FIELDS if field not in record]
    if missing:
        raise ValueError(f"evaluation record lacks {missing}")
    write_json(path, record)
