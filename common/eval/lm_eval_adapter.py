"""Run lm-eval-harness (0.4.x, Python API) on a local checkpoint, offline.

``lm_eval.simple_evaluate`` with its HF model class (``model="hf"``) on ``model_dir`` (and ``tokenizer_dir``,
default the same folder), float32 on ``device``. Task YAMLs outside lm-eval (e.g. ``dataset_path: json`` with
``dataset_kwargs: {data_files: ...}`` on a local JSONL) are found through ``include_path``. Offline use needs
only that every task's data is local (the model and tokenizer load from folders); run the process with
HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 so that nothing tries the network (they are read at import time).
"""

from __future__ import annotations

import json
import os
from typing import Any


def run_lm_eval(
    model_dir: str | os.PathLike[str],
    tasks: list[str],
    include_path: str | os.PathLike[str] | None,
    limit: int | None,
    batch_size: int,
    *,
    tokenizer_dir: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    include_defaults: bool = True,
    bootstrap_iters: int = 100000,
) -> dict[str, Any]:
    """Results dict of ``lm_eval.simple_evaluate`` (per-task metrics under "results", as "acc,none" etc.),
    without logged samples, made JSON-ready with lm-eval's own ``handle_non_serializable`` (dtypes become strings).

    ``include_defaults=False`` skips indexing lm-eval's built-in tasks (about 6 s) when only ``include_path``
    tasks are run; ``bootstrap_iters`` is lm-eval's (stderr of non-mean aggregations; 0 skips them).
    """
    if not tasks:
        raise ValueError(f"tasks must name at least one task, got {tasks!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    for name, folder in (("model_dir", model_dir), ("tokenizer_dir", tokenizer_dir)):
        if folder is not None and not os.path.isdir(folder):
            raise ValueError(f"{name} {str(folder)!r} is not a folder")
    if include_path is not None and not os.path.isdir(include_path):
        raise ValueError(f"include_path {str(include_path)!r} is not a folder")

    import lm_eval
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import handle_non_serializable

    task_manager = TaskManager(
        include_path=None if include_path is None else str(include_path), include_defaults=include_defaults
    )
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args={
            "pretrained": str(model_dir),
            "tokenizer": str(tokenizer_dir if tokenizer_dir is not None else model_dir),
            "dtype": "float32",
        },
        tasks=tasks,
        task_manager=task_manager,
        limit=limit,
        batch_size=batch_size,
        device=device,
        bootstrap_iters=bootstrap_iters,
        log_samples=False,
    )
    if results is None:
        raise RuntimeError("lm_eval.simple_evaluate returned no results (not rank 0)")
    return json.loads(json.dumps(results, default=handle_non_serializable))
