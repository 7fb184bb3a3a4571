"""``python -m common.report.summary``: the README's results table, one row per paper, computed from the claims
documents of one profile's built reports (never typed by hand).

A row reads ``<results>/<paper>/claims.json`` (:func:`common.report.claims.claims_document`): how many of the
paper's claims have each verdict (its paper rows only, each adding the verdict it is tallied under,
:attr:`common.report.claims.Claim.tallied`, as the reports and their index count them), how many of the claims its
coverage table lists are tested here, how many rows are our findings, the implementation checks passed of all (the
check rows judged on data and the checks run in code), and the commit the run was made at with that commit's date
(from ``<results>/<paper>/report/context.json``'s provenance when the report's context is built; otherwise the
claims file's modification date, which a clone does not keep). The paper's title comes from that context too (the
paper's key otherwise). With ``status`` (:func:`results_table`; ``python -m workflow.status --update README.md``
gives it from Snakemake's change detection) a last column says whether the paper's results are current; for a paper
whose claims are not built it reads :data:`UNDER_WAY` and the status of the results that are (a default build
published unfinished, ``make publish UNFINISHED=1``), or ``-`` when none is. The papers
are those with a pipeline, ``papers/*/rules.smk`` (as the Snakefile's ``PAPERS``); a paper whose claims are not built
in the profile gets a row that says so. ``<results>`` and the report links follow :func:`common.config.profile_dirs`.

    python -m common.report.summary [--root DIR] [--profile default]       # print the Markdown table
    python -m workflow.status --update README.md                           # the README's, with the status column

:func:`replace_table` replaces the lines between :data:`BEGIN` and :data:`END` of a file (both there, once).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common.cli import run_step
from common.config import SHORT_PATHS_PROFILE, profile_dirs
from common.io import read_json

from .claims import VERDICTS, verdict_counts
from .provenance import git_output

BEGIN = "<!-- results table: python -m workflow.status --update README.md -->"
END = "<!-- end of results table -->"
COLUMNS = ("paper", "reproduced", "contradicted", "inconclusive", "not testable", "paper's claims tested",
           "our findings", "checks passed", "claims made at")
STATUS = "results now"  # the status column: current, or how many results are stale (workflow.status)
NOT_BUILT = "not built"
UNDER_WAY = "build under way"  # the status of a paper without claims whose results are partly published


def paper_keys(root: str | os.PathLike[str] = ".") -> list[str]:
    """The papers with a pipeline under ``root``: the folders of ``papers/*/rules.smk``, sorted."""
    return sorted(path.parent.name for path in Path(root, "papers").glob("*/rules.smk"))


def claims_row(document: Mapping[str, Any], source: str = "claims document") -> dict[str, Any]:
    """``{"counts": {verdict: n}, "tested", "listed", "findings", "checks_passed", "checks"}`` of a claims document
    (``source`` names it in the ValueError for a missing key or an unknown verdict): ``counts`` the paper's tally
    (its paper rows' tallied verdicts), ``tested`` of ``listed`` the claims of its coverage table with rows here,
    ``findings`` our rows, and the checks (check rows reproduced, and checks run in code passed) of all."""
    for key in ("claims", "checks", "coverage"):
        if key not in document:
            raise ValueError(f"{source} has no {key!r}")
    try:
        verdict_counts(claim["verdict"] for claim in document["claims"])
        counts = verdict_counts(claim["tallied"] for claim in document["claims"]
                                if claim["kind"] == "paper" and claim["tallied"] is not None)
    except (KeyError, ValueError) as err:
        raise ValueError(f"{source}: {err}") from None
    data_checks = [claim for claim in document["claims"] if claim["kind"] == "check"]
    return {"counts": counts, "tested": sum(bool(entry["rows"]) for entry in document["coverage"]),
            "listed": len(document["coverage"]),
            "findings": sum(claim["kind"] == "finding" for claim in document["claims"]),
            "checks_passed": sum(bool(check["passed"]) for check in document["checks"])
            + sum(claim["verdict"] == VERDICTS[0] for claim in data_checks),
            "checks": len(document["checks"]) + len(data_checks)}


