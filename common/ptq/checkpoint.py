"""Quantized checkpoints: selected weights stored as element codes plus block scales, rebuilt bit-exactly.

Folder layout (HF-style, written atomically with :func:`common.io.atomic_dir`):

* ``model.safetensors``: for each selected module ``<name>`` the weight ``<name>.weight`` is replaced by

  - ``<name>.qcodes``: uint8 codes of the element values (``common.formats.encode``), packed along the last
    (``in_features``) axis, ``n = codes_per_byte`` codes per byte (:func:`codes_per_byte` of the element format's
    bits ``b``: ``n = 8`` for ``b = 1``, 4 for ``b = 2``, 2 for ``b = 3, 4`` (nibbles), 1 for ``b = 5 .. 8``), each
    code in a field of ``w = 8 / n`` bits, low bits first, the axis zero-padded to a multiple of ``n``:
    ``byte[..., j] = sum_i code[..., n j + i] << (w i)`` for ``i = 0 .. n - 1`` (:func:`pack_codes`);
  - ``<name>.qscales``: the block scales, shape ``(out_features, num_blocks)`` (``(out_features, 1)`` for
    ``block_size="row"``, ``(1,)`` per tensor), as uint8 codes of the scale format when it has 8 bits or fewer,
    else float32 values;
  - ``<name>.qglobal``: the float32 global scale (shape ``()`` per tensor, ``(out_features, 1)`` per row), only
    with two-level scaling;

  and every other parameter and persistent buffer is stored unchanged (a tensor tied to an earlier one is
  stored once and recorded under ``"tied"``);
* ``config.json``: the model config; ``quantization_config.json``: the recipe, the selected module names, the
  original shapes and dtypes, the packing (``"packing": {"codes_per_byte": n, "bits_per_code": w, ...}``) and
  version info; the tokenizer files when a tokenizer is given.

Versions: this writer writes ``format_version`` 3; the reader reads 1, 2 and 3 (:func:`stored_codes_per_byte`).
Version 2 had no guards, no ``qweight`` (an activation-only recipe stored ``<name>.weight`` as is) and no
``quantization_config`` in ``config.json``.
Version 1 packed two codes per byte (low nibble first) for every element format of 4 bits or fewer and one per
byte otherwise, recorded as ``"packing": {"packed": bool, ...}``: the same bytes as version 2 for formats of 3 to 8
bits; a version-1 checkpoint of a 1- or 2-bit format (int2, ternary) is read with its two codes per byte.

Codes and scales come from the recipe's weight spec (:func:`common.quantizers.quantize_tensor`), or, for learned scales
(a spec with ``rule=None``, e.g. ParetoQ QAT), from the caller (``weight_scales`` of :func:`save_quantized_checkpoint`).

Rebuild (:func:`dequantize_weight`): ``W = (decode(codes) * s) * g`` in exactly that order, in float32, with
``s`` repeated ``block_size`` times along the last axis and trimmed to ``in_features`` (broadcast along it for
``block_size="row"``); this is the order in which :func:`common.scaling.quantize_blocks` forms its result, so the
rebuilt weight is ``torch.equal`` to the fake-quantized one (checked for every weight before anything is written;
with caller-supplied scales, to the module's weight itself).

Loading with transformers (version 3): ``config.json`` carries the record as its ``quantization_config`` with
``quant_method = "lowbit-lab"`` (:data:`QUANT_METHOD`), and each selected module's ``<name>.weight`` is an empty
uint8 guard, the quantized data living under the suffixes above (``<name>.qweight``, float, when the recipe keeps
the weights and only quantizes the inputs). After ``import common.ptq.hf``, ``AutoModelForCausalLM.from_pretrained``
loads the model :func:`load_quantized_checkpoint` builds (:mod:`common.ptq.hf`); without it, plain loading fails
on the guards' size mismatch instead of initialising the quantized weights at random.

The checkpoint kind ``"quantized"`` (marker ``quantization_config.json``) is registered here, so
:func:`common.models.load_checkpoint` loads such a folder with :func:`load_quantized_checkpoint`.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from common.formats import decode, encode, get_format
from common.io import atomic_dir, read_json, write_json
from common.models import CHECKPOINT_MARKERS, CheckpointKind, register_checkpoint_kind
from common.progress import progress
from common.quantization import quantize_
from common.quantizers import QuantizationHandle, quantize_tensor
from common.recipes import QuantRecipe, QuantSpec
from common.scaling import BlockScales
from common.select import linear_modules

WEIGHTS_FILE = "model.safetensors"
QUANT_CONFIG_FILE = CHECKPOINT_MARKERS["quantized"].marker  # "quantization_config.json"
CHECKPOINT_FORMAT = "lowbit-lab-ptq"
CHECKPOINT_FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
QUANT_METHOD = "lowbit-lab"  # the transformers quantization method of config.json (common.ptq.hf)
QUANT_SUFFIXES = (".qcodes", ".qscales", ".qglobal", ".qweight")
GUARD = torch.zeros(0, dtype=torch.uint8)  # every selected module's <name>.weight from version 3 on
PACKING = {"axis": -1, "order": "low bits first",
           "padding": "zero-padded to a multiple of codes_per_byte along the axis"}


# -------------------------------------------------------------------------------------------- encoding
def codes_per_byte(bits: int) -> int:
    """Codes of a ``bits``-bit element format per stored byte: 8 (1 bit), 4 (2 bits), 2 (3 or 4 bits), 1 (5 to 8
    bits); ValueError for other widths."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 8:
        raise ValueError(f"element codes have 1 to 8 bits, got {bits!r}")
    return 8 if bits == 1 else 4 if bits == 2 else 2 if bits <= 4 else 1


