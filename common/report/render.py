"""Render a report context to one self-contained HTML file and to LaTeX (PDF with ``latexmk`` when installed).

HTML: figures are embedded as base64 PNG ``data:`` URIs, the style is inline, and no ``src``/``href`` points to
a network address, so the page renders offline. LaTeX: the same sections, figures included from their PDF
files (paths relative to the ``.tex`` file). Templates live in ``workflow/templates/``.

A context is a dict: ``paper`` (``key``, ``title``, ``citation``, ``question``, ``method``), ``figures``
(``id``, ``caption``, ``png``, ``pdf``), ``tables`` (``caption``, ``columns``, ``rows``), ``claims``
(:class:`common.report.claims.Claim`), ``provenance`` (:func:`common.report.provenance.provenance`) and
``rerun`` (``cell``, ``command``).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2

from common.io import atomic_path, write_text

TEMPLATES = Path(__file__).resolve().parents[2] / "workflow" / "templates"
_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def data_uri(png: str | os.PathLike[str]) -> str:
    """A ``data:image/png;base64,...`` URI of a PNG file (raises ValueError naming a missing file)."""
    path = Path(png)
    if not path.is_file():
        raise ValueError(f"figure {str(path)!r} does not exist")
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def latex_escape(text: Any) -> str:
    return re.sub(r"[&%$#_{}~^\\]", lambda m: _LATEX_SPECIAL[m.group()], str(text))


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["data_uri"] = data_uri
    env.filters["tex"] = latex_escape
    return env


def render_html(context: dict[str, Any], out: str | os.PathLike[str]) -> None:
    """Write the self-contained HTML report."""
    write_text(out, _environment(True).get_template("report.html.j2").render(**context))


def render_latex(context: dict[str, Any], out: str | os.PathLike[str]) -> None:
    """Write the LaTeX report; figure PDFs are referenced relative to ``out``'s folder."""
    base = Path(out).resolve().parent
    figures = [{**f, "pdf": os.path.relpath(Path(f["pdf"]).resolve(), base)} for f in context["figures"]]
    write_text(out, _environment(False).get_template("report.tex.j2").render(**{**context, "figures": figures}))


def build_pdf(tex: str | os.PathLike[str]) -> Path | None:
    """Compile ``tex`` with ``latexmk`` into the PDF beside it; None (with a notice) when latexmk is absent."""
    if shutil.which("latexmk") is None:
        print("notice: latexmk not installed, PDF skipped (apt-get install --no-install-recommends "
              "texlive-latex-base texlive-latex-recommended latexmk)")
        return None
    tex = Path(tex).resolve()
    build = tex.parent / f".latex-{tex.stem}"
    subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", f"-outdir={build}", tex.name],
                   cwd=tex.parent, check=True, capture_output=True, timeout=600)
    with atomic_path(tex.with_suffix(".pdf")) as tmp:
        shutil.copyfile(build / f"{tex.stem}.pdf", tmp)
    shutil.rmtree(build, ignore_errors=True)
    return tex.with_suffix(".pdf")


def render_index(reports: list[dict[str, str]], out: str | os.PathLike[str]) -> None:
    """``reports/index.html`` linking every report that exists (``title``, ``href`` relative, ``summary``)."""
    write_text(out, _environment(True).get_template("index.html.j2").render(reports=reports))