def run_label(claims_path: Path, context: Mapping[str, Any] | None, root: str | os.PathLike[str] = ".") -> str:
    """At which commit the claims were made, and when: the short commit of the context's provenance (``+ uncommitted
    changes`` when the tree was dirty) and the date of that commit in the repository at ``root``; without a commit,
    or one the repository lacks, the UTC date of ``claims_path``'s modification."""
    git = (context or {}).get("provenance", {}).get("git", {})
    date = commit_date(git["commit"], root) if git.get("commit") else None
    if date is None:
        date = datetime.datetime.fromtimestamp(claims_path.stat().st_mtime, tz=datetime.UTC).date().isoformat()
    if not git.get("commit"):
        return date
    return f"commit {git['commit'][:7]}" + (" + uncommitted changes" if git.get("dirty") else "") + f" ({date})"


def commit_date(commit: str, root: str | os.PathLike[str] = ".") -> str | None:
    """The committer date (YYYY-MM-DD) of ``commit`` in the git repository at ``root``; None when git or the
    commit is not there."""
    return git_output(root, "show", "-s", "--format=%cs", commit, "--") or None


def markdown_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def results_table(root: str | os.PathLike[str] = ".", profile: str = SHORT_PATHS_PROFILE,
                  status: Mapping[str, str] | None = None, claims: bool = True) -> str:
    """The Markdown table of every paper's verdict counts in ``profile`` (module docstring), links relative to
    ``root``; with ``status`` (paper -> text) a last column, :data:`STATUS`; ``claims=False`` reads no claims (every
    paper not built: a build published unfinished, whose claims are not published). ValueError when ``root`` has no
    paper pipeline."""
    papers = paper_keys(root)
    if not papers:
        raise ValueError(f"no paper pipeline (papers/*/rules.smk) under {str(root)!r}")
    results, reports, _logs = profile_dirs(profile)
    extra = [] if status is None else [STATUS]
    lines = [markdown_row([*COLUMNS, *extra]), markdown_row(["---", *["--:"] * 7, "---", *["---"] * len(extra)])]
    for paper in papers:
        claims_path = Path(root, results, paper, "claims.json")
        context_path = Path(root, results, paper, "report", "context.json")
        link = f"{reports}/{paper}.html"
        state = [] if status is None else [status.get(paper, "-")]
        if not (claims and claims_path.is_file()):
            under_way = [f"{UNDER_WAY}, {text}" if text != "-" else text for text in state]
            lines.append(markdown_row([f"{paper} (`{link}`)", *["-"] * 7, NOT_BUILT, *under_way]))
            continue
        row = claims_row(read_json(claims_path), str(claims_path))
        context = read_json(context_path) if context_path.is_file() else None
        title = (context or {}).get("paper", {}).get("title", paper)
        lines.append(markdown_row([f"[{title}]({link})", *(row["counts"][v] for v in VERDICTS),
                                   f"{row['tested']} of {row['listed']}", row["findings"],
                                   f"{row['checks_passed']} of {row['checks']}", run_label(claims_path, context, root),
                                   *state]))
    return "\n".join(lines)


def replace_table(text: str, table: str, source: str = "the file") -> str:
    """``text`` with the lines between :data:`BEGIN` and :data:`END` replaced by ``table`` (ValueError naming
    ``source`` unless each marker is there once, BEGIN first)."""
    lines = text.splitlines(keepends=True)
    stripped = [line.strip() for line in lines]
    if stripped.count(BEGIN) != 1 or stripped.count(END) != 1 or stripped.index(BEGIN) > stripped.index(END):
        raise ValueError(f"{source} must hold the line {BEGIN!r} once, then {END!r} once")
    begin, end = stripped.index(BEGIN), stripped.index(END)
    return "".join([*lines[:begin + 1], table + "\n", *lines[end:]])


def summary(args: argparse.Namespace) -> None:
    print(results_table(args.root, args.profile))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m common.report.summary", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the repository whose papers/ and results/ are read")
    parser.add_argument("--profile", default=SHORT_PATHS_PROFILE, help="whose claims (default: the default profile)")
    parser.set_defaults(run=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
