"""External checkpoints named in config: a local Hugging Face folder (``{"path": DIR}``) or a hub model id
(``{"hub": "meta-llama/Llama-3.1-8B", "revision": "main"}``), linked into ``results/.../models/external/<name>``.

:func:`link_external_model` makes that folder hold one symbolic link per file of the checkpoint (config, weights,
tokenizer), so that every rule reads any model the same way and nothing is copied: an 8B checkpoint stays where it
is (its folder, or the Hugging Face cache). A hub id resolves through ``huggingface_hub.snapshot_download``: from
the cache alone when ``HF_HUB_OFFLINE=1`` (what the Makefile and CI set), downloading the missing files otherwise.
Only the files a causal LM needs are fetched (:data:`MODEL_FILES`: JSON configs, safetensors weights, tokenizer
files; no ``.bin``/``.pth`` copies of the same weights).

:func:`missing_hub_sources` says, without loading anything, which hub models and datasets a plan needs that this
machine cannot reach (offline and not in the cache), with the command that fetches each: the ``paper`` profile
checks it before any work.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from common.io import atomic_dir

SOURCE_KINDS = ("path", "hub")
MODEL_FILES = ("*.json", "*.safetensors", "tokenizer.model", "*.tiktoken", "*.txt")


def _check_source(source: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """``(kind, where, revision)`` of an external-model source; ValueError naming a bad one."""
    if not isinstance(source, Mapping):
        raise ValueError(f"an external model source must be a mapping, got {source!r}")
    kinds = [kind for kind in SOURCE_KINDS if kind in source]
    unknown = sorted(set(source) - {*SOURCE_KINDS, "revision"})
    if len(kinds) != 1 or unknown or not isinstance(source[kinds[0]], str) or not source[kinds[0]]:
        raise ValueError(f"an external model source needs exactly one of {', '.join(SOURCE_KINDS)} (a non-empty "
                         f"string) and optionally 'revision', got {dict(source)!r}")
    if kinds[0] == "path" and "revision" in source:
        raise ValueError(f"'revision' applies to a hub model, not a local path: {dict(source)!r}")
    return kinds[0], source[kinds[0]], source.get("revision")


def offline() -> bool:
    """Whether the Hugging Face hub is off limits (``HF_HUB_OFFLINE`` set to 1/true/yes/on)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def fetch_command(kind: str, name: str, configuration: str | None = None) -> str:
    """The command that puts hub ``kind`` ``name`` into the Hugging Face cache: ``hf download`` for a ``"model"``;
    for a ``"dataset"`` (its ``configuration``), the ``datasets`` load that fills the cache an offline load reads
    (only the configuration's files: FineWeb's ``sample-10BT`` rather than all of FineWeb)."""
    if kind == "model":
        return f"hf download {name}"
    arguments = ", ".join(repr(a) for a in (name, configuration) if a is not None)
    return f"python -c \"import datasets; datasets.load_dataset({arguments})\""


def resolve_external_model(source: Mapping[str, Any]) -> Path:
    """The checkpoint folder of ``source``: a local ``path`` as it is (it must hold a ``config.json``), a ``hub`` id's
    snapshot in the Hugging Face cache (fetched first unless offline). ValueError naming what is missing and how to
    fetch it."""
    kind, where, revision = _check_source(source)
    if kind == "path":
        folder = Path(where).expanduser()
        if not (folder / "config.json").is_file():
            raise ValueError(f"external model path {where!r} is not a Hugging Face checkpoint folder (no config.json)")
        return folder
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(where, revision=revision, allow_patterns=list(MODEL_FILES),
                                        local_files_only=offline()))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as err:
        how = "offline (HF_HUB_OFFLINE=1) and not in the Hugging Face cache" if offline() else str(err).splitlines()[0]
        raise ValueError(f"hub model {where!r} is unavailable: {how}; fetch it with `{fetch_command('model', where)}` "
                         "(and accept its licence on the hub first where it is gated)") from None
    if not (folder / "config.json").is_file():
        raise ValueError(f"hub model {where!r} has no config.json in its snapshot {str(folder)!r}")
    return folder


def link_external_model(source: Mapping[str, Any], out: str | os.PathLike[str]) -> Path:
    """Make ``out`` a folder of symbolic links to every file of the checkpoint of ``source``
    (:func:`resolve_external_model`; links point at absolute, resolved paths), atomically; returns ``out``. Hidden
    files and folders are not linked: they are bookkeeping, not the checkpoint (Snakemake's ``.snakemake_timestamp``
    in a folder it built, which it touches again in ``out``, through a link into the source; ``.cache``, ``.git``)."""
    folder = resolve_external_model(source).resolve()
    with atomic_dir(out) as tmp:
        for path in sorted(folder.rglob("*")):
            hidden = any(part.startswith(".") for part in path.relative_to(folder).parts)
            if path.is_file() and not hidden:
                link = tmp / path.relative_to(folder)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(path.resolve())
    return Path(out)


def missing_hub_sources(models: Iterable[Mapping[str, Any]] = (),
                        datasets: Iterable[tuple[str, str | None]] = ()) -> list[str]:
    """One line per hub model source (``{"hub": id}``; local paths are checked for ``config.json``) and per
    ``(dataset, configuration)`` that this machine cannot reach: offline and not in the cache. Online, only local
    paths can be missing (the hub is reachable, gated models aside). Each line names the source and the command
    that fetches it."""
    missing = []
    for source in models:
        kind, where, revision = _check_source(source)
        if kind == "path":
            if not Path(where, "config.json").expanduser().is_file():
                missing.append(f"external model path {where!r}: no config.json there")
            continue
        if offline():
            from huggingface_hub import try_to_load_from_cache

            if not isinstance(try_to_load_from_cache(where, "config.json", revision=revision), str):
                missing.append(f"hub model {where!r}: not in the Hugging Face cache; `{fetch_command('model', where)}`")
    for name, configuration in datasets:
        if offline() and not _dataset_cached(name, configuration):
            missing.append(f"hub dataset {name!r}{f' ({configuration})' if configuration else ''}: not in the "
                           f"Hugging Face cache; `{fetch_command('dataset', name, configuration)}`")
    return missing


def _dataset_cached(name: str, configuration: str | None) -> bool:
    """Whether ``datasets`` can build ``name`` (``configuration``) from its cache alone."""
    import datasets

    try:
        datasets.load_dataset_builder(name, configuration)
    except (OSError, ValueError, datasets.exceptions.DatasetNotFoundError):
        return False
    return True
