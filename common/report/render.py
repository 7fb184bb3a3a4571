"""Render a report context to one self-contained HTML file and to LaTeX (PDF with ``latexmk`` when installed).

HTML: figures are embedded as base64 PNG ``data:`` URIs, the style is inline, and no ``src``/``href`` points to
a network address, so the page renders offline. LaTeX: the same sections, figures included from their PDF
files (paths relative to the ``.tex`` file), typeset for reading (ragged-right table columns, claim rows that
never break over a page). Templates live in ``common/report/templates/`` (package data, in the wheel).

A context is a dict (:func:`common.report.context.assemble` makes it): ``paper`` (``key``, ``title``,
``citation``, ``question``, ``method``), ``figures`` (``id``, ``caption``, ``png``, ``pdf``), ``tables``
(``caption``, ``columns``, ``rows``), ``claims`` (the rows of the claims document,
:meth:`common.report.claims.Claim.to_dict`: ``group``, ``statement``, ``paper``, ``prediction`` with its
``text``, ``estimate``, ``estimate_text``, ``verdict``, ``detail``, ``reason``, ``evidence``), ``checks``
(:meth:`common.report.claims.Check.to_dict`), ``counts`` (rows per verdict), ``rule`` (the verdict rule),
``provenance`` (:func:`common.report.provenance.provenance`), ``rerun`` (``cell``, ``command``),
``artifacts``, and optionally ``notice`` (the profile's notice, plain text, shown under the title), ``setup`` (the
paper's setup beside ours: ``aspect``, ``paper``, ``ours`` per row, opening "Question and method"), ``regime`` (the
regime card, :meth:`common.report.regime.RegimeRow.to_dict`) and ``outside_regime`` (how many not-testable claims
are so because of it).

Inline math: prose (statements, predictions, details, captions, table cells, question and method) may hold math
between ``$...$`` in LaTeX notation, e.g. ``$\\sigma^2$``, ``$2^{-9}$``, ``$\\mathrm{MSE}(n)/\\mathrm{MSE}(2n)$``;
``\\$`` is a literal dollar. The LaTeX filter ``tex`` escapes everything outside the spans and keeps the math
verbatim; the HTML filter ``math`` escapes everything outside and converts the spans to HTML (entities,
``<sup>``, ``<sub>``, italic letters), so the page needs no MathJax. The HTML converter knows the commands in
:data:`MATH_SYMBOLS`, :data:`MATH_FUNCTIONS`, :data:`MATH_FONTS` and ``\\sqrt``, and refuses any other, naming it, so
that both renderers show the same formula. The ``numbers`` filter writes the numbers of a text as math
(``-1.2e-05`` -> ``$-1.2\\times10^{-5}$``: a true minus sign and a power of ten).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from common.io import atomic_path, write_text

from .claims import VERDICTS

TEMPLATES = Path(__file__).resolve().with_name("templates")
_LATEX_SPECIAL = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
                  "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}",
                  "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}

_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu",
          "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "Gamma", "Delta", "Theta",
          "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega")
MATH_SYMBOLS = {
    **{name: f"&{name};" for name in _GREEK},
    "le": "&le;", "leq": "&le;", "ge": "&ge;", "geq": "&ge;", "ne": "&ne;", "neq": "&ne;", "ll": "&#8810;",
    "gg": "&#8811;", "approx": "&asymp;", "sim": "&sim;", "propto": "&prop;", "times": "&times;",
    "cdot": "&middot;", "pm": "&plusmn;", "infty": "&infin;", "in": "&isin;", "to": "&rarr;",
    "rightarrow": "&rarr;", "ldots": "&hellip;", "cdots": "&middot;&middot;&middot;", "sum": "&sum;",
    "prod": "&prod;", "mid": "|", "lvert": "|", "rvert": "|", "quad": "&emsp;",
    ",": "&thinsp;", ";": "&ensp;", " ": " ", "!": "",
    **{char: str(escape(char)) for char in "{}%#&_$"},
}
"""Math commands the HTML converter knows, as HTML (``\\,``, ``\\;``, ``\\!``, ``\\{`` ... included)."""
MATH_FUNCTIONS = ("log", "ln", "exp", "max", "min", "arg", "sup", "inf", "lim", "det")
"""Operator names, set upright."""
MATH_FONTS = {"mathrm": "", "text": "", "operatorname": "", "mathit": "i", "mathbf": "b"}
"""One-argument font commands and their HTML tag (``\\sqrt{...}`` is known too, as ``&radic;(...)``)."""
_MATH_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\s+|.", re.DOTALL)
_DOLLAR = re.compile(r"(?<!\\)\$")
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?|inf)(?!\w|\.\w)")
_FULL_NUMBER = re.compile(r"-?(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?|inf)")
_CELL_BREAK = re.compile(r"(?<=[_/])|(?<=\.)(?=[A-Za-z])")  # besides spaces and hyphens: after _ / and a dot
_CELL_WORD = re.compile(r"\s+|(?<=-)|" + _CELL_BREAK.pattern)

TEXT_WIDTH_PT = 483.7
"""``\\linewidth`` of ``report.tex.j2`` (A4 with 2 cm margins), to choose how a data table is set."""
TABLE_COLSEP_PT = 4.0
"""``\\tabcolsep`` of the template's data tables."""
_TABLE_ATTEMPTS = (("\\small", 10.0, False), ("\\footnotesize", 9.0, False), ("\\footnotesize", 9.0, True),
                   ("\\scriptsize", 8.0, False), ("\\scriptsize", 8.0, True))
"""How a data table is tried, in order: (font size command in an 11pt article, its size in pt, wrap or not)."""


def data_uri(png: str | os.PathLike[str]) -> str:
    """A ``data:image/png;base64,...`` URI of a PNG file (raises ValueError naming a missing file)."""
    path = Path(png)
    if not path.is_file():
        raise ValueError(f"figure {str(path)!r} does not exist")
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def latex_escape(text: Any) -> str:
    """``text`` with every LaTeX special character escaped (no math: see :func:`latex_text`)."""
    return re.sub(r"[&%$#_{}~^\\<>|]", lambda m: _LATEX_SPECIAL[m.group()], str(text))


def latex_code(text: Any) -> str:
    """``text`` escaped for ``\\texttt``, with a line-break opportunity after every ``/`` and ``_`` (paths)."""
    return re.sub(r"(/|\\_)", r"\1\\allowbreak{}", latex_escape(text))


def latex_cell(text: Any) -> str:
    """A table cell for LaTeX: :func:`latex_text`, with line-break opportunities after ``_``, ``/`` and a dot
    before a letter outside math (identifiers such as ``layer0.mlp.down_proj`` wrap in a narrow column)."""
    return "".join(f"${part}$" if is_math else "\\allowbreak{}".join(map(latex_escape, _CELL_BREAK.split(part)))
                   for is_math, part in math_spans(text))


def math_spans(text: Any) -> list[tuple[bool, str]]:
    """``text`` as ``(is_math, part)`` pieces by the ``$...$`` convention; ``\\$`` outside math becomes ``$``.

    ValueError naming the text for an unmatched ``$`` or an empty ``$$``."""
    parts = _DOLLAR.split(str(text))
    if len(parts) % 2 == 0:
        raise ValueError(f"unmatched $ in {str(text)!r}: inline math is $...$, a literal dollar is \\$")
    if any(not part.strip() for part in parts[1::2]):
        raise ValueError(f"empty math $$ in {str(text)!r}")
    return [(True, part) if i % 2 else (False, part.replace("\\$", "$")) for i, part in enumerate(parts)]


def latex_text(text: Any) -> str:
    """Prose for LaTeX: escaped outside ``$...$``, the math kept verbatim (the ``tex`` filter)."""
    return "".join(f"${part}$" if is_math else latex_escape(part) for is_math, part in math_spans(text))


def html_text(text: Any) -> Markup:
    """Prose for HTML: escaped outside ``$...$``, the math converted by :func:`math_html` (the ``math`` filter)."""
    return Markup("".join(math_html(part) if is_math else str(escape(part)) for is_math, part in math_spans(text)))


def math_html(math: str) -> str:
    """One math span (without its ``$``) as HTML: ``<span class="math">``, letters in ``<i>``, ``^``/``_`` as
    ``<sup>``/``<sub>``, commands as entities. ValueError naming an unknown command or an unbalanced brace."""
    tokens = _MATH_TOKEN.findall(math)
    html = _math_sequence(tokens, 0, math, upright=False, closing=False)[0]
    return f'<span class="math">{html.replace("</i><i>", "")}</span>'


def _math_sequence(tokens: list[str], i: int, math: str, *, upright: bool, closing: bool) -> tuple[str, int]:
    out = []
    while i < len(tokens):
        if tokens[i] == "}":
            if closing:
                return "".join(out), i + 1
            raise ValueError(f"unbalanced }} in math ${math}$")
        piece, i = _math_atom(tokens, i, math, upright=upright)
        out.append(piece)
    if closing:
        raise ValueError(f"unbalanced {{ in math ${math}$")
    return "".join(out), i


def _math_argument(tokens: list[str], i: int, math: str, command: str, *, upright: bool) -> tuple[str, int]:
    while i < len(tokens) and tokens[i].isspace():
        i += 1
    if i == len(tokens) or tokens[i] == "}":
        raise ValueError(f"{command} without an argument in math ${math}$")
    return _math_atom(tokens, i, math, upright=upright)


def _math_atom(tokens: list[str], i: int, math: str, *, upright: bool) -> tuple[str, int]:
    token = tokens[i]
    if token == "{":
        return _math_sequence(tokens, i + 1, math, upright=upright, closing=True)
    if token in ("^", "_"):
        tag = "sup" if token == "^" else "sub"
        argument, i = _math_argument(tokens, i + 1, math, token, upright=upright)
        return f"<{tag}>{argument}</{tag}>", i
    if token.startswith("\\"):
        name = token[1:]
        if name == "sqrt":
            argument, i = _math_argument(tokens, i + 1, math, token, upright=upright)
            return f"&radic;({argument})", i
        if name in MATH_FONTS:
            argument, i = _math_argument(tokens, i + 1, math, token, upright=True)
            tag = MATH_FONTS[name]
            return (f"<{tag}>{argument}</{tag}>" if tag else argument), i
        if name in MATH_FUNCTIONS:
            return name, i + 1
        if name in MATH_SYMBOLS:
            return MATH_SYMBOLS[name], i + 1
        raise ValueError(f"unknown math command {token} in ${math}$ (known: the commands of "
                         "common.report.render.MATH_SYMBOLS, MATH_FUNCTIONS and MATH_FONTS, and \\sqrt)")
    if token.isascii() and token.isalpha():
        return (token if upright else f"<i>{token}</i>"), i + 1
    if token.isspace():
        return " ", i + 1
    return {"-": "&minus;", "'": "&prime;"}.get(token, str(escape(token))), i + 1


def math_numbers(text: Any) -> str:
    """``text`` with every number outside ``$...$`` written as math (the ``numbers`` filter): a true minus,
    ``1.2e-05`` as ``1.2\\times10^{-5}``, ``inf`` as ``\\infty``; numbers inside words (``b4``) and versions
    (``2.13.0``) are left."""
    return "".join(f"${part}$" if is_math else _NUMBER.sub(_number_math, part.replace("$", "\\$"))
                   for is_math, part in math_spans(text))


def _number_math(match: re.Match[str]) -> str:
    mantissa, _, exponent = match.group().replace("inf", "\\infty").partition("e")
    if exponent:
        power = f"10^{{{int(exponent)}}}"
        mantissa = {"1": power, "-1": f"-{power}"}.get(mantissa, f"{mantissa}\\times{power}")
    return f"${mantissa}$"


def table_layout(table: Mapping[str, Any]) -> dict[str, str]:
    """How the LaTeX report sets a data table: ``size`` (a font size command) and ``spec`` (longtable columns).

    Widths are estimated from the cells (:func:`_width_em`). Columns keep their natural width (``r`` for numbers,
    ``l`` otherwise) at the largest size at which the table fits :data:`TEXT_WIDTH_PT`. When it does not fit in
    ``\\footnotesize``, every column wider than a common cap is narrowed to the cap (:func:`_width_cap`) but
    never below its longest word (words break at spaces, hyphens and where :func:`latex_cell` allows), and wraps
    in a p-column (``P`` ragged right, ``R`` ragged left for numbers; the estimate's error is shared among
    them); then the same in ``\\scriptsize``. A table that fits nowhere is set in ``\\scriptsize`` at its
    narrowest (LaTeX then reports an overfull box) rather than failing the HTML report with it."""
    n = len(table["columns"])
    for number, row in enumerate(table["rows"], 1):
        if len(row) != n:
            raise ValueError(f"table {table.get('caption')!r}: row {number} has {len(row)} cells for {n} columns")
    columns = [[str(name), *(str(row[i]) for row in table["rows"])] for i, name in enumerate(table["columns"])]
    bold = [[1.15] + [1.0] * (len(cells) - 1) for cells in columns]  # the header row is bold
    natural = [max(k * _width_em(c) for k, c in zip(ks, cells, strict=True)) + 0.3
               for ks, cells in zip(bold, columns, strict=True)]
    least = [max(k * _width_em(w) for k, c in zip(ks, cells, strict=True) for w in _CELL_WORD.split(c)) + 0.3
             for ks, cells in zip(bold, columns, strict=True)]
    aligns = ["r" if len(cells) > 1 and all(_FULL_NUMBER.fullmatch(c) for c in cells[1:]) else "l"
              for cells in columns]
    for attempt in _TABLE_ATTEMPTS:  # the last one stays when none fits
        size, points, wrap = attempt
        room = (TEXT_WIDTH_PT - 2 * (n - 1) * TABLE_COLSEP_PT) / points
        cap = _width_cap(natural, least, room) if wrap else max(natural)
        widths = [min(nat, max(low, cap)) for nat, low in zip(natural, least, strict=True)]
        if sum(widths) <= room:
            break
    wrapped = [j for j in range(n) if widths[j] < natural[j]]
    slack = f"+(\\linewidth-{sum(widths):.1f}em-{2 * (n - 1)}\\tabcolsep)/{len(wrapped)}" if sum(widths) <= room else ""
    spec = [f"{'R' if aligns[j] == 'r' else 'P'}{{\\dimexpr{widths[j]:.1f}em{slack}\\relax}}" if j in wrapped
            else aligns[j] for j in range(n)]
    return {"size": size, "spec": "@{}" + "".join(spec) + "@{}"}


def _width_cap(natural: Sequence[float], least: Sequence[float], room: float) -> float:
    """The widest cap ``W`` (em) such that the columns, each narrowed to ``max(least, W)`` when wider, fit
    ``room`` (0 when even the least widths do not fit): the widest columns give up room first."""
    low, high = 0.0, max(natural)
    for _ in range(40):
        middle = (low + high) / 2
        fits = sum(min(nat, max(low_, middle)) for nat, low_ in zip(natural, least, strict=True)) <= room
        low, high = (middle, high) if fits else (low, middle)
    return low


def _width_em(text: str) -> float:
    """A generous estimate of ``text``'s width in em in Computer Modern (math markup dropped): digits are
    0.5 em, narrow punctuation and letters 0.28, capitals and m, w 0.8, other characters 0.5."""
    plain = re.sub(r"\\[A-Za-z]+|[${}]", "", text)
    return sum(0.28 if c in ".,:;!'|()[]il" else 0.8 if c.isupper() or c in "mw" else 0.5 for c in plain)


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=autoescape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["data_uri"] = data_uri
    env.filters["tex"] = latex_text
    env.filters["tex_code"] = latex_code
    env.filters["tex_cell"] = latex_cell
    env.filters["math"] = html_text
    env.filters["numbers"] = math_numbers
    return env


OPTIONAL_CONTEXT = {"notice": None, "setup": (), "regime": (), "outside_regime": 0}
"""The context keys a report may omit, with what their absence means."""


def render_html(context: dict[str, Any], out: str | os.PathLike[str]) -> None:
    """Write the self-contained HTML report (the keys of :data:`OPTIONAL_CONTEXT` may be missing)."""
    write_text(out, _environment(True).get_template("report.html.j2").render(**{**OPTIONAL_CONTEXT, **context}))


def render_latex(context: dict[str, Any], out: str | os.PathLike[str]) -> None:
    """Write the LaTeX report; figure PDFs are referenced relative to ``out``'s folder."""
    base = Path(out).resolve().parent
    figures = [{**f, "pdf": os.path.relpath(Path(f["pdf"]).resolve(), base)} for f in context["figures"]]
    tables = [{**t, "layout": table_layout(t)} for t in context["tables"]]
    write_text(out, _environment(False).get_template("report.tex.j2").render(
        **{**OPTIONAL_CONTEXT, **context, "figures": figures, "tables": tables}))


def overfull_boxes(log: str) -> list[str]:
    """The ``Overfull \\hbox``/``\\vbox`` warnings of a LaTeX log, one line each."""
    return [line for line in log.splitlines() if line.startswith(("Overfull \\hbox", "Overfull \\vbox"))]


def build_pdf(tex: str | os.PathLike[str], *, log: str | os.PathLike[str] | None = None) -> Path | None:
    """Compile ``tex`` with ``latexmk`` into the PDF beside it; None (with a notice) when latexmk is absent.

    ``log``: where to keep the LaTeX log (written atomically). A LaTeX error raises RuntimeError with the error
    lines and keeps the build folder (``.latex-<stem>`` beside ``tex``) for inspection; on success it is removed
    and the number of overfull boxes is printed."""
    if shutil.which("latexmk") is None:
        print("notice: latexmk not installed, PDF skipped (apt-get install --no-install-recommends "
              "texlive-latex-base texlive-latex-recommended latexmk)")
        return None
    tex = Path(tex).resolve()
    build = tex.parent / f".latex-{tex.stem}"
    result = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", f"-outdir={build}",
                             tex.name], cwd=tex.parent, capture_output=True, text=True, errors="replace", timeout=600)
    log_file = build / f"{tex.stem}.log"
    text = log_file.read_text(errors="replace") if log_file.is_file() else ""
    if result.returncode != 0:
        errors = [line for line in text.splitlines() if line.startswith(("!", "l."))] or \
            result.stderr.splitlines()[-5:]
        raise RuntimeError(f"LaTeX failed on {str(tex)!r}: {' '.join(errors)} (log: {log_file})")
    if log is not None:
        write_text(log, text)
    with atomic_path(tex.with_suffix(".pdf")) as tmp:
        shutil.copyfile(build / f"{tex.stem}.pdf", tmp)
    shutil.rmtree(build, ignore_errors=True)
    print(f"{tex.with_suffix('.pdf')}: {len(overfull_boxes(text))} overfull boxes")
    return tex.with_suffix(".pdf")


def render_index(reports: Sequence[Mapping[str, Any]], out: str | os.PathLike[str], profile: str = "default",
                 others: Sequence[Mapping[str, str]] = (), notice: str | None = None) -> None:
    """The index page of profile ``profile`` linking every report that exists: per report ``title``, ``href``
    (relative), ``counts`` (claims per verdict, :func:`common.report.claims.verdict_counts`), ``outside_regime`` (how
    many of the not-testable claims are so because a regime quantity is outside its bounds) and ``checks`` (how many
    implementation checks passed); ``others``: ``{"profile", "href"}`` of the other profiles' index pages built;
    ``notice``: the profile's notice, above the table."""
    page = _environment(True).get_template("index.html.j2").render(reports=reports, verdicts=VERDICTS,
                                                                    profile=profile, others=others, notice=notice)
    write_text(out, page)
