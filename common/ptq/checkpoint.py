"""Quantized checkpoints: selected weights stored as element codes plus block scales, rebuilt bit-exactly.

Folder layout (HF-style, written atomically with :func:`common.io.atomic_dir`):

* ``model.safetensors``: for each selected module ``<name>`` the weight ``<name>.weight`` is replaced by

  - ``<name>.qcodes``: uint8 codes of the element values (``common.formats.encode``); for element formats of
    4 bits or fewer two codes share a byte along the last (``in_features``) axis, zero-padded to an even length:
    ``byte[..., j] = code[..., 2j] | code[..., 2j + 1] << 4`` (low nibble first); otherwise one code per byte;
  - ``<name>.qscales``: the block scales, shape ``(out_features, num_blocks)`` (``(1,)`` per tensor), as uint8
    codes of the scale format when it has 8 bits or fewer, else float32 values;
  - ``<name>.qglobal``: the float32 global scale (shape ``()`` per tensor, ``(out_features, 1)`` per row), only
    with two-level scaling;

  and every other parameter and persistent buffer is stored unchanged (a tensor tied to an earlier one is
  stored once and recorded under ``"tied"``);
* ``config.json``: the model config; ``quantization_config.json``: the recipe, the selected module names, the
  original shapes and dtypes, the packing and version info; the tokenizer files when a tokenizer is given.

Rebuild (:func:`dequantize_weight`): ``W = (decode(codes) * s) * g`` in exactly that order, in float32, with
``s`` repeated ``block_size`` times along the last axis and trimmed to ``in_features``; this is the order in
which :func:`common.scaling.quantize_blocks` forms its result, so the rebuilt weight is ``torch.equal`` to the
fake-quantized one (checked for every weight before anything is written). The checkpoint is not loadable by
``transformers.from_pretrained``: use :func:`load_quantized_checkpoint`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors.torch import load_file, save_file
from torch import nn

from common.formats import decode, encode, get_format
from common.io import atomic_dir, read_json, write_json
from common.scaling import BlockScales

from .apply import QuantizationHandle, apply_quantization, linear_modules
from .recipe import QuantRecipe, QuantSpec

WEIGHTS_FILE = "model.safetensors"
QUANT_CONFIG_FILE = "quantization_config.json"
CHECKPOINT_FORMAT = "lowbit-lab-ptq"
CHECKPOINT_FORMAT_VERSION = 1
QUANT_SUFFIXES = (".qcodes", ".qscales", ".qglobal")
PACKING = {"codes_per_byte": 2, "for_elem_bits_at_most": 4, "axis": -1, "order": "low nibble first",
           "padding": "zero-padded to an even length along the axis"}


# -------------------------------------------------------------------------------------------- encoding
def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """Two 4-bit codes per byte along the last axis: ``out[..., j] = codes[..., 2j] | codes[..., 2j+1] << 4``."""
    if codes.shape[-1] % 2:
        codes = torch.nn.functional.pad(codes, (0, 1))
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor, length: int) -> torch.Tensor:
    """Inverse of :func:`pack_nibbles`, trimmed to ``length`` codes along the last axis."""
    return torch.stack((packed & 0x0F, packed >> 4), dim=-1).flatten(-2)[..., :length]


def is_packed(spec: QuantSpec) -> bool:
    """Whether the element codes of ``spec`` are packed two per byte (element formats of 4 bits or fewer)."""
    return get_format(spec.elem).bits <= PACKING["for_elem_bits_at_most"]


def encode_weight(scales: BlockScales, spec: QuantSpec) -> dict[str, torch.Tensor]:
    """``{"qcodes", "qscales"[, "qglobal"]}`` of one weight from the :class:`BlockScales` of its quantization."""
    codes = encode(scales.elements, spec.elem)
    scale_fmt = get_format(spec.scale)
    stored = {"qcodes": pack_nibbles(codes) if is_packed(spec) else codes,
              "qscales": encode(scales.block, scale_fmt) if scale_fmt.bits <= 8 else scales.block.float()}
    if scales.global_ is not None:
        stored["qglobal"] = scales.global_.float()
    return stored


def dequantize_weight(qcodes: torch.Tensor, qscales: torch.Tensor, qglobal: torch.Tensor | None, spec: QuantSpec,
                      in_features: int) -> torch.Tensor:
    """float32 ``(decode(codes) * s) * g`` (see the module docstring); ``g`` only when ``qglobal`` is given."""
    codes = unpack_nibbles(qcodes, in_features) if is_packed(spec) else qcodes
    scale_fmt = get_format(spec.scale)
    s = decode(qscales, scale_fmt) if scale_fmt.bits <= 8 else qscales.float()
    if spec.block_size is not None:
        s = s.repeat_interleave(spec.block_size, dim=-1)[..., :in_features]
    weight = decode(codes, spec.elem) * s
    return weight if qglobal is None else weight * qglobal


# ---------------------------------------------------------------------------------------------- saving
def save_quantized_checkpoint(model: nn.Module, tokenizer: Any | None, recipe: QuantRecipe, names: Sequence[str],
                              out_dir: str | os.PathLike[str]) -> Path:
    """Write the quantized checkpoint of ``model`` (see the module docstring) to ``out_dir``; returns its path.

    ``names``: the selected Linear modules (:func:`common.ptq.select_linears`); their weights are stored as codes
    when ``recipe.weights`` is set, and their inputs are quantized on load when ``recipe.activations`` is set.
    The weights are quantized from their current values, so save from the unquantized model (not inside an
    active :func:`common.ptq.apply_quantization`). ``tokenizer`` (anything with ``save_pretrained``) is saved
    alongside, when given. Weights of another float dtype are quantized from their float32 copy, the dtype of
    the rebuild. Everything is computed and checked before the folder appears; on any error no ``out_dir`` is
    left behind (an existing one is kept).
    ValueError for unknown modules, element formats without codes (> 8 bits), a tied selected weight, or a weight
    whose rebuild would not be exact (e.g. a NaN in a format without a NaN code).
    """
    config = getattr(model, "config", None)
    if not hasattr(config, "save_pretrained"):
        raise ValueError(f"model {type(model).__name__} has no Hugging Face config to save")
    modules = linear_modules(model, names)
    spec = recipe.weights
    if spec is not None and get_format(spec.elem).bits > 8:
        raise ValueError(f"element format {spec.elem!r} has {get_format(spec.elem).bits} bits: only formats of "
                         "8 bits or fewer can be stored as codes")
    tensors, tied = _deduplicated_state(model)
    weights_info = {}
    for name, module in modules.items():
        key = f"{name}.weight"
        if key in tied or key in tied.values():
            raise ValueError(f"weight {key!r} is tied to another tensor ({_tie_partner(key, tied)!r}); a tied weight "
                             "cannot be stored quantized: exclude the module or untie the weights")
        weight = module.weight.detach()
        weights_info[name] = {"shape": list(weight.shape), "dtype": str(weight.dtype).removeprefix("torch.")}
        if spec is None:
            continue
        quantized, scales = spec.quantize(weight.float(), return_scales=True)
        stored = encode_weight(scales, spec)
        rebuilt = dequantize_weight(stored["qcodes"], stored["qscales"], stored.get("qglobal"), spec,
                                    weight.shape[-1])
        if not _same_values(rebuilt, quantized):
            raise ValueError(f"weight {key!r} cannot be stored exactly with {spec.elem}/{spec.scale} codes")
        del tensors[key]
        tensors.update({f"{name}.{suffix}": value.contiguous() for suffix, value in stored.items()})
    meta = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_FORMAT_VERSION,
        "versions": _versions(),
        "recipe": recipe.to_dict(),
        "modules": list(modules),
        "weights": weights_info,
        "stored_quantized": spec is not None,
        "packing": {**PACKING, "packed": spec is not None and is_packed(spec)},
        "scale_storage": None if spec is None else ("codes" if get_format(spec.scale).bits <= 8 else "float32"),
        "tied": tied,
    }
    with atomic_dir(out_dir) as tmp:
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        config.save_pretrained(tmp)
        write_json(tmp / QUANT_CONFIG_FILE, meta)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return Path(out_dir)


def _deduplicated_state(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The state dict with each tensor stored once (contiguous), and ``{tied name: the stored name}``."""
    tensors: dict[str, torch.Tensor] = {}
    tied: dict[str, str] = {}
    first: dict[tuple[Any, ...], str] = {}
    for key, value in model.state_dict().items():
        identity = (value.data_ptr(), value.dtype, tuple(value.shape), value.stride())
        if value.numel() and identity in first:
            tied[key] = first[identity]
            continue
        first[identity] = key
        tensors[key] = value.detach().contiguous()
    return tensors, tied


