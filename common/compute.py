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

A model too large for one GPU: with ``device`` ``"auto"`` or ``"cuda"`` (no index, not under ``torchrun``) and more
than one GPU visible, :meth:`Compute.place` spreads an evaluation model over the GPUs, whole decoder layers per GPU
in order (accelerate's ``infer_auto_device_map`` and ``dispatch_model``, i.e. ``device_map="auto"`` restricted to
the GPUs; :func:`gpu_layout`), when its weights in ``dtype`` exceed :data:`HEADROOM` of the first GPU's free memory.
Inputs go to the first GPU and the outputs come back there, so the callers do not change. Offload to the CPU or disk
is refused (``ValueError`` naming the sizes): fake quantization rewrites the weights in place once, which offloaded
weights, loaded afresh on every forward, would undo.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DEVICE_KINDS = ("cpu", "cuda", "auto")
HEADROOM = 0.9  # the share of a GPU's free memory an evaluation model's weights may fill (the rest: activations,
#                 fake-quant temporaries, the CUDA context)


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
        evaluation step's model; training keeps float32 master weights, see the module docstring), or spread over
        every visible GPU when it does not fit the first one and the device leaves the choice open (module
        docstring, :func:`gpu_layout`)."""
        device, dtype = self.torch_device(), self.torch_dtype()
        spreadable = self.device in ("auto", "cuda") and "LOCAL_RANK" not in os.environ
        if device.type == "cuda" and spreadable and torch.cuda.device_count() > 1:
            free = {index: torch.cuda.mem_get_info(index)[0] for index in range(torch.cuda.device_count())}
            layout = gpu_layout(model, dtype, free)
            if layout is not None:
                from accelerate import dispatch_model

                return dispatch_model(model.to(dtype=dtype), device_map=layout)
        return model.to(device=device, dtype=dtype)


def gpu_layout(model: torch.nn.Module, dtype: torch.dtype, free_bytes: Mapping[int, int]) -> dict[str, int] | None:
    """Where an evaluation model's modules go on the GPUs whose free memory is ``free_bytes`` (GPU index -> bytes,
    the first GPU first): None when its weights in ``dtype`` fit :data:`HEADROOM` of the first GPU's (the whole model
    there); else accelerate's ``infer_auto_device_map`` with :data:`HEADROOM` of each GPU's free memory, the model's
    ``_no_split_modules`` (decoder layers) kept whole: module name -> GPU index. ``ValueError`` naming the model's size
    and the GPUs' when the GPUs together cannot hold it (no CPU or disk offload, module docstring)."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import compute_module_sizes

    if not free_bytes:
        raise ValueError("gpu_layout needs at least one GPU's free memory")
    need = compute_module_sizes(model, dtype=dtype)[""]
    first = next(iter(free_bytes))
    if need <= HEADROOM * free_bytes[first]:
        return None
    budget = {index: int(HEADROOM * free) for index, free in free_bytes.items()}
    layout = infer_auto_device_map(model, max_memory=budget, dtype=dtype,
                                   no_split_module_classes=list(getattr(model, "_no_split_modules", None) or []))
    if any(not isinstance(place, int) for place in layout.values()):
        gib = 2**30
        raise ValueError(f"the model's weights need {need / gib:.3g} GiB in {str(dtype).removeprefix('torch.')}, more "
                         f"than {HEADROOM:.0%} of the free memory of its {len(free_bytes)} GPU(s) "
                         f"({', '.join(f'{free / gib:.3g}' for free in free_bytes.values())} GiB) holds with whole "
                         "decoder layers per GPU; offload to the CPU is not supported (fake quantization rewrites the "
                         "weights in place): use more or larger GPUs, or a smaller compute.dtype")
    return dict(layout)
