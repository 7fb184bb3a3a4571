"""Report figures: their look, saving (PNG embedded in the HTML, PDF included by the LaTeX, written atomically with
byte-stable metadata: no timestamps or software versions, so the same data gives the same bytes), and captions.

Every paper has the same report tail: ``settings.FIGURES`` names the figure kinds, ``figures.PLOTS`` draws each
kind and ``figures.CAPTIONS`` describes it (:func:`check_figures` at import time: all three name the same kinds).
A figure's id (its file stem) is its kind, or ``<kind>-<detail>`` for a kind drawn once per scale, model, ...:
:func:`lookup_caption` gives ``"<detail>: <caption>"`` for it. Snakemake's report reads its captions from
``papers/<paper>/report/figure.rst``, a Jinja template that :func:`caption_template` generates from ``CAPTIONS``
(:func:`write_caption_template` writes it; a test checks that it is current), so a caption is written only once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import ModuleType

import matplotlib.pyplot as plt

from common.io import atomic_path


def save_figure(fig: plt.Figure, png: str | os.PathLike[str], pdf: str | os.PathLike[str], *, dpi: int = 150) -> None:
    """Write ``fig`` to ``png`` and ``pdf`` atomically and close it."""
    for path, metadata in ((png, {"Software": None}), (pdf, {"CreationDate": None, "Producer": None})):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=os.fspath(path).rsplit(".", 1)[-1], dpi=dpi, bbox_inches="tight",
                        metadata=metadata)
    plt.close(fig)


def set_report_theme() -> None:
    """The look of every report figure: seaborn's ``whitegrid`` style at ``paper`` scale."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")


def figure_kind(kinds: Collection[str], figure_id: str) -> str:
    """The kind of figure ``figure_id``: the longest of ``kinds`` that it equals or that it starts with followed by
    ``-`` (``spectra-winq`` is its own kind when both ``spectra`` and ``spectra-winq`` are kinds); ValueError naming
    an id of no kind and the valid kinds."""
    for kind in sorted(kinds, key=len, reverse=True):
        if figure_id == kind or figure_id.startswith(f"{kind}-"):
            return kind
    raise ValueError(f"unknown figure id {figure_id!r}; valid: {', '.join(kinds)} (each optionally -<detail>)")


def lookup_caption(captions: Mapping[str, str], figure_id: str) -> str:
    """The caption of figure ``figure_id`` (a file stem): ``captions[kind]`` for an id that is a kind,
    ``"<detail>: " + captions[kind]`` for ``<kind>-<detail>`` (:func:`figure_kind`; ValueError naming an id of no
    kind)."""
    kind = figure_kind(captions, figure_id)
    detail = figure_id[len(kind) + 1:]
    return f"{detail}: {captions[kind]}" if detail else captions[kind]


def check_figures(module: str, figures: Collection[str], plots: Mapping[str, Callable[..., plt.Figure]],
                  captions: Mapping[str, str]) -> None:
    """A paper's figures module ``module`` draws and describes exactly the kinds ``settings.FIGURES`` names:
    RuntimeError naming each kind that ``plots`` or ``captions`` lacks or has beyond ``figures``."""
    problems = [f"{name} {verb} {', '.join(sorted(kinds))}"
                for name, table in (("PLOTS", plots), ("CAPTIONS", captions))
                for verb, kinds in (("lacks", set(figures) - set(table)), ("has unknown", set(table) - set(figures)))
                if kinds]
    if problems:
        raise RuntimeError(f"{module}: PLOTS and CAPTIONS must cover exactly settings.FIGURES "
                           f"({', '.join(figures)}): {'; '.join(problems)}")


RST_MARKUP = re.compile(r"([\\`*|_])")  # reStructuredText's inline markup characters, escaped in a caption
JINJA_MARKUP = ("{{", "{%", "{#")


def caption_template(module: str, captions: Mapping[str, str]) -> str:
    """Snakemake's caption file of every figure of the paper whose figures module is ``module``: a Jinja template
    (Snakemake renders it at report time) that takes the figure ids from the figure rule's ``png`` outputs (one job
    draws every figure of a report, and Snakemake renders a caption per job) and gives, as a reStructuredText
    definition list, each id with its :func:`lookup_caption` of ``captions``. ValueError naming a caption with Jinja
    markup."""
    lines = [f"{{# Generated from {module}.CAPTIONS by common.report.figures.write_caption_template: edit the "
             "captions there. #}",
             "{% for png in snakemake.output.png %}",
             '{% set figure = png.rpartition("/")[2].removesuffix(".png") %}']
    for i, kind in enumerate(sorted(captions, key=len, reverse=True)):
        text = captions[kind]
        if any(markup in text for markup in JINJA_MARKUP):
            raise ValueError(f"{module}.CAPTIONS[{kind!r}] holds Jinja markup ({', '.join(JINJA_MARKUP)}): {text!r}")
        lines += [f'{{% {"elif" if i else "if"} figure == "{kind}" or figure.startswith("{kind}-") %}}',
                  "``{{ figure }}``",
                  f'    {{{{ figure[{len(kind) + 1}:] ~ ": " if figure != "{kind}" else "" }}}}'
                  + RST_MARKUP.sub(r"\\\1", text),
                  ""]
    return "\n".join([*lines, "{% endif %}", "{% endfor %}", ""])


def caption_template_path(figures: ModuleType) -> Path:
    """Where Snakemake reads the caption template of a paper's figures module: ``report/figure.rst`` beside it."""
    return Path(figures.__file__).parent / "report" / "figure.rst"


def write_caption_template(figures: ModuleType) -> Path:
    """Write the :func:`caption_template` of a paper's figures module (its ``CAPTIONS``) to
    :func:`caption_template_path`, and return that path."""
    path = caption_template_path(figures)
    with atomic_path(path) as tmp:
        tmp.write_text(caption_template(figures.__name__, figures.CAPTIONS))
    return path