def _tie_partner(key: str, tied: dict[str, str]) -> str:
    return tied.get(key) or next(name for name, target in tied.items() if target == key)


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values (``torch.equal``), NaN matching NaN."""
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _versions() -> dict[str, str]:
    try:
        lowbit = importlib.metadata.version("lowbit-lab")
    except importlib.metadata.PackageNotFoundError:  # running from a clone that was not pip-installed
        lowbit = "unknown"
    return {"lowbit-lab": lowbit, "torch": torch.__version__, "transformers": transformers.__version__}


# --------------------------------------------------------------------------------------------- loading
def load_quantized_checkpoint(path: str | os.PathLike[str]) -> tuple[nn.Module, QuantizationHandle]:
    """Rebuild the model saved by :func:`save_quantized_checkpoint`: ``(model, handle)``.

    The model is ``AutoModelForCausalLM.from_config(config, dtype=float32)`` in eval mode, with every stored
    tensor loaded (upcast to float32 where the source had another float dtype) and each selected weight rebuilt
    by :func:`dequantize_weight`; for a float32 source it is ``torch.equal`` to what
    :func:`common.ptq.apply_quantization` gives with the same recipe (for another dtype: to what it gives on the
    float32 copy). ``handle`` holds the activation hooks re-attached from the recipe (none without activation
    quantization); ``handle.remove()`` removes them, the weights stay quantized.
    """
    folder = Path(path)
    meta = read_quantization_config(folder)
    recipe = QuantRecipe.from_dict(meta["recipe"])
    names = meta["modules"]
    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_file(str(folder / WEIGHTS_FILE))
    if meta["stored_quantized"]:
        for name in names:
            qglobal = tensors.pop(f"{name}.qglobal", None)
            tensors[f"{name}.weight"] = dequantize_weight(tensors.pop(f"{name}.qcodes"),
                                                          tensors.pop(f"{name}.qscales"), qglobal, recipe.weights,
                                                          meta["weights"][name]["shape"][-1])
    for key, source in meta["tied"].items():
        tensors[key] = tensors[source]
    model.load_state_dict(tensors, strict=True)
    model.eval()
    return model, apply_quantization(model, recipe, names, weights=False)


def read_quantization_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``quantization_config.json`` of a quantized checkpoint; ValueError naming a folder that is not one."""
    folder = Path(path)
    if not (folder / QUANT_CONFIG_FILE).is_file() or not (folder / WEIGHTS_FILE).is_file():
        raise ValueError(f"{str(folder)!r} is not a quantized checkpoint (needs {QUANT_CONFIG_FILE} and "
                         f"{WEIGHTS_FILE})")
    meta = read_json(folder / QUANT_CONFIG_FILE)
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise ValueError(f"{str(folder / QUANT_CONFIG_FILE)!r}: unsupported format {meta.get('format')!r} "
                         f"version {meta.get('format_version')!r}; this reader: {CHECKPOINT_FORMAT} "
                         f"version {CHECKPOINT_FORMAT_VERSION}")
    return meta


