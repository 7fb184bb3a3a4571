"""Report machinery shared by every paper: claims as evidence (predictions, intervals, rule-made verdicts) and
implementation checks, the regime card and the setup table, provenance, checksums, HTML/LaTeX."""

from .checksums import verify_sha256sums, write_sha256sums
from .claims import (
    RULE,
    VERDICTS,
    Check,
    Claim,
    ClaimSpec,
    ClaimsResult,
    ImplementationCheckFailed,
    PaperClaims,
    Prediction,
    claim_specs,
    claims_document,
    judge,
    verdict_counts,
    write_claims,
)
from .context import assemble, figure_entries, rerun_entries
from .conventions import conventions_table
from .numbers import signed_percent
from .provenance import config_hash, git_state, provenance, training_seconds
from .regime import RegimeRow, RegimeSpec, regime_rows, regime_specs
from .render import build_pdf, data_uri, latex_escape, render_html, render_index, render_latex
from .setup import first_tokens, model_size, number_list, scored_corpus, setup_rows

__all__ = [
    "RULE",
    "VERDICTS",
    "Check",
    "Claim",
    "ClaimSpec",
    "ClaimsResult",
    "ImplementationCheckFailed",
    "PaperClaims",
    "Prediction",
    "RegimeRow",
    "RegimeSpec",
    "assemble",
    "build_pdf",
    "claim_specs",
    "claims_document",
    "config_hash",
    "conventions_table",
    "data_uri",
    "figure_entries",
    "first_tokens",
    "git_state",
    "judge",
    "latex_escape",
    "model_size",
    "number_list",
    "provenance",
    "regime_rows",
    "regime_specs",
    "render_html",
    "render_index",
    "render_latex",
    "rerun_entries",
    "scored_corpus",
    "setup_rows",
    "signed_percent",
    "training_seconds",
    "verdict_counts",
    "verify_sha256sums",
    "write_claims",
    "write_sha256sums",
]