def pack_codes(codes: torch.Tensor, per_byte: int) -> torch.Tensor:
    """``per_byte`` (1, 2, 4 or 8) codes per uint8 along the last axis, low bits first:
    ``out[..., j] = sum_i codes[..., per_byte j + i] << (i 8 / per_byte)``, the axis zero-padded to a multiple of
    ``per_byte``. Each code must fit its ``8 / per_byte``-bit field."""
    width = _field_width(per_byte)
    codes = codes.to(torch.uint8)
    if per_byte == 1:
        return codes
    pad = -codes.shape[-1] % per_byte
    if pad:
        codes = torch.nn.functional.pad(codes, (0, pad))
    groups = codes.reshape(*codes.shape[:-1], -1, per_byte)
    packed = groups[..., 0].clone()
    for i in range(1, per_byte):
        packed |= groups[..., i] << (i * width)
    return packed


def unpack_codes(packed: torch.Tensor, length: int, per_byte: int) -> torch.Tensor:
    """Inverse of :func:`pack_codes`, trimmed to ``length`` codes along the last axis."""
    width = _field_width(per_byte)
    if per_byte == 1:
        return packed[..., :length]
    mask = (1 << width) - 1
    fields = [(packed >> (i * width)) & mask for i in range(per_byte)]
    return torch.stack(fields, dim=-1).flatten(-2)[..., :length]


def _field_width(per_byte: int) -> int:
    if per_byte not in (1, 2, 4, 8):
        raise ValueError(f"codes_per_byte must be 1, 2, 4 or 8, got {per_byte!r}")
    return 8 // per_byte


def spec_codes_per_byte(spec: QuantSpec) -> int:
    """:func:`codes_per_byte` of the element format of ``spec`` (the version-2 rule)."""
    return codes_per_byte(get_format(spec.elem).bits)


def encode_weight(scales: BlockScales, spec: QuantSpec) -> dict[str, torch.Tensor]:
    """``{"qcodes", "qscales"[, "qglobal"]}`` of one weight from the :class:`BlockScales` of its quantization."""
    codes = encode(scales.elements, spec.elem)
    scale_fmt = get_format(spec.scale)
    stored = {"qcodes": pack_codes(codes, spec_codes_per_byte(spec)),
              "qscales": encode(scales.block, scale_fmt) if scale_fmt.bits <= 8 else scales.block.float()}
    if scales.global_ is not None:
        stored["qglobal"] = scales.global_.float()
    return stored


def dequantize_weight(qcodes: torch.Tensor, qscales: torch.Tensor, qglobal: torch.Tensor | None, spec: QuantSpec,
                      in_features: int, *, per_byte: int | None = None) -> torch.Tensor:
    """float32 ``(decode(codes) * s) * g`` (see the module docstring); ``g`` only when ``qglobal`` is given.
    ``per_byte``: codes per byte of ``qcodes`` (None: :func:`spec_codes_per_byte`, the version-2 rule)."""
    codes = unpack_codes(qcodes, in_features, spec_codes_per_byte(spec) if per_byte is None else per_byte)
    scale_fmt = get_format(spec.scale)
    s = decode(qscales, scale_fmt) if scale_fmt.bits <= 8 else qscales.float()
    if isinstance(spec.block_size, int):  # "row": one scale per row, broadcast; None: one per tensor
        s = s.repeat_interleave(spec.block_size, dim=-1)[..., :in_features]
    weight = decode(codes, spec.elem) * s
    return weight if qglobal is None else weight * qglobal