# ----------------------------------------------------------------------------------------------- sizes
def checkpoint_size_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes on disk of the weights of a checkpoint folder: the sum of its ``*.safetensors`` files."""
    folder = Path(path)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no *.safetensors file in {str(folder)!r}")
    return sum(file.stat().st_size for file in files)


def size_report(model: nn.Module, path: str | os.PathLike[str]) -> dict[str, int | float]:
    """Quantized vs original sizes of the checkpoint at ``path`` written from ``model``.

    ``original_bytes``: the model's state dict in memory (each tied tensor once, in its dtype);
    ``checkpoint_bytes``: :func:`checkpoint_size_bytes`; ``selected_original_bytes``: the selected weights in
    memory; ``selected_quantized_bytes``: their ``qcodes``/``qscales``/``qglobal`` payload in the file;
    ``bits_per_weight``: ``8 * selected_quantized_bytes / selected weights``; ``ratio``:
    ``checkpoint_bytes / original_bytes``.
    """
    meta = read_quantization_config(path)
    tensors, _ = _deduplicated_state(model)
    modules = linear_modules(model, meta["modules"])
    numel = sum(module.weight.numel() for module in modules.values())
    payload = _payload_bytes(Path(path) / WEIGHTS_FILE) if meta["stored_quantized"] else None
    original = sum(t.numel() * t.element_size() for t in tensors.values())
    selected = sum(module.weight.numel() * module.weight.element_size() for module in modules.values())
    on_disk = checkpoint_size_bytes(path)
    quantized = selected if payload is None else payload
    return {"original_bytes": original, "checkpoint_bytes": on_disk, "ratio": on_disk / original,
            "selected_original_bytes": selected, "selected_quantized_bytes": quantized,
            "bits_per_weight": 8 * quantized / numel}


def _payload_bytes(file: Path) -> int:
    """Bytes of the ``.qcodes``/``.qscales``/``.qglobal`` tensors, from the safetensors header (8-byte
    little-endian header length, then JSON ``{name: {"data_offsets": [begin, end], ...}}``)."""
    with open(file, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    return sum(entry["data_offsets"][1] - entry["data_offsets"][0] for key, entry in header.items()
               if key.endswith(QUANT_SUFFIXES))
