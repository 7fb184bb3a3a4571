"""Report machinery shared by every paper: claims as evidence (predictions, intervals, rule-made verdicts) and
implementation checks, provenance, checksums, HTML/LaTeX."""

from .checksums import verify_sha256sums, write_sha256sums
from .claims import (
    RULE,
    VERDICTS,
    Check,
    Claim,
    ClaimSpec,
    ImplementationCheckFailed,
    Prediction,
    claim_specs,
    claims_document,
    judge,
    verdict_counts,
)
from .context import assemble, figure_entries, rerun_entries
from .conventions import conventions_table
from .provenance import config_hash, git_state, provenance, training_seconds
from .render import build_pdf, data_uri, latex_escape, render_html, render_index, render_latex

__all__ = [
    "RULE",
    "VERDICTS",
    "Check",
    "Claim",
    "ClaimSpec",
    "ImplementationCheckFailed",
    "Prediction",
    "assemble",
    "build_pdf",
    "claim_specs",
    "claims_document",
    "config_hash",
    "conventions_table",
    "data_uri",
    "figure_entries",
    "git_state",
    "judge",
    "latex_escape",
    "provenance",
    "render_html",
    "render_index",
    "render_latex",
    "rerun_entries",
    "training_seconds",
    "verdict_counts",
    "verify_sha256sums",
    "write_sha256sums",
]
