"""Which results of a profile are stale, per paper, from Snakemake's own change detection.

``python workflow/status.py [--profile NAME] [--json]`` (``make status``) asks Snakemake for the summary of the
profile's every report (``snakemake --summary all``: one row per output file with its status and whether a build would
update it) under the rerun policy of ``profiles/default`` (params, set of inputs, software environment). A result is

* **current** when it exists and a build would leave it as it is;
* **stale** when it exists and a build would redo it: the params of its rule changed since it was made (its config,
  or the digest of the code its step runs, ``workflow/step_code.py``), the set of its inputs changed, or something it
  is built from will be redone (Snakemake's status then says ``ok``: the reason is upstream);
* **absent** when it does not exist: a published tree leaves out the trained checkpoints, which nothing current needs.

Each file belongs to the paper whose folder holds it (``results/<paper>/``, ``reports/<paper>.*``), or to ``shared``
(corpora, base models, the shared evaluations, the index). The command prints a table of counts per paper and every
stale file with its reason, and exits 0: staleness is information (``make reports`` rebuilds exactly those files),
not an error. ``--json`` prints ``{paper: {"current": n, "stale": {file: reason}, "absent": n}}`` instead, and
``--update README.md`` also rewrites the README's results table (:mod:`common.report.summary`) with a last column
saying, per paper, whether its results are current (:func:`status_text`): a published result a change stales is
marked there, and a test holds the README to what this command computes."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from common.config import profile_dirs
from common.io import write_text
from common.report.summary import paper_keys, replace_table, results_table

SHARED = "shared"
UPDATE = "update pending"
UPSTREAM = "ok"  # Snakemake's status of a file that will be redone because something it is built from will be
UPSTREAM_REASON = "built from a stale or absent result"


class SnakemakeError(RuntimeError):
    """A Snakemake run that failed: its message ends with the last 3000 characters of its stderr; ``stderr`` holds
    all of it."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.stderr = stderr


