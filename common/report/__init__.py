"""Report machinery shared by every paper: claims with computed verdicts, provenance, checksums, HTML/LaTeX."""

from .checksums import verify_sha256sums, write_sha256sums
from .claims import VERDICTS, Claim, checked_claim, verdict
from .context import assemble, figure_entries, rerun_entries
from .provenance import config_hash, git_state, provenance, training_seconds
from .render import build_pdf, data_uri, latex_escape, render_html, render_index, render_latex

__all__ = [
    "VERDICTS",
    "Claim",
    "assemble",
    "build_pdf",
    "checked_claim",
    "config_hash",
    "data_uri",
    "figure_entries",
    "git_state",
    "latex_escape",
    "provenance",
    "render_html",
    "render_index",
    "render_latex",
    "rerun_entries",
    "training_seconds",
    "verdict",
    "verify_sha256sums",
    "write_sha256sums",
]