# ---------------------------------------------------------------------------------------------- saving
def save_quantized_checkpoint(model: nn.Module, tokenizer: Any | None, recipe: QuantRecipe, names: Sequence[str],
                              out_dir: str | os.PathLike[str], *,
                              weight_scales: Mapping[str, BlockScales] | None = None) -> Path:
    """Write the quantized checkpoint of ``model`` (see the module docstring) to ``out_dir``; returns its path.

    ``names``: the selected Linear modules (:func:`common.ptq.select_linears`); their weights are stored as codes
    when ``recipe.weights`` is set, and their inputs are quantized on load when ``recipe.activations`` is set.
    The weights are quantized from their current values, so save from the unquantized model (not inside an
    active :func:`common.quantizers.apply_quantization`). ``tokenizer`` (anything with ``save_pretrained``) is saved
    alongside, when given. Weights of another float dtype are quantized from their float32 copy, the dtype of
    the rebuild. Everything is computed and checked before the folder appears; on any error no ``out_dir`` is
    left behind (an existing one is kept).

    ``weight_scales``: ``{name: BlockScales}`` for exactly the modules ``names``, the codes and scales of weights
    that were quantized elsewhere (learned scales, ``recipe.weights.rule`` None): ``elements`` the element values
    (the levels of ``recipe.weights.elem``, the weight's shape), ``block`` the scales of the spec's block geometry
    (values of its scale format), ``global_`` the global scale or None as the spec says. The module's weight must
    already hold the quantized values: the rebuild ``(elements * block) * global_`` is checked ``torch.equal``
    against the weight itself (its float32 copy).

    ValueError for unknown modules, element formats without codes (> 8 bits), a weight spec blocked along another
    axis than -1, a tied selected weight, or a weight
    whose rebuild would not be exact (e.g. a NaN in a format without a NaN code, or scales that do not rebuild the
    weight); with ``weight_scales``: without a weight spec, a missing or extra name, or scales of the wrong shape;
    without them: a weight spec of learned scales (``rule=None``).
    """
    config = getattr(model, "config", None)
    if not hasattr(config, "save_pretrained"):
        raise ValueError(f"model {type(model).__name__} has no Hugging Face config to save")
    modules = linear_modules(model, names)
    spec = recipe.weights
    if spec is not None and get_format(spec.elem).bits > 8:
        raise ValueError(f"element format {spec.elem!r} has {get_format(spec.elem).bits} bits: only formats of "
                         "8 bits or fewer can be stored as codes")
    if spec is not None and spec.axis != -1:
        raise ValueError(f"weights blocked along axis {spec.axis}: a quantized checkpoint stores weights blocked along "
                         "in_features (axis -1), the layout its codes are packed and rebuilt in")
    _check_weight_scales(weight_scales, spec, list(modules))
    tensors, tied = _deduplicated_state(model)
    weights_info = {}
    for name, module in progress(modules.items(), "quantizing weights", total=len(modules), unit="layer"):
        key = f"{name}.weight"
        if key in tied or key in tied.values():
            raise ValueError(f"weight {key!r} is tied to another tensor ({_tie_partner(key, tied)!r}); a tied weight "
                             "cannot be stored quantized: exclude the module or untie the weights")
        weight = module.weight.detach()
        weights_info[name] = {"shape": list(weight.shape), "dtype": str(weight.dtype).removeprefix("torch.")}
        del tensors[key]
        tensors[key] = GUARD
        if spec is None:
            tensors[f"{name}.qweight"] = weight.contiguous()
            continue
        if weight_scales is None:
            quantized, scales = quantize_tensor(weight.float(), spec, return_scales=True)
        else:
            quantized, scales = weight.float(), weight_scales[name]
            _check_scales_shape(name, scales, spec, tuple(weight.shape))
        stored = encode_weight(scales, spec)
        rebuilt = dequantize_weight(stored["qcodes"], stored["qscales"], stored.get("qglobal"), spec,
                                    weight.shape[-1])
        if not _same_values(rebuilt, quantized):
            why = ": the given codes and scales do not rebuild the weight" if weight_scales is not None else ""
            raise ValueError(f"weight {key!r} cannot be stored exactly with {spec.elem}/{spec.scale} codes{why}")
        tensors.update({f"{name}.{suffix}": value.contiguous() for suffix, value in stored.items()})
    per_byte = None if spec is None else spec_codes_per_byte(spec)
    meta = {
        "format": CHECKPOINT_FORMAT,
        "format_version": CHECKPOINT_FORMAT_VERSION,
        "versions": _versions(),
        "recipe": recipe.to_dict(),
        "modules": list(modules),
        "weights": weights_info,
        "stored_quantized": spec is not None,
        "packing": {**PACKING, "codes_per_byte": per_byte, "bits_per_code": None if per_byte is None else 8 // per_byte,
                    "packed": per_byte is not None and per_byte > 1},
        "scale_storage": None if spec is None else ("codes" if get_format(spec.scale).bits <= 8 else "float32"),
        "scales": None if spec is None else ("learned" if weight_scales is not None else "selected"),
        "tied": tied,
        "tensors": {name: {suffix.removeprefix("."): _tensor_entry(tensors[name + suffix])
                           for suffix in (".weight", *QUANT_SUFFIXES) if name + suffix in tensors}
                    for name in modules},
    }
    hf_config = copy.deepcopy(config)
    hf_config.quantization_config = {"quant_method": QUANT_METHOD, **meta}
    with atomic_dir(out_dir) as tmp:
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        hf_config.save_pretrained(tmp)
        write_json(tmp / QUANT_CONFIG_FILE, meta)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
    return Path(out_dir)


