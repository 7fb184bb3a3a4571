"""One loader for every checkpoint folder (:func:`load_checkpoint`): a float Hugging Face checkpoint, or a kind
registered by the package that writes it.

Kinds. A :class:`CheckpointKind` names a marker file; a folder that holds it is of that kind, a folder that holds
none is a float checkpoint (kind None). The kind's ``read_record`` reads (and checks) its record of the folder, its
``load`` rebuilds the model with whatever the kind attaches::

    kind         written and registered by   marker                      record                     attached
    quantized    common.ptq.checkpoint       quantization_config.json    the quantization config    input hooks
    lowbit_qat   common.qat.lowbit_io        lowbit_scales.safetensors   the run's ``qat`` record   ParetoQ quantizers

Registration. The package that writes a kind registers it when it is imported (:func:`register_checkpoint_kind`),
and a caller that loads that kind imports the writer first (``import common.ptq``, ``import common.qat.lowbit_io``):
this loader sits below the packages whose folders it loads and imports none of them. :data:`CHECKPOINT_MARKERS`,
data, names each known kind's marker file (the writers take their file names from it) and the package that
registers it, so that a folder of a known kind whose writer was not imported is refused with that name instead of
being loaded as a float checkpoint (which would silently drop its quantization). A new kind: a row here, and a
module that registers it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from common.registry import lookup

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class KindMarker:
    """A known checkpoint kind's ``marker`` file and the ``writer``, the package that registers the kind when it is
    imported (named in messages only: this module never imports it)."""

    marker: str
    writer: str


CHECKPOINT_MARKERS: dict[str, KindMarker] = {  # kind -> its marker file and writer (module docstring)
    "quantized": KindMarker("quantization_config.json", "common.ptq"),
    "lowbit_qat": KindMarker("lowbit_scales.safetensors", "common.qat.lowbit_io"),
}


@dataclass(frozen=True)
class CheckpointKind:
    """A kind of checkpoint folder (module docstring): ``name`` (its key), ``description`` (in messages: "a
    {description} checkpoint"), ``marker`` (the file that marks a folder of this kind), ``read_record(folder)``
    (the kind's record; ValueError naming what is missing) and ``load(folder) -> (model, handle)`` (float32, eval
    mode; ``handle``: what the kind attached)."""

    name: str
    description: str
    marker: str
    read_record: Callable[[Path], dict[str, Any]]
    load: Callable[[Path], tuple[nn.Module, Any]]


@dataclass
class LoadedCheckpoint:
    """What :func:`load_checkpoint` gives: the ``model`` (eval mode), its ``kind`` (None: a float checkpoint),
    ``record`` (the kind's record of the folder, None for a float checkpoint), ``handle`` (what the kind attached,
    None for a float checkpoint) and ``path``."""

    model: nn.Module
    kind: CheckpointKind | None
    record: dict[str, Any] | None
    handle: Any
    path: str

    def tokenizer(self) -> Any:
        """The tokenizer saved with the checkpoint (``AutoTokenizer``; local files only for a folder)."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.path, local_files_only=Path(self.path).is_dir())


_KINDS: dict[str, CheckpointKind] = {}  # filled by register_checkpoint_kind


def register_checkpoint_kind(kind: CheckpointKind) -> CheckpointKind:
    """Register ``kind`` (the package that writes it calls this on import; a module imported again replaces its
    entry); returns it. ValueError for a kind of :data:`CHECKPOINT_MARKERS` registered with another marker file."""
    known = CHECKPOINT_MARKERS.get(kind.name)
    if known is not None and known.marker != kind.marker:
        raise ValueError(f"checkpoint kind {kind.name!r} has the marker file {known.marker!r} "
                         f"(CHECKPOINT_MARKERS), not {kind.marker!r}")
    _KINDS[kind.name] = kind
    return kind


def checkpoint_kinds() -> dict[str, CheckpointKind]:
    """Every registered kind by name (sorted: the same order whichever writer was imported first)."""
    return dict(sorted(_KINDS.items()))


def registered_kind(name: str) -> CheckpointKind:
    """The registered kind ``name``; ValueError naming the package to import for a known kind that is not registered,
    or an unknown one and the known ones."""
    if name in _KINDS:
        return _KINDS[name]
    if name in CHECKPOINT_MARKERS:
        raise ValueError(f"checkpoint kind {name!r} is not registered: import {CHECKPOINT_MARKERS[name].writer}, "
                         "which writes it, before loading one")
    return lookup(dict(sorted({**CHECKPOINT_MARKERS, **_KINDS}.items())), name, "checkpoint kind")


def marked_kind(path: PathLike) -> str | None:
    """The name of the kind whose marker file the folder ``path`` holds (a kind of :data:`CHECKPOINT_MARKERS` or a
    registered one), None for a float checkpoint (or a path that is not a folder); ValueError for a folder with the
    markers of two kinds."""
    folder = Path(path)
    markers = {name: known.marker for name, known in CHECKPOINT_MARKERS.items()}
    markers.update({name: kind.marker for name, kind in _KINDS.items()})
    found = sorted(name for name, marker in markers.items() if (folder / marker).is_file())
    if len(found) > 1:
        raise ValueError(f"{str(folder)!r} holds the marker files of {len(found)} checkpoint kinds: "
                         f"{', '.join(f'{markers[name]} ({name})' for name in found)}")
    return found[0] if found else None


def checkpoint_kind(path: PathLike) -> CheckpointKind | None:
    """The registered kind of the folder ``path`` (:func:`marked_kind`), None for a float checkpoint; ValueError for
    a folder with the markers of two kinds, or of a known kind whose writer was not imported
    (:func:`registered_kind` names it)."""
    name = marked_kind(path)
    return None if name is None else registered_kind(name)


def checkpoint_record(path: PathLike, kind: str) -> dict[str, Any]:
    """The record of the folder ``path`` as a checkpoint of kind ``kind``, read without loading the model;
    ValueError from the kind's reader when the folder is not one."""
    return registered_kind(kind).read_record(Path(path))


def load_float_model(path_or_id: PathLike, *, allow_hub: bool = False, dtype: torch.dtype = torch.float32
                     ) -> nn.Module:
    """The weights as stored, as a plain ``transformers`` causal LM in eval mode (a float checkpoint; the latent
    weights of a low-bit QAT run): ``AutoModelForCausalLM.from_pretrained`` from a local folder, or a hub id when
    ``allow_hub`` (needs network). ValueError for a path that is no folder without ``allow_hub``."""
    from transformers import AutoModelForCausalLM

    local = Path(path_or_id).is_dir()
    if not local and not allow_hub:
        raise ValueError(f"no checkpoint folder at {str(path_or_id)!r} (pass allow_hub=True for a hub id)")
    return AutoModelForCausalLM.from_pretrained(str(path_or_id), dtype=dtype, local_files_only=local).eval()


def load_checkpoint(path_or_id: PathLike, *, kind: str | None = None, allow_hub: bool = False,
                    dtype: torch.dtype = torch.float32) -> LoadedCheckpoint:
    """Load any checkpoint: the folder's own kind (:func:`checkpoint_kind`), or the kind named ``kind`` (the kind's
    ValueError when the folder is not one). A registered kind loads through its ``load`` in float32 (a quantized
    checkpoint rebuilt to exactly its fake-quantized values with its input hooks; a low-bit QAT run with its
    quantizers and learned scales); a float checkpoint through :func:`load_float_model` in ``dtype`` (a hub id when
    ``allow_hub``)."""
    found = registered_kind(kind) if kind is not None else checkpoint_kind(path_or_id)
    if found is None:
        return LoadedCheckpoint(load_float_model(path_or_id, allow_hub=allow_hub, dtype=dtype), None, None, None,
                                str(path_or_id))
    folder = Path(path_or_id)
    record = found.read_record(folder)
    model, handle = found.load(folder)
    return LoadedCheckpoint(model.eval(), found, record, handle, str(folder))
