"""Export a quantized checkpoint (:mod:`common.ptq.checkpoint`) in compressed-tensors' layout, which transformers
(with ``compressed-tensors`` installed) and vLLM load: ``python -m common.ptq export --model Q_DIR --format
compressed-tensors --out DIR``.

Which recipes go where:

* **NVFP4** (E2M1 elements, UE4M3 scales, blocks of 16, a per-tensor global scale or none; any scale rule, so
  NVFP4 with 4/6, brute-force or prevent-zero scales too) -> ``nvfp4-pack-quantized`` with the ``NVFP4A16``
  weight scheme (``tensor_group``, group 16, FP8 E4M3 scales);
* **MXFP4** (E2M1 elements, E8M0 scales, blocks of 32, no global scale) -> ``mxfp4-pack-quantized`` with the
  ``MXFP4A16`` weight scheme (``group``, group 32, uint8 biased-exponent scales);
* everything else (HiF8, UE5M3 or FP32 scales, per-row global scales, other block sizes, ParetoQ codes) has no
  compressed-tensors format and stays in our own (:func:`common.ptq.load_quantized_checkpoint`, or
  ``from_pretrained`` after ``import common.ptq.hf``). So does activation quantization: compressed-tensors' NVFP4 input
  scheme needs a calibrated static input global scale and its MX input rule is not ours, so a recipe that
  quantizes activations is exported only with ``weights_only=True`` (``--weights-only``), the inputs then left
  in full precision, as the output's scheme says.

Tensors per selected module ``<name>``: ``weight_packed`` is our packed E2M1 nibbles as stored (the codes are the
standard E2M1 codes, the sign in bit 3, two per byte, the even column in the low nibble; compressed-tensors packs
the same way); ``weight_scale`` our block scales (UE4M3 values as ``float8_e4m3fn``, exact; E8M0 codes as they
are, ``2^(code - 127)``); NVFP4's ``weight_global_scale`` (shape ``(1,)``) is ``1 / g`` in float32, because
compressed-tensors divides by its global scale where we multiply by ``g`` (``1.0`` when the recipe has none).

Dequantized weights: compressed-tensors decompresses to bfloat16: ``bf16(q * (s / G))`` with ``G = fl(1 / g)``,
where we form ``(q * s) * g`` in float32 (:func:`common.ptq.checkpoint.dequantize_weight`). Codes and scales are the
same bits, so MXFP4 and NVFP4 without a global scale (``q * s`` has at most 6 significant bits, exact in bfloat16)
decompress to our weights bit for bit; with a global scale, to our weights rounded to bfloat16 (the float32 values
of the two orders differ by an ulp or two, which bfloat16 rounding absorbs except at a rounding tie, none in the
tests).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from common.data.tokenizer import TOKENIZER_FILES
from common.formats import decode
from common.io import atomic_dir, read_json
from common.recipes import QuantRecipe, QuantSpec

from .checkpoint import WEIGHTS_FILE, read_quantization_config, stored_codes_per_byte

FORMATS = ("compressed-tensors",)
COPIED_FILES = ("generation_config.json", *TOKENIZER_FILES)


def compressed_tensors_format(spec: QuantSpec) -> str:
    """``"nvfp4-pack-quantized"`` or ``"mxfp4-pack-quantized"`` for a weight spec that has one (module docstring);
    ValueError naming what does not fit otherwise."""
    geometry = (spec.elem, spec.scale, spec.block_size, spec.axis)  # compressed-tensors blocks along in_features
    if geometry == ("e2m1", "ue4m3", 16, -1) and spec.global_scale in (None, "tensor"):
        return "nvfp4-pack-quantized"
    if geometry == ("e2m1", "e8m0", 32, -1) and spec.global_scale is None:
        return "mxfp4-pack-quantized"
    raise ValueError(f"weights {spec.elem}/{spec.scale} block {spec.block_size!r} global {spec.global_scale!r} axis "
                     f"{spec.axis} have no compressed-tensors format (NVFP4: e2m1/ue4m3 block 16 along axis -1, "
                     "global per tensor or none; MXFP4: e2m1/e8m0 block 32 along axis -1, no global); keep the "
                     "lowbit-lab checkpoint")


def compressed_tensors_config(fmt: str, modules: list[str]) -> dict[str, Any]:
    """The ``quantization_config`` of ``config.json``: compressed-tensors' own ``QuantizationConfig`` (the
    ``NVFP4A16``/``MXFP4A16`` preset targeting exactly ``modules``, status compressed) as its writer records it."""
    import compressed_tensors
    from compressed_tensors.quantization import QuantizationConfig, QuantizationStatus, preset_name_to_scheme

    preset = "NVFP4A16" if fmt == "nvfp4-pack-quantized" else "MXFP4A16"
    config = QuantizationConfig(config_groups={"group_0": preset_name_to_scheme(preset, list(modules))}, format=fmt,
                                quantization_status=QuantizationStatus.COMPRESSED)
    return {**json.loads(config.model_dump_json()), "version": compressed_tensors.__version__, "sparsity_config": {},
            "transform_config": {}}


def export_compressed_tensors(source: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                              weights_only: bool = False) -> Path:
    """Write the quantized checkpoint ``source`` in compressed-tensors' layout to ``out_dir`` (atomically; module
    docstring); returns its path. ValueError before anything is written for a recipe without a compressed-tensors
    format, activation quantization without ``weights_only``, or weights not stored as codes."""
    source = Path(source)
    meta = read_quantization_config(source)
    recipe = QuantRecipe.from_dict(meta["recipe"])
    if recipe.weights is None or not meta["stored_quantized"]:
        raise ValueError(f"{str(source)!r} stores no weight codes (recipe {recipe.name!r}): nothing to export")
    fmt = compressed_tensors_format(recipe.weights)
    if recipe.activations is not None and not weights_only:
        raise ValueError(f"recipe {recipe.name!r} quantizes activations, which compressed-tensors cannot express "
                         "as we do; pass weights_only=True (--weights-only) to export the weights alone")
    if stored_codes_per_byte(meta) != 2:
        raise ValueError(f"{str(source)!r} stores {stored_codes_per_byte(meta)} codes per byte, not nibbles")
    tensors = load_file(str(source / WEIGHTS_FILE))  # a tied tensor stays stored once, as save_pretrained does
    for name in meta["modules"]:
        in_features = meta["weights"][name]["shape"][-1]
        if in_features % recipe.weights.block_size:
            raise ValueError(f"module {name!r}: in_features {in_features} is not a multiple of the block size "
                             f"{recipe.weights.block_size} (compressed-tensors needs whole groups)")
        tensors.pop(f"{name}.weight")  # the guard
        qscales = tensors.pop(f"{name}.qscales")
        qglobal = tensors.pop(f"{name}.qglobal", None)
        tensors[f"{name}.weight_packed"] = tensors.pop(f"{name}.qcodes")
        if fmt == "nvfp4-pack-quantized":
            tensors[f"{name}.weight_scale"] = decode(qscales, recipe.weights.scale).to(torch.float8_e4m3fn)
            g = torch.ones(()) if qglobal is None else qglobal.float()
            tensors[f"{name}.weight_global_scale"] = (1.0 / g).reshape(1)
        else:
            tensors[f"{name}.weight_scale"] = qscales
    config = read_json(source / "config.json")
    config["quantization_config"] = compressed_tensors_config(fmt, meta["modules"])
    with atomic_dir(out_dir) as tmp:
        save_file({key: value.contiguous() for key, value in tensors.items()}, str(tmp / WEIGHTS_FILE),
                  metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for name in COPIED_FILES:
            if (source / name).is_file():
                shutil.copy2(source / name, tmp / name)
    return Path(out_dir)