def _check_weight_scales(weight_scales: Mapping[str, BlockScales] | None, spec: QuantSpec | None,
                         names: list[str]) -> None:
    """The ``weight_scales`` argument against the spec and the selected names (see save_quantized_checkpoint)."""
    if weight_scales is None:
        if spec is not None and spec.rule is None:
            raise ValueError(f"the weight spec has learned scales (rule=None, elem {spec.elem!r}): pass their codes "
                             "and scales as weight_scales")
        return
    if spec is None:
        raise ValueError("weight_scales needs a recipe with a weight spec (recipe.weights is None)")
    missing = [name for name in names if name not in weight_scales]
    extra = [name for name in weight_scales if name not in names]
    if missing:
        raise ValueError(f"weight_scales has no codes and scales for the selected module {missing[0]!r}"
                         f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}")
    if extra:
        raise ValueError(f"weight_scales holds {extra[0]!r}, which is not a selected module"
                         f"{f' (and {len(extra) - 1} more)' if len(extra) > 1 else ''}")


def _check_scales_shape(name: str, scales: BlockScales, spec: QuantSpec, shape: tuple[int, ...]) -> None:
    """ValueError naming ``name`` unless the BlockScales have the shapes of ``spec``'s geometry for a weight of
    ``shape``."""
    out_features, in_features = shape
    if spec.block_size is None:
        block = (1,)
    elif spec.block_size == "row":
        block = (out_features, 1)
    else:
        block = (out_features, -(-in_features // spec.block_size))
    global_ = None if spec.global_scale is None else () if spec.global_scale == "tensor" else (out_features, 1)
    got_global = None if scales.global_ is None else tuple(scales.global_.shape)
    if (tuple(scales.elements.shape), tuple(scales.block.shape), got_global) != (shape, block, global_):
        raise ValueError(f"weight_scales[{name!r}]: elements {tuple(scales.elements.shape)}, block scales "
                         f"{tuple(scales.block.shape)}, global {got_global}; the weight {shape} with block_size "
                         f"{spec.block_size!r} and global_scale {spec.global_scale!r} needs {shape}, {block}, "
                         f"{global_}")


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


def _tensor_entry(tensor: torch.Tensor) -> dict[str, Any]:
    return {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape)}


def _versions() -> dict[str, str]:
    try:
        lowbit = importlib.metadata.version("lowbit-lab")
    except importlib.metadata.PackageNotFoundError:  # running from a clone that was not pip-installed
        lowbit = "unknown"
    return {"lowbit-lab": lowbit, "torch": torch.__version__,
            "transformers": importlib.metadata.version("transformers")}


# --------------------------------------------------------------------------------------------- loading
def load_quantized_checkpoint(path: str | os.PathLike[str]) -> tuple[nn.Module, QuantizationHandle]:
    """Rebuild the model saved by :func:`save_quantized_checkpoint`: ``(model, handle)``.

    The model is ``AutoModelForCausalLM.from_config(config, dtype=float32)`` in eval mode, with every stored
    tensor loaded (upcast to float32 where the source had another float dtype) and each selected weight rebuilt
    by :func:`dequantize_weight`; for a float32 source it is ``torch.equal`` to what
    :func:`common.quantizers.apply_quantization` gives with the same recipe (for another dtype: to what it gives on the
    float32 copy). ``handle`` holds the activation hooks re-attached from the recipe (none without activation
    quantization); ``handle.remove()`` removes them, the weights stay quantized.
    """
    import transformers  # here, not at the top: the numerical cells import this module and never load a model

    folder = Path(path)
    meta = read_quantization_config(folder)
    recipe = QuantRecipe.from_dict(meta["recipe"])
    names = meta["modules"]
    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    if hasattr(config, "quantization_config"):  # the model is rebuilt here, not by transformers' quantizer
        del config.quantization_config
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_file(str(folder / WEIGHTS_FILE))
    for name in names:
        stored = {suffix.removeprefix("."): tensors.pop(name + suffix)
                  for suffix in (".weight", *QUANT_SUFFIXES) if name + suffix in tensors}
        tensors[f"{name}.weight"] = rebuild_weight(meta, name, stored, recipe)
    for key, source in meta["tied"].items():
        tensors[key] = tensors[source]
    model.load_state_dict(tensors, strict=True)
    model.eval()
    return model, quantize_(model, recipe, names=names, weights=False)


def rebuild_weight(meta: Mapping[str, Any], name: str, stored: Mapping[str, torch.Tensor],
                   recipe: QuantRecipe) -> torch.Tensor:
    """The float32 weight of selected module ``name`` from its stored tensors ``{suffix: tensor}`` (suffixes
    without the dot: ``qcodes``, ``qscales``, ``qglobal``, ``qweight``, ``weight``) and the checkpoint record
    ``meta``: :func:`dequantize_weight` of the codes; else the kept weight (``qweight`` from version 3, ``weight``
    before) in float32. ValueError naming the module when a tensor it needs is missing."""
    needed = ("qcodes", "qscales") if meta["stored_quantized"] else ("qweight",) if meta["format_version"] >= 3 \
        else ("weight",)
    missing = [suffix for suffix in needed if suffix not in stored]
    if missing:
        raise ValueError(f"quantized module {name!r} has no stored {missing[0]!r} tensor")
    if not meta["stored_quantized"]:
        return stored[needed[0]].float()
    return dequantize_weight(stored["qcodes"], stored["qscales"], stored.get("qglobal"), recipe.weights,
                             meta["weights"][name]["shape"][-1], per_byte=stored_codes_per_byte(meta))


def stored_tensor_specs(meta: Mapping[str, Any]) -> dict[str, dict[str, tuple[tuple[int, ...], torch.dtype]]]:
    """``{module: {suffix: (shape, dtype)}}`` of the tensors a version-3 checkpoint stores for each selected module
    (its ``"tensors"`` record), for loaders that must allocate them before reading."""
    if meta["format_version"] < 3:
        raise ValueError(f"a version-{meta['format_version']} checkpoint records no stored tensors; load it with "
                         "common.ptq.load_quantized_checkpoint")
    return {name: {suffix: (tuple(entry["shape"]), getattr(torch, entry["dtype"])) for suffix, entry in specs.items()}
            for name, specs in meta["tensors"].items()}


def check_record(meta: Mapping[str, Any], where: str) -> None:
    """ValueError naming ``where`` unless ``meta`` is a checkpoint record of a format and version this reader reads."""
    if meta.get("format") != CHECKPOINT_FORMAT or meta.get("format_version") not in READABLE_VERSIONS:
        raise ValueError(f"{where}: unsupported format {meta.get('format')!r} version {meta.get('format_version')!r}; "
                         f"this reader: {CHECKPOINT_FORMAT} versions {', '.join(map(str, READABLE_VERSIONS))}")


def read_quantization_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``quantization_config.json`` of a quantized checkpoint; ValueError naming a folder that is not one."""
    folder = Path(path)
    if not (folder / QUANT_CONFIG_FILE).is_file() or not (folder / WEIGHTS_FILE).is_file():
        raise ValueError(f"{str(folder)!r} is not a quantized checkpoint (needs {QUANT_CONFIG_FILE} and "
                         f"{WEIGHTS_FILE})")
    meta = read_json(folder / QUANT_CONFIG_FILE)
    check_record(meta, repr(str(folder / QUANT_CONFIG_FILE)))
    return meta


def stored_codes_per_byte(meta: dict[str, Any]) -> int:
    """Codes per byte of the ``qcodes`` of a checkpoint with weights stored as codes, from its
    ``quantization_config.json`` (:func:`read_quantization_config`): version 2 records it; version 1 packed two per
    byte exactly when it says ``"packed"``."""
    if meta["format_version"] == 1:
        return 2 if meta["packing"]["packed"] else 1
    return int(meta["packing"]["codes_per_byte"])


register_checkpoint_kind(CheckpointKind(  # what common.models.load_checkpoint loads
    "quantized", "quantized", QUANT_CONFIG_FILE, read_quantization_config, load_quantized_checkpoint))


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
