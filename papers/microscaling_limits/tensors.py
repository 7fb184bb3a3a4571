"""Real weight tensors: every linear weight of a model, its fitted sigma, the measured block MSE (blocks along
``in_features``, as the checkpoint quantization does) and the theory's prediction for Normal data with that
sigma (:func:`common.theory.block_mse`), for each block size and scale format.

A tensor *inverts* at block size n when its MSE at n exceeds its MSE at 2n for the two smallest configured
block sizes (measured, and predicted by the theory); a *tie* has equal measured MSEs (in practice every block rounds
to zero at both sizes: no comparison); the prediction uses only the fitted sigma (the standard
deviation of the tensor), so the agreement tests the Normal model of the paper on real weights. ``include``
keeps only the tensors whose module name (the key without ``.weight``) ``re.search`` matches: a sweep point's
moved linears (:mod:`.sweep`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from common.analysis import weight_study
from common.theory import block_mse


def tensor_cell(model: str, weights: Mapping[str, torch.Tensor], config: Mapping[str, Any],
                scales: Sequence[str], source: str | None = None, include: str | None = None) -> dict[str, Any]:
    """Measured and predicted MSE of every weight tensor of ``model`` (rows per tensor, scale, block size), or of
    those ``include`` matches (ValueError naming it when none does); ``source`` says where the weights come from
    (shown with the model's table)."""
    start = time.perf_counter()
    blocks = config["tensors"]["block_sizes"]
    if include is not None:
        weights = {k: w for k, w in weights.items() if re.search(include, k.removesuffix(".weight"))}
        if not weights:
            raise ValueError(f"include {include!r} matches no weight tensor of {model!r}")
    rows = weight_study(dict(weights), blocks, scales=tuple(scales), rule="absmax", elem=config["element"])
    for row in rows:
        predicted = block_mse(row["std"], row["block_size"], config["element"], row["scale"], "absmax")
        row["predicted_mse"] = predicted["total"]
        row["predicted_zero_blocks"] = predicted["zero_blocks"]
        row["prediction_error"] = abs(predicted["total"] / row["mse"] - 1) if row["mse"] > 0 else None
    small, large = sorted(blocks)[:2]
    tensors = []
    for name in sorted({r["name"] for r in rows}):
        for scale in scales:
            mse = {r["block_size"]: r for r in rows if r["name"] == name and r["scale"] == scale}
            tensors.append({"name": name, "scale": scale, "std": mse[small]["std"],
                            "inverts": mse[small]["mse"] > mse[large]["mse"],
                            "tie": mse[small]["mse"] == mse[large]["mse"],
                            "predicted_inverts": mse[small]["predicted_mse"] > mse[large]["predicted_mse"]})
    return {"model": model, "source": source, "include": include, "block_sizes": blocks,
            "inversion_blocks": [small, large], "rows": rows, "tensors": tensors,
            "wall_time_s": time.perf_counter() - start}
