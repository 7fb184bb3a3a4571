"""Which ``nn.Linear`` modules of a causal LM to quantize: ``select_linears``; ``linear_modules`` resolves the names.
Below both ``common.ptq`` and ``common.qat``, which both select layers this way.

Names are the dotted module names of ``model.named_modules()`` (``model.layers.7.mlp.up_proj``). The transformer
block of a module is the number matched by :data:`BLOCK_INDEX` (``\\.layers\\.(\\d+)\\.``); the depth is the model
config's ``num_hidden_layers`` (of its text config for multimodal models), else one more than the largest block
index found among the module names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from torch import nn

DEFAULT_INCLUDE = r"mlp\.(gate_proj|up_proj|down_proj)$"
BLOCK_INDEX = re.compile(r"\.layers\.(\d+)\.")


def block_index(name: str) -> int | None:
    """The transformer block of module ``name`` (``model.layers.7.mlp.up_proj`` -> 7), None outside blocks."""
    match = BLOCK_INDEX.search(f".{name}.")
    return None if match is None else int(match.group(1))


def num_blocks(model: nn.Module) -> int:
    """Depth: ``config.num_hidden_layers`` (text config first), else 1 + the largest block index of a module."""
    config = getattr(model, "config", None)
    if config is not None:
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        depth = getattr(text_config, "num_hidden_layers", None)
        if isinstance(depth, int):
            return depth
    indices = [i for i in (block_index(name) for name, _ in model.named_modules()) if i is not None]
    return max(indices) + 1 if indices else 0


def select_linears(
    model: nn.Module,
    include: str = DEFAULT_INCLUDE,
    exclude: str | None = None,
    skip_first: int = 0,
    skip_last: int = 0,
    skip_proportion: tuple[float, float] | None = None,
) -> list[str]:
    """Names of the ``nn.Linear`` modules to quantize, in ``model.named_modules()`` order.

    A module is selected when it is an ``nn.Linear``, ``re.search(include, name)`` matches,
    ``re.search(exclude, name)`` does not, and its block index ``b`` (of ``n`` blocks) satisfies
    ``skip_first <= b < n - skip_last``; modules outside the blocks are not subject to skipping.
    ``skip_proportion=(first, last)`` gives the skips as fractions of the depth instead:
    ``skip_first = floor(first * n + 1/2)``, ``skip_last = floor(last * n + 1/2)`` (nearest, halves up), so
    ``(3/26, 2/26)`` skips the first 3 and last 2 of 26 blocks, and the first 1 and last 0 of 6 blocks.

    The embeddings (``model.get_input_embeddings()`` / ``get_output_embeddings()``, e.g. ``lm_head``) are never
    selected unless ``include`` matches them *and* contains their own (last) name literally, e.g.
    ``include=r"mlp\\.|lm_head$"``: a catch-all such as ``".*"`` leaves them alone.

    ValueError for an invalid pattern, bad skips, or a selection that matches nothing (naming the patterns).
    """
    include_re, exclude_re = _compile(include, "include"), None if exclude is None else _compile(exclude, "exclude")
    depth = num_blocks(model)
    first, last = _skips(skip_first, skip_last, skip_proportion, depth)
    embeddings = embedding_ids(model)
    selected = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear) or not include_re.search(name):
            continue
        if exclude_re is not None and exclude_re.search(name):
            continue
        if id(module) in embeddings and name.rsplit(".", 1)[-1] not in include:
            continue
        index = block_index(name)
        if index is not None and not first <= index < depth - last:
            continue
        selected.append(name)
    if not selected:
        raise ValueError(f"no nn.Linear module matches include={include!r}, exclude={exclude!r} with "
                         f"skip_first={first}, skip_last={last} of {depth} blocks")
    return selected


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise ValueError(f"{what} must be a regular expression string, got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ValueError(f"invalid {what} pattern {pattern!r}: {err}") from None


def _skips(skip_first: int, skip_last: int, skip_proportion: tuple[float, float] | None, depth: int) -> tuple[int, int]:
    """``(skip_first, skip_last)`` in blocks, from counts or from ``skip_proportion`` (see select_linears)."""
    if skip_proportion is None:
        for what, value in (("skip_first", skip_first), ("skip_last", skip_last)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{what} must be an integer >= 0, got {value!r}")
        return skip_first, skip_last
    if skip_first or skip_last:
        raise ValueError(f"give skip_proportion={skip_proportion!r} or skip_first/skip_last "
                         f"({skip_first}, {skip_last}), not both")
    try:
        fractions = [float(value) for value in skip_proportion]
    except (TypeError, ValueError):
        raise ValueError(f"skip_proportion must be a pair of fractions, got {skip_proportion!r}") from None
    if len(fractions) != 2 or not all(0.0 <= value <= 1.0 for value in fractions):
        raise ValueError(f"skip_proportion must be two fractions in [0, 1], got {skip_proportion!r}")
    first, last = (math.floor(value * depth + 0.5) for value in fractions)
    return first, last


def embedding_ids(model: nn.Module) -> set[int]:
    """``id`` of the input and output embedding modules, where the model exposes them."""
    ids = set()
    for getter in ("get_input_embeddings", "get_output_embeddings"):
        try:
            module = getattr(model, getter)()
        except (AttributeError, NotImplementedError):
            continue
        if module is not None:
            ids.add(id(module))
    return ids


def linear_modules(model: nn.Module, names: Sequence[str]) -> dict[str, nn.Linear]:
    """``{name: module}`` for ``names``; ValueError naming a name that is not an ``nn.Linear`` of ``model``."""
    if isinstance(names, str) or not names:
        raise ValueError(f"names must be a non-empty list of module names, got {names!r}")
    modules = dict(model.named_modules())
    for name in names:
        if not isinstance(modules.get(name), nn.Linear):
            found = "no such module" if name not in modules else type(modules[name]).__name__
            raise ValueError(f"module {name!r} is not an nn.Linear of the model ({found})")
    return {name: modules[name] for name in names}
