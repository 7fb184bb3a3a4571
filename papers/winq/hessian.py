"""One Hessian-spectrum cell of the study: the spectral density of a trained low-bit model's loss Hessian (the
paper's diagnosis: low-bit QAT sits in flat regions around saddle points, with much mass near zero).

The operator is the Hessian of the causal-LM loss (:func:`common.train.causal_lm_loss`, mean next-token cross-entropy)
on one fixed batch, over the quantized layers' latent weights ``W`` (what the optimizer updates; the scales are held
fixed), through the quantizer's straight-through estimator, in eval mode (no training noise: one fixed operator),
with PyTorch's math attention backend (``sdpa_kernel(SDPBackend.MATH)``: the fused kernels have no double backward).
The batch is the first ``batch_sequences`` non-overlapping sequences of ``seq_len + 1`` tokens of the split's token
stream (sequence ``i`` starts at token ``i * seq_len``, as :func:`common.train.evaluate_loss` cuts them): every
model of the study sees the same tokens. The density is :func:`common.analysis.model_hessian_spectrum` (stochastic
Lanczos quadrature) with the config's probes, Lanczos steps, kernel sigma, grid and relative near-zero threshold.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from common.analysis.hessian import model_hessian_spectrum
from common.compute import Compute
from common.data import read_jsonl, token_stream
from common.io import read_json
from common.qat.lowbit_io import METADATA_FILE, load_lowbit_model
from common.train import causal_lm_loss


def first_sequences(tokens: torch.Tensor, seq_len: int, count: int) -> torch.Tensor:
    """The first ``count`` non-overlapping sequences of ``seq_len + 1`` tokens of ``tokens`` (row ``i`` =
    ``tokens[i L : i L + L + 1]``), shape (count, L + 1); ValueError when the stream is shorter than
    ``count * L + 1`` tokens."""
    if tokens.numel() < count * seq_len + 1:
        raise ValueError(f"token stream of {tokens.numel()} tokens is shorter than {count} sequences of "
                         f"{seq_len} + 1 tokens")
    return torch.stack([tokens[i * seq_len : i * seq_len + seq_len + 1] for i in range(count)])


def spectrum_cell(model_dir: str | os.PathLike[str], split: str | os.PathLike[str],
                  config_hessian: Mapping[str, Any], seq_len: int, seed: int,
                  compute: Compute | None = None) -> dict[str, Any]:
    """The Hessian spectrum (module docstring) of the low-bit checkpoint ``model_dir``
    (:func:`common.qat.lowbit_io.load_lowbit_model`) on the JSONL split ``split``; ``config_hessian``: the config's
    ``hessian`` section (``probes``, ``steps``, ``sigma``, ``grid``, ``near_zero``, ``batch_sequences``), ``seed``:
    the probes' start vectors; run where ``compute`` says (:class:`common.compute.Compute`: the model, the batch
    and the Lanczos basis on its device, the weights in its dtype).

    Returns :func:`common.analysis.slq_density`'s record (density, nodes, weights, mass fractions, ...) with the
    Hessian's parameter names as ``parameter_names``, plus ``parameters`` (their count: the Hessian's dimension),
    ``bits``, ``activation_bits`` and ``method`` of the run, ``seq_len``, ``batch_sequences`` and ``wall_time_s``
    (the spectrum's computation, model loading excluded).
    """
    compute = compute or Compute()
    model, tokenizer, handle = load_lowbit_model(model_dir)
    model = compute.place(model)
    method = read_json(os.path.join(model_dir, METADATA_FILE))["qat"]["method"]
    tokens = token_stream(tokenizer, read_jsonl(split))
    batch = first_sequences(tokens, seq_len, config_hessian["batch_sequences"]).to(compute.torch_device())
    params = [handle.latent_weight(name) for name in handle.names]  # the model is in eval mode: no noise
    started = time.perf_counter()
    with sdpa_kernel(SDPBackend.MATH):  # the fused attention kernels have no double backward
        spectrum = model_hessian_spectrum(
            model, lambda: causal_lm_loss(model, batch), params, probes=config_hessian["probes"],
            steps=config_hessian["steps"], sigma=config_hessian["sigma"], grid=config_hessian["grid"],
            near_zero=config_hessian["near_zero"], seed=seed, device=compute.torch_device())
    wall = time.perf_counter() - started
    names = spectrum.pop("parameters")
    return {**spectrum, "parameter_names": names, "parameters": sum(p.numel() for p in params),
            "bits": handle.bits, "activation_bits": handle.activation_bits, "method": method,
            "seq_len": seq_len, "batch_sequences": config_hessian["batch_sequences"], "wall_time_s": round(wall, 3)}