def snakemake(profile: str, folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``snakemake --profile workflow/profiles/<profile> <args>`` in ``folder``; :class:`SnakemakeError` with its
    message when it fails."""
    command = [sys.executable, "-m", "snakemake", "--profile", f"workflow/profiles/{profile}", *args]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SnakemakeError(f"{' '.join(command[2:])} failed in {folder}:\n{done.stderr[-3000:]}", done.stderr)
    return done


def summary_rows(profile: str, folder: Path, targets: Sequence[str] = ("all",)) -> list[dict[str, str]]:
    """The rows of ``snakemake --summary`` for ``targets`` in ``folder`` with profile ``profile`` (the columns
    ``output_file``, ``date``, ``rule``, ``log-file(s)``, ``status``, ``plan``). RuntimeError with Snakemake's
    message when it fails."""
    done = snakemake(profile, folder, "--summary", *targets)
    lines = done.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("output_file\t")), None)
    if start is None:
        raise RuntimeError(f"snakemake --summary printed no summary table in {folder}:\n{done.stdout[-3000:]}")
    header = lines[start].split("\t")
    return [dict(zip(header, line.split("\t"), strict=True)) for line in lines[start + 1:] if line.strip()]


class PlannedJob(NamedTuple):
    """One job of a build's plan: its rule, input files, output files and log files."""

    rule: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    logs: tuple[str, ...] = ()


def dry_run_jobs(printed: str) -> list[PlannedJob]:
    """The jobs a Snakemake dry run ``printed``: each as ``rule <name>:`` (or ``localrule``) and its indented
    ``input:``, ``output:`` and ``log:`` lines, comma-separated."""
    jobs, rule, fields = [], None, {}
    for line in [*printed.splitlines(), ""]:
        start = re.fullmatch(r"(?:local)?rule (\S+):", line)
        if not line.startswith("    ") and rule is not None:
            jobs.append(PlannedJob(rule, fields.get("input", ()), fields.get("output", ()), fields.get("log", ())))
            rule = None
        if start:
            rule, fields = start.group(1), {}
        elif rule is not None and line.startswith("    ") and ": " in line:
            key, value = line.strip().split(": ", 1)
            fields[key] = tuple(value.split(", "))
    return jobs


def planned_jobs(profile: str, folder: Path, targets: Sequence[str] = ("all",)) -> list[PlannedJob]:
    """Every job of the plan for ``targets`` in ``folder``, built or not, from ``snakemake -n --forceall``
    (:func:`dry_run_jobs`). RuntimeError with Snakemake's message when it fails."""
    return dry_run_jobs(snakemake(profile, folder, "-n", "--forceall", *targets).stdout)


def paper_of(path: str, profile: str, papers: Sequence[str]) -> str:
    """The paper whose folder holds ``path`` (``<results>/<paper>/...`` or ``<reports>/<paper>.<ext>`` of the
    profile's folders), else :data:`SHARED`."""
    results, reports, _ = profile_dirs(profile)
    parts = Path(path).parts
    for folder in (results, reports):
        depth = len(Path(folder).parts)
        if parts[:depth] == Path(folder).parts and len(parts) > depth:
            name = parts[depth] if folder == results else Path(parts[depth]).stem
            if name in papers and (folder == results or len(parts) == depth + 1):
                return name
    return SHARED


def classify(rows: Sequence[dict[str, str]], profile: str, papers: Sequence[str]) -> dict[str, dict]:
    """``{paper: {"current": n, "stale": {file: reason}, "absent": n}}`` of summary ``rows`` (every paper of
    ``papers`` and :data:`SHARED` listed, in that order)."""
    status: dict[str, dict] = {name: {"current": 0, "stale": {}, "absent": 0} for name in [*papers, SHARED]}
    for row in rows:
        entry = status[paper_of(row["output_file"], profile, papers)]
        if row["date"] == "-":
            entry["absent"] += 1
        elif row["plan"] == UPDATE:
            entry["stale"][row["output_file"]] = UPSTREAM_REASON if row["status"] == UPSTREAM else row["status"]
        else:
            entry["current"] += 1
    return status


def table(status: dict[str, dict], profile: str) -> str:
    """The counts per paper, then every stale file with its reason."""
    lines = [f"results of profile {profile!r}: current / stale / absent",
             *(f"  {name:<20} {entry['current']:>5} {len(entry['stale']):>5} {entry['absent']:>5}"
               for name, entry in status.items())]
    for name, entry in status.items():
        if entry["stale"]:
            lines.append(f"stale in {name}:")
            lines.extend(f"  {path}  ({reason})" for path, reason in sorted(entry["stale"].items()))
    if not any(entry["stale"] for entry in status.values()):
        lines.append("no result is stale")
    return "\n".join(lines)


def status_text(entry: dict) -> str:
    """The README's status of one paper's results: ``current``, ``stale: <n> of <all>``, or ``-`` (none built)."""
    built = entry["current"] + len(entry["stale"])
    if not built:
        return "-"
    return f"stale: {len(entry['stale'])} of {built}" if entry["stale"] else "current"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default", help="a profile of workflow/profiles (default: default)")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument("--folder", type=Path, default=Path("."), help="the checkout (default: here)")
    parser.add_argument("--update", type=Path, help="a Markdown file (README.md) whose results table is rewritten")
    args = parser.parse_args(argv)
    papers = paper_keys(args.folder)
    try:
        rows = summary_rows(args.profile, args.folder)
    except RuntimeError as err:  # Snakemake's own message: an unknown profile, a broken config
        print(err, file=sys.stderr)
        return 2
    status = classify(rows, args.profile, papers)
    print(json.dumps(status, indent=1, sort_keys=True) if args.json else table(status, args.profile))
    if args.update is not None:
        text = results_table(args.folder, args.profile, {paper: status_text(status[paper]) for paper in papers})
        write_text(args.update, replace_table(args.update.read_text(encoding="utf-8"), text, str(args.update)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
