"""``python -m common.report render|pdf|index``: the shared report steps every paper's pipeline ends with.

* ``render``: a paper's context JSON -> ``reports/<paper>.html`` (self-contained), ``reports/<paper>.tex`` and
  ``reports/<paper>.SHA256SUMS`` over every artifact the context cites, the context itself, the HTML and the
  LaTeX (paths relative to the repository root, verifiable with ``sha256sum -c``).
* ``pdf``: ``latexmk`` on a report's ``.tex`` (a clear error naming the missing tool when latexmk is absent).
* ``index``: ``reports/index.html`` linking the given reports, each with its claims per verdict (reproduced,
  contradicted, inconclusive, and not testable at this scale apart) and its implementation checks passed.

``--notice`` (render, index): the profile's notice (the workflow config's ``report_notice``, e.g. the stand-in
profile's "every model is a link to the smoke model"), shown above everything else on the page.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from common.cli import run_step
from common.config import SHORT_PATHS_PROFILE
from common.io import read_json

from .checksums import write_sha256sums
from .render import build_pdf, render_html, render_index, render_latex
from .summary import claims_row

CONTEXT_KEYS = ("paper", "figures", "tables", "claims", "checks", "counts", "coverage", "rule", "provenance", "rerun",
                "artifacts")


def render(args: argparse.Namespace) -> None:
    context = read_json(args.context)
    for key in CONTEXT_KEYS:
        if key not in context:
            raise ValueError(f"context {args.context!r} has no {key!r}")
    context["notice"] = args.notice
    render_html(context, args.html)
    render_latex(context, args.tex)
    write_sha256sums(args.sums, [*context["artifacts"], args.context, args.html, args.tex])


def pdf(args: argparse.Namespace) -> None:
    if shutil.which("latexmk") is None:
        raise ValueError("latexmk is not installed: apt-get install --no-install-recommends texlive-latex-base "
                         "texlive-latex-recommended latexmk (or build the HTML report only)")
    build_pdf(args.tex)


def profile_indexes(out: str | os.PathLike[str], profile: str) -> list[dict[str, str]]:
    """The index pages of the other profiles already built beside ``out``, the index of ``profile`` (the layout of
    :func:`common.config.profile_dirs`: the default profile's ``reports/index.html``, every other's
    ``reports/<profile>/index.html``): ``[{"profile", "href"}]``, the default first, then by name, ``href`` relative
    to ``out``'s folder. Found on disk when the index is rendered: a navigation aid, no input of the build."""
    out_dir = Path(out).resolve().parent
    root = out_dir if profile == SHORT_PATHS_PROFILE else out_dir.parent
    pages = [(SHORT_PATHS_PROFILE, root / "index.html")] if profile != SHORT_PATHS_PROFILE else []
    pages += [(page.parent.name, page) for page in sorted(root.glob("*/index.html")) if page.parent.name != profile]
    return [{"profile": name, "href": os.path.relpath(page, out_dir)} for name, page in pages if page.is_file()]


def index(args: argparse.Namespace) -> None:
    if len(args.contexts) != len(args.reports):
        raise ValueError(f"--contexts and --reports must pair up: {len(args.contexts)} contexts, "
                         f"{len(args.reports)} reports")
    out_dir = Path(args.out).resolve().parent
    reports = []
    for context_path, html in zip(args.contexts, args.reports, strict=True):
        context = read_json(context_path)
        row = claims_row(context, context_path)
        reports.append({"title": context["paper"]["title"],
                        "href": os.path.relpath(Path(html).resolve(), out_dir),
                        "counts": row["counts"], "tested": row["tested"], "listed": row["listed"],
                        "findings": row["findings"],
                        "outside_regime": sum(bool(c.get("outside_regime")) for c in context["claims"]
                                              if c["kind"] == "paper"),
                        "checks": f"{row['checks_passed']} of {row['checks']}"})
    render_index(reports, args.out, args.profile, profile_indexes(args.out, args.profile), notice=args.notice)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m common.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("render", help="HTML, LaTeX and SHA256SUMS of one report")
    p.add_argument("--context", required=True)
    p.add_argument("--html", required=True)
    p.add_argument("--tex", required=True)
    p.add_argument("--sums", required=True)
    p.add_argument("--notice", help="the profile's notice (workflow config report_notice), above everything")
    p.set_defaults(run=render)
    p = sub.add_parser("pdf", help="compile a report's LaTeX with latexmk")
    p.add_argument("--tex", required=True)
    p.set_defaults(run=pdf)
    p = sub.add_parser("index", help="reports/index.html (reports/<profile>/index.html)")
    p.add_argument("--contexts", nargs="*", default=[])
    p.add_argument("--reports", nargs="*", default=[])
    p.add_argument("--profile", default=SHORT_PATHS_PROFILE, help="the profile whose reports these are")
    p.add_argument("--notice", help="the profile's notice (workflow config report_notice), above everything")
    p.add_argument("--out", required=True)
    p.set_defaults(run=index)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
