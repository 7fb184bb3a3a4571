"""Assembling a report context (the dict :mod:`common.report.render` renders) from a paper's parts: figures
from their PNG paths and captions, how to rerun the report and example cells, the claims re-validated, and the
list of cited artifacts that ``SHA256SUMS`` covers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .claims import Claim


def figure_entries(pngs: Sequence[str], caption: Callable[[str], str]) -> list[dict[str, str]]:
    """``{"id", "caption", "png", "pdf"}`` per PNG (id = file stem; the PDF lies beside the PNG)."""
    return [{"id": Path(png).stem, "caption": caption(Path(png).stem), "png": png,
             "pdf": str(Path(png).with_suffix(".pdf"))} for png in pngs]


def rerun_entries(key: str, profile: str, examples: Sequence[str]) -> list[dict[str, str]]:
    """Commands that rebuild the report, each example cell alone, and verify the artifacts."""
    snake = f"snakemake --profile workflow/profiles/{profile}"
    entries = [{"cell": "the whole report", "command": f"{snake} reports/{key}.html"}]
    entries += [{"cell": target.rsplit("/", 1)[-1], "command": f"{snake} {target}"} for target in examples]
    entries.append({"cell": "verify the artifacts", "command": f"sha256sum -c reports/{key}.SHA256SUMS"})
    return entries


def assemble(*, paper: Mapping[str, str], figures: Sequence[Mapping[str, str]], tables: Sequence[Mapping[str, Any]],
             claims: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any], rerun: Sequence[Mapping[str, str]],
             artifacts: Sequence[str]) -> dict[str, Any]:
    """The context; every claim row is re-validated (its verdict must be one of the computed verdicts) and every
    figure's PNG and PDF join the cited artifacts."""
    for claim in claims:
        Claim(**{**claim, "evidence": tuple(claim["evidence"])})
    cited = {*artifacts, *(f["png"] for f in figures), *(f["pdf"] for f in figures)}
    return {"paper": dict(paper), "figures": [dict(f) for f in figures], "tables": list(tables),
            "claims": list(claims), "provenance": dict(provenance), "rerun": list(rerun), "artifacts": sorted(cited)}
