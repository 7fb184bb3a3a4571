"""``transformers.AutoModelForCausalLM.from_pretrained`` for the quantized checkpoints of :mod:`common.ptq.checkpoint`.

Importing this module registers the quantization method ``"lowbit-lab"`` with transformers (a
:class:`LowbitLabConfig` and its :class:`LowbitLabHfQuantizer`, through transformers' ``register_quantization_config``
and ``register_quantizer``). Nothing else registers it: :mod:`common.ptq` does not import this module, which imports
transformers' quantizer registry, ``transformers.quantizers.auto`` (every quantizer transformers ships, about 4 s).
A checkpoint's ``config.json`` names that method in its ``quantization_config`` (the record of
``quantization_config.json``), so after the import

>>> import common.ptq.hf                                                        # doctest: +SKIP
>>> model = transformers.AutoModelForCausalLM.from_pretrained("out/nvfp4")       # doctest: +SKIP

is the model :func:`common.ptq.load_quantized_checkpoint` builds: the same float32 weights bit for bit and the same
activation quantization (its hooks are ``model.hf_quantizer.handle``). With ``dtype=torch.bfloat16`` (or another
float dtype) the rebuilt weights are rounded to it once, after the rebuild in float32.

Without the import, transformers does not know the method: it warns ``Unknown quantization type, got lowbit-lab``
and falls back to plain loading, which fails loudly, because every selected module's ``<name>.weight`` in the file
is an empty uint8 guard (a size mismatch: ``RuntimeError``). It never loads a model with random weights in place of
the quantized ones. ``save_pretrained`` of a loaded model is refused (:meth:`LowbitLabHfQuantizer.is_serializable`):
re-save with :func:`common.ptq.save_quantized_checkpoint`.

Loading: before the weights load, each selected ``nn.Linear`` is replaced by a :class:`StoredLinear` whose buffers
have the stored names, shapes and dtypes (so transformers loads the codes untouched); after they load, each becomes
an ``nn.Linear`` again with the weight :func:`common.ptq.checkpoint.rebuild_weight` gives.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers.quantizers.auto import register_quantization_config, register_quantizer
from transformers.quantizers.base import HfQuantizer
from transformers.utils.quantization_config import QuantizationConfigMixin

from common.quantization import quantize_
from common.quantizers import QuantizationHandle
from common.recipes import QuantRecipe

from .checkpoint import (
    QUANT_METHOD,
    check_record,
    rebuild_weight,
    stored_tensor_specs,
)


@register_quantization_config(QUANT_METHOD)
class LowbitLabConfig(QuantizationConfigMixin):
    """The ``quantization_config`` of a lowbit-lab checkpoint's ``config.json``: the checkpoint record of
    :mod:`common.ptq.checkpoint` plus ``quant_method = "lowbit-lab"``. ValueError for a record this reader cannot
    read (names the format and version it found)."""

    def __init__(self, **record: Any) -> None:
        record.pop("quant_method", None)
        check_record(record, "config.json quantization_config")
        self.quant_method = QUANT_METHOD
        self.__dict__.update(record)

    def record(self) -> dict[str, Any]:
        """The checkpoint record (the ``quantization_config.json`` of the folder)."""
        return {key: value for key, value in self.to_dict().items() if key != "quant_method"}


class StoredLinear(nn.Module):
    """Placeholder of a selected ``nn.Linear`` while transformers loads the checkpoint: the stored tensors of the
    module (``weight`` guard, ``qcodes``/``qscales``/``qglobal`` or ``qweight``, and ``bias``) as buffers of their
    stored shapes and dtypes, on the device of the module it replaces."""

    def __init__(self, linear: nn.Linear, specs: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        device = linear.weight.device
        for suffix, (shape, dtype) in specs.items():
            self.register_buffer(suffix, torch.empty(shape, dtype=dtype, device=device))
        self.bias = linear.bias

    def forward(self, *_: Any) -> torch.Tensor:
        raise RuntimeError("a StoredLinear is only a loading placeholder; it is replaced once the weights load")


@register_quantizer(QUANT_METHOD)
class LowbitLabHfQuantizer(HfQuantizer):
    """Loads pre-quantized lowbit-lab checkpoints (see the module docstring). Quantizing while loading is not
    offered: quantize with :func:`common.ptq.save_quantized_checkpoint` or ``python -m common.ptq checkpoint``."""

    requires_calibration = True  # transformers refuses a not pre-quantized model with this method
    quantization_config: LowbitLabConfig

    def __init__(self, quantization_config: LowbitLabConfig, **kwargs: Any) -> None:
        super().__init__(quantization_config, **kwargs)
        self.handle: QuantizationHandle | None = None

    def validate_environment(self, *args: Any, **kwargs: Any) -> None:
        if not self.pre_quantized:
            raise ValueError("lowbit-lab quantizes with common.ptq.save_quantized_checkpoint or `python -m "
                             "common.ptq checkpoint`, not while loading")

    def _process_model_before_weight_loading(self, model: nn.Module, **kwargs: Any) -> nn.Module:
        record = self.quantization_config.record()
        for name, specs in stored_tensor_specs(record).items():
            parent, child = _parent(model, name)
            linear = getattr(parent, child)
            if not isinstance(linear, nn.Linear):
                raise ValueError(f"quantized module {name!r} is a {type(linear).__name__} in this model, not a Linear")
            setattr(parent, child, StoredLinear(linear, specs))
        return model

    def _process_model_after_weight_loading(self, model: nn.Module, **kwargs: Any) -> nn.Module:
        record = self.quantization_config.record()
        recipe = QuantRecipe.from_dict(record["recipe"])
        dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
        for name in record["modules"]:
            parent, child = _parent(model, name)
            stored = getattr(parent, child)
            stored_tensors = {suffix: buffer for suffix, buffer in stored.named_buffers(recurse=False)}
            weight = rebuild_weight(record, name, stored_tensors, recipe)
            linear = nn.Linear(stored.in_features, stored.out_features, bias=stored.bias is not None,
                               device=weight.device, dtype=dtype)
            with torch.no_grad():
                linear.weight.copy_(weight)
                if stored.bias is not None:
                    linear.bias.copy_(stored.bias)
            setattr(parent, child, linear)
        self.handle = quantize_(model, recipe, names=record["modules"], weights=False)
        return model

    def is_serializable(self, *args: Any, **kwargs: Any) -> bool:
        return False

    @property
    def is_trainable(self) -> bool:
        return False


def _parent(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    parent_name, _, child = name.rpartition(".")
    return (model.get_submodule(parent_name) if parent_name else model), child
