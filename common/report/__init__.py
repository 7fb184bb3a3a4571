"""Report machinery shared by every paper: claims with computed verdicts, provenance, checksums, HTML/LaTeX."""

from .checksums import verify_sha256sums, write_sha256sums
from .claims import VERDICTS, Claim, verdict
from .provenance import config_hash, git_state, provenance
from .render import build_pdf, data_uri, latex_escape, render_html, render_index, render_latex

__all__ = [
    "VERDICTS",
    "Claim",
    "build_pdf",
    "config_hash",
    "data_uri",
    "git_state",
    "latex_escape",
    "provenance",
    "render_html",
    "render_index",
    "render_latex",
    "verdict",
    "verify_sha256sums",
    "write_sha256sums",
]
