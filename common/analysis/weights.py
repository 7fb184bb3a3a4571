"""Block-quantization error measured on real weight tensors (the Monte Carlo of ``mse.py`` on Normal data, but
on the linear weights of a model).

* :func:`linear_weights` picks the 2-D weight matrices of every linear layer (embeddings and ``lm_head`` excluded).
* :func:`fit_sigma` says how Normal a tensor is: ``std`` and the robust ``mad_sigma = 1.4826 * MAD`` agree and
  ``excess_kurtosis`` is 0 for Normal data; heavy tails give ``mad_sigma < std`` and a positive kurtosis.
* :func:`tensor_block_mse` quantizes one tensor with ``common.scaling.quantize_blocks`` along its last axis
  (``in_features`` of an ``(out_features, in_features)`` weight, as ``common.ptq`` does) and returns
  ``mse = mean((w - Q(w))^2)`` (float64) and the fraction of blocks whose scale is zero (flushed) or at the
  scale format's floor.
* :func:`weight_study` is one row per (tensor, scale format, block size), with ``relative_mse = mse / std^2``
  comparable with ``block_stats``' ``relative_mse`` at ``sigma = std``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from common.formats import get_format
from common.scaling import quantize_blocks
from common.select import embedding_ids

MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4): MAD * 1.4826 estimates sigma for Normal data


def linear_weights(source: nn.Module | Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The 2-D weight matrix of every linear layer of ``source``, keyed ``"<module>.weight"``, sorted by name.

    An ``nn.Module``: the ``.weight`` (detached) of every ``nn.Linear`` (subclasses included) except the input
    and output embeddings, i.e. the modules ``model.get_input_embeddings()`` / ``get_output_embeddings()``
    return where the model has them (``lm_head``, tied or not, is excluded).

    A state-dict mapping: every key ending in ``".weight"`` whose tensor is 2-D, except keys containing
    ``"embed"`` (``embeddings.*`` of BERT/MiniLM, ``embed_tokens`` of Llama) or a ``lm_head`` component. For
    MiniLM that is, per layer, ``attention.self.{query,key,value}``, ``attention.output.dense``,
    ``intermediate.dense``, ``output.dense``, plus ``pooler.dense``; for a Llama state dict it gives the same
    names as the model itself.
    """
    if isinstance(source, nn.Module):
        skip = embedding_ids(source)
        found = {f"{name}.weight": module.weight.detach() for name, module in source.named_modules()
                 if isinstance(module, nn.Linear) and id(module) not in skip}
    elif isinstance(source, Mapping):
        found = {name: t for name, t in source.items() if _is_linear_key(name, t)}
    else:
        raise ValueError(f"source must be an nn.Module or a state-dict mapping, got {type(source).__name__}")
    return dict(sorted(found.items()))


def _is_linear_key(name: str, tensor: torch.Tensor) -> bool:
    """The state-dict rule of :func:`linear_weights`."""
    return (name.endswith(".weight") and isinstance(tensor, torch.Tensor) and tensor.dim() == 2
            and "embed" not in name and "lm_head" not in name.split("."))


def fit_sigma(w: torch.Tensor) -> dict[str, float | int]:
    """Location, scale and tail weight of ``w``'s values (all of them, flattened, in float64).

    ``mean``; ``std = sqrt(mean((w - mean)^2))`` (about the mean, no Bessel correction); ``mad_sigma =
    1.4826 * median(|w - median(w)|)`` (medians of an even count average the two middle values);
    ``excess_kurtosis = mean((w - mean)^4) / std^4 - 3`` (0 for Normal, -2 for +-1, NaN when std is 0);
    ``numel``. ValueError for an empty tensor.
    """
    x = w.detach().double().flatten().cpu().numpy()
    if x.size == 0:
        raise ValueError(f"fit_sigma needs a non-empty tensor, got shape {tuple(w.shape)}")
    mean = float(x.mean())
    centred = x - mean
    var = float(np.mean(centred**2))
    kurtosis = float(np.mean(centred**4)) / var**2 - 3.0 if var > 0 else float("nan")
    median = np.median(x)
    return {"mean": mean, "std": var**0.5, "mad_sigma": MAD_TO_SIGMA * float(np.median(np.abs(x - median))),
            "excess_kurtosis": kurtosis, "numel": int(x.size)}


def tensor_block_mse(w: torch.Tensor, block_size: int, elem: str = "e2m1", scale: str = "ue4m3",
                     rule: str = "absmax", *, prevent_zero: bool = False,
                     global_scale: str | None = None) -> dict[str, float]:
    """``{"mse", "zero_scale_fraction", "floor_scale_fraction"}`` of ``quantize_blocks`` on ``w``.

    Blocks of ``block_size`` along the last axis (zero-padded, see ``quantize_blocks``); ``mse = mean((w -
    Q(w))^2)`` accumulated in float64; ``zero_scale_fraction``: fraction of blocks whose scale is 0 (the block
    is flushed to zero); ``floor_scale_fraction``: scale 0 or the scale format's smallest positive value.
    ``w`` is float32 or bfloat16 (bfloat16 is widened exactly to float32). ValueError for a block size that is
    not an integer >= 1.
    """
    _check_block_size(block_size)
    x = w.detach()
    if x.dtype == torch.bfloat16:
        x = x.float()
    q, scales = quantize_blocks(x, elem, scale, block_size, rule, prevent_zero=prevent_zero,
                                global_scale=global_scale, return_scales=True)
    return {"mse": float(((x - q).double() ** 2).mean()),
            "zero_scale_fraction": float((scales.block == 0).double().mean()),
            "floor_scale_fraction": float((scales.block <= get_format(scale).min_subnormal).double().mean())}


def weight_study(weights: Mapping[str, torch.Tensor], block_sizes: Iterable[int],
                 scales: Sequence[str] = ("ue4m3", "ue5m3"), rule: str = "absmax", *,
                 elem: str = "e2m1") -> list[dict[str, Any]]:
    """One row per (tensor, scale, block size), in ``weights``' order, then ``scales``, then ``block_sizes``.

    A row: ``name``, ``shape``, the :func:`fit_sigma` fields, ``elem``, ``scale``, ``rule``, ``block_size``,
    the :func:`tensor_block_mse` fields and ``relative_mse = mse / std^2`` (NaN when std is 0). ValueError for
    a block size that is not an integer >= 1, before any tensor is quantized.
    """
    block_sizes = list(block_sizes)
    for block_size in block_sizes:
        _check_block_size(block_size)
    rows = []
    for name, w in weights.items():
        stats = fit_sigma(w)
        variance = stats["std"] ** 2
        for scale in scales:
            for block_size in block_sizes:
                err = tensor_block_mse(w, block_size, elem, scale, rule)
                rows.append({"name": name, "shape": tuple(w.shape), **stats, "elem": elem, "scale": scale,
                             "rule": rule, "block_size": block_size, **err,
                             "relative_mse": err["mse"] / variance if variance > 0 else float("nan")})
    return rows


def _check_block_size(block_size: int) -> None:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
