"""Where a model step runs: the device and the dtype of its weights (the workflow config's ``compute:``, set per
profile, and every model step's ``--device`` / ``--dtype`` flags).

``device``: ``"cpu"``, ``"cuda"`` (``cuda:$LOCAL_RANK`` under torchrun, else the current CUDA device), ``"cuda:N"``,
or ``"auto"`` (CUDA when present, else
the CPU). ``dtype``: the dtype the model's float weights are loaded in (``"float32"``, ``"bfloat16"``,
``"float16"``). The embedded models and every CI profile run float32 on the CPU; the ``paper`` profile runs bf16
weights on CUDA, as the papers did.

What the dtype means, per kind of step:

* evaluation (perplexity, zero-shot, fake-quantized PTQ cells, SLQ): the weights are cast to ``dtype`` after
  loading. A quantized checkpoint is rebuilt in float32 first (its exact values) and then cast once, so in bf16 its
  weights are the float32 rebuild rounded to nearest-even bf16. Fake quantization keeps the input's dtype: block
  scales and element values are computed in float32 and the quantized tensor is returned in ``dtype``.
* training (pretraining, QAT) takes only the device: the master weights and the optimizer state stay float32, and
  mixed precision is the run's own ``train.bf16`` (``torch.autocast(bfloat16)`` over forward and backward, as the
  papers trained), part of the run's configuration and of its resume record. Under ``torchrun`` a CUDA device is
  the process's ``cuda:LOCAL_RANK``.

Results are per profile, and a profile fixes its device and dtype; the device does not change the numerics of fake
quantization (the GPU tests check that the CUDA kernels equal the CPU ones bit for bit), the dtype does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEVICE_KINDS = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class Compute:
    """A model step's device and weight dtype (module docstring); ValueError naming a bad value."""

    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self) -> None:
        kind, _, index = str(self.device).partition(":")
        if not isinstance(self.device, str) or kind not in DEVICE_KINDS or (index and (kind != "cuda"
                                                                                      or not index.isdigit())):
            raise ValueError(f"unknown device {self.device!r}; valid: cpu, cuda, cuda:N, auto")
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}; valid: {', '.join(DTYPES)}")

    @classmethod
    def from_dict(cls, data: Any) -> Compute:
        """The settings of ``{"device", "dtype"}`` (either may be missing: its default); ValueError naming an
        unknown key or a bad value."""
        if not isinstance(data, dict):
            raise ValueError(f"compute settings must be a mapping, got {data!r}")
        unknown = sorted(set(data) - {"device", "dtype"})
        if unknown:
            raise ValueError(f"unknown compute setting {unknown[0]!r}; valid: device, dtype")
        return cls(**data)

    def torch_device(self) -> torch.device:
        """The device to run on, a CUDA device always with its index (``torch.cuda.set_device`` needs one):
        ``"auto"`` is CUDA when present, else the CPU; CUDA without an index is ``cuda:$LOCAL_RANK`` under ``torchrun``
        (one GPU per process), else the current CUDA device. ValueError when CUDA is asked for and this machine has
        none (rather than a crash deep inside the first kernel)."""
        name = ("cuda" if torch.cuda.is_available() else "cpu") if self.device == "auto" else self.device
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r} was asked for, but torch finds no CUDA device on this machine "
                             "(set compute.device to cpu or auto)")
        if name == "cuda":
            name = f"cuda:{int(os.environ.get('LOCAL_RANK', torch.cuda.current_device()))}"
        return torch.device(name)

    def torch_dtype(self) -> torch.dtype:
        """The weight dtype as a ``torch.dtype``."""
        return DTYPES[self.dtype]

    def place(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` moved to :meth:`torch_device` with its floating-point weights cast to :meth:`torch_dtype` (an
        evaluation step's model; training keeps float32 master weights, see the module docstring)."""
        return model.to(device=self.torch_device(), dtype=self.torch_dtype())
