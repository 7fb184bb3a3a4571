"""When each prediction was written and whether it was revised after its results existed, read from git.

A row's *prediction* is its statistic (whitespace collapsed), direction, threshold and the regime quantities it
``requires`` (their ids), as ``papers/<paper>/config.yaml`` holds them under ``<paper>: claims:``. Its date is that
of the commit that last changed it (:func:`prediction_dates`; "uncommitted" when the working tree's config differs
from ``HEAD``'s).

*Results existed* for a paper at a tracked record of them (:func:`results_records`), each naming the commit its
build was made at:

* a row of the README's results table (``python -m common.report.summary``) that links ``reports/<paper>.html`` and
  says ``commit <sha>``: results as of the README commit's date, built with the config at ``<sha>`` (a build
  stamped "+ uncommitted changes" is taken as built with the config at ``<sha>``, the closest record git has);
* a published ``results/<paper>/claims.json``: results as of the commit that added that version, built at the
  commit its ``report/context.json`` names (the record commit itself when there is none).

A row is **revised after results** when its prediction in the config at the build commit of the first record that
has the row differs from today's: the row then carries the earlier prediction (:func:`row_histories`). A revision
known from review but invisible to git (results of which no record was tracked) is named in the config
(``revised: {commit, why}``); its earlier prediction is the one at that
commit's parent, or the one the config states (``revised.earlier``: ``{statistic, direction, threshold}``) when no
commit held it. How a revised row counts in the tally is :attr:`common.report.claims.Claim.tallied`.

Outside a git checkout (a copy of the work tree) every date is "unknown: not a git checkout", and nothing is
flagged.
"""

from __future__ import annotations

import datetime
import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .provenance import git_output

README = "README.md"
NO_GIT = "unknown: not a git checkout"


def commits_of(root: str | os.PathLike[str], path: str) -> list[tuple[str, str]]:
    """``(commit, ISO date)`` of every commit that changed ``path``, newest first (first-parent order is not
    assumed: ``git log``'s default)."""
    out = git_output(root, "log", "--format=%H %cI", "--", path) or ""
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line.strip()]  # type: ignore[misc]


def prediction_of(config_text: str | None, paper: str, cid: str) -> dict[str, Any] | None:
    """The prediction of row ``cid`` in a config's text (None when the text, the paper or the row is missing, or
    the text is not YAML)."""
    config = parsed_config(config_text)
    if config is None:
        return None
    entry = (config.get(paper) or {}).get("claims", {}).get(cid)
    if not isinstance(entry, Mapping):
        return None
    try:
        return prediction_record(str(entry.get("statistic", "")), str(entry.get("direction")),
                                 float(entry.get("threshold", "nan")), entry.get("requires") or {})
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def parsed_config(config_text: str | None) -> Mapping[str, Any] | None:
    """A config's text as YAML (``yaml.safe_load``), None when there is no text or it is not a YAML mapping; parsed
    once per distinct text, as a paper's history holds each version of its config at many commits and every row
    reads each one (the result is shared between callers: read it, never change it)."""
    if config_text is None:
        return None
    try:
        config = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return None
    return config if isinstance(config, Mapping) else None


def prediction_record(statistic: str, direction: str, threshold: float, requires: Iterable[str]) -> dict[str, Any]:
    """A prediction in the form of :func:`prediction_of`."""
    return {"statistic": " ".join(statistic.split()), "direction": direction, "threshold": float(threshold),
            "requires": sorted(requires)}


def readme_records(root: str | os.PathLike[str], paper: str) -> list[dict[str, str]]:
    """The README results-table rows of ``paper`` over git history: ``{"record", "date", "built"}``, oldest first
    (one per build commit: its first record)."""
    records: dict[str, dict[str, str]] = {}
    for commit, date in reversed(commits_of(root, README)):
        for line in (git_output(root, "show", f"{commit}:{README}") or "").splitlines():
            if f"reports/{paper}.html)" not in line or "commit " not in line:
                continue
            built = line.rsplit("commit ", 1)[1].split()[0].strip(" |")
            records.setdefault(built, {"record": commit, "date": date, "built": built,
                                       "source": f"{README} at {commit[:7]}"})
    return list(records.values())


def published_records(root: str | os.PathLike[str], paper: str) -> list[dict[str, str]]:
    """The versions of a published ``results/<paper>/claims.json`` in git history, oldest first."""
    records = []
    for commit, date in reversed(commits_of(root, f"results/{paper}/claims.json")):
        context = git_output(root, "show", f"{commit}:results/{paper}/report/context.json")
        built = commit
        if context:
            built = (yaml.safe_load(context) or {}).get("provenance", {}).get("git", {}).get("commit") or commit
        records.append({"record": commit, "date": date, "built": built,
                        "source": f"results/{paper}/claims.json at {commit[:7]}"})
    return records


def results_records(root: str | os.PathLike[str], paper: str) -> list[dict[str, str]]:
    """Every tracked record of ``paper``'s results (module docstring), oldest first."""
    return sorted([*readme_records(root, paper), *published_records(root, paper)], key=lambda r: r["date"])


def row_histories(predictions: Mapping[str, Mapping[str, Any]], revised: Mapping[str, Mapping[str, Any]], paper: str,
                  root: str | os.PathLike[str] = ".", config: str | None = None) -> dict[str, dict[str, Any]]:
    """Per row id of ``predictions`` (each a :func:`prediction_record`; ``revised`` the rows' ``revised:`` of the
    config, by id): ``{"prediction": {"commit", "date"} or {"note"}, "revision": {...} or {}}``.
    ``revision`` holds ``earlier`` (the prediction the results were made under), ``commit`` and ``date`` of the
    revising change (or of the review's named commit), ``results`` (the record that shows they existed) and
    ``how`` ("git" or "review: <why>"). ``config`` is the config's path in the repository
    (``papers/<paper>/config.yaml``)."""
    config = config or f"papers/{paper}/config.yaml"
    head = git_output(root, "rev-parse", "HEAD")
    if head is None:
        return {cid: {"prediction": {"note": NO_GIT}, "revision": {}} for cid in predictions}
    versions = [(commit, date, git_output(root, "show", f"{commit}:{config}"))
                for commit, date in commits_of(root, config)]
    worktree = Path(root, config).read_text(encoding="utf-8").strip() if Path(root, config).is_file() else None
    # stripped as git_output gives each commit's: one text, parsed once, when the working tree is a commit's
    records = results_records(root, paper)
    built_configs = {r["built"]: git_output(root, "show", f"{r['built']}:{config}") for r in records}
    histories = {}
    for cid, current in predictions.items():
        histories[cid] = {"prediction": prediction_date(current, cid, paper, versions, worktree),
                          "revision": revision_of(cid, current, revised.get(cid, {}), paper, records, built_configs,
                                                  versions, root, config)}
    return histories


def prediction_date(current: Mapping[str, Any], cid: str, paper: str,
                    versions: Iterable[tuple[str, str, str | None]], worktree: str | None) -> dict[str, str]:
    """The commit and date at which ``current`` became row ``cid``'s prediction: the oldest commit of the newest run
    of versions that hold it (``{"note": ...}`` when the working tree's differs from every commit's)."""
    if worktree is not None and prediction_of(worktree, paper, cid) != current:
        return {"note": "not in the working tree's config"}
    found: dict[str, str] = {}
    for commit, date, text in versions:  # newest first
        if prediction_of(text, paper, cid) != current:
            break
        found = {"commit": commit, "date": date}
    return found or {"note": "uncommitted changes"}


def revision_of(cid: str, current: Mapping[str, Any], revised: Mapping[str, Any], paper: str,
                records: Iterable[Mapping[str, str]], built_configs: Mapping[str, str | None],
                versions: Sequence[tuple[str, str, str | None]], root: str | os.PathLike[str],
                config: str) -> dict[str, Any]:
    """The revision of row ``cid``'s prediction ``current`` after its first tracked results (with the config's
    ``revised.why`` as ``why`` where it gives one), or the one its config names (``revised``: ``{"commit", "why"}``),
    or ``{}``."""
    for record in records:
        earlier = prediction_of(built_configs.get(record["built"]), paper, cid)
        if earlier is None:
            continue
        if earlier == current:
            break
        change = first_change_after(earlier, cid, paper, versions)
        why = {"why": str(revised["why"])} if revised else {}  # the config's reason for a revision git found
        return {"earlier": earlier, **change, "results": f"{record['source']} ({record['date'][:10]}), built at "
                f"{record['built'][:7]}", "how": "git", **why}
    if revised:
        commit = git_output(root, "rev-parse", f"{revised['commit']}^{{commit}}")
        if "earlier" in revised:
            stated = revised["earlier"]
            earlier = prediction_record(stated["statistic"], stated["direction"], stated["threshold"],
                                        stated.get("requires") or {})
        else:
            earlier = prediction_of(git_output(root, "show", f"{revised['commit']}^:{config}"), paper, cid)
        if commit is None or earlier is None:
            raise ValueError(f"{paper}.claims.{cid}.revised: no prediction of the row at the parent of commit "
                             f"{revised['commit']!r} in {config}: state it as revised.earlier")
        date = git_output(root, "show", "-s", "--format=%cI", commit) or ""
        return {"earlier": earlier, "commit": commit, "date": date, "results": "known from review",
                "how": f"review: {revised['why']}"}
    return {}


def first_change_after(earlier: Mapping[str, Any], cid: str, paper: str,
                       versions: Iterable[tuple[str, str, str | None]]) -> dict[str, str]:
    """The oldest commit whose config holds a prediction of ``cid`` other than ``earlier`` after the newest one
    that holds ``earlier`` (``{"note": "uncommitted changes"}`` when no commit does)."""
    change: dict[str, str] = {"note": "uncommitted changes"}
    for commit, date, text in versions:  # newest first
        if prediction_of(text, paper, cid) == earlier:
            break
        change = {"commit": commit, "date": date}
    return change


def runs_date(evidence: Iterable[str], root: str | os.PathLike[str] = ".") -> str:
    """The UTC date and time of the newest evidence file of a row (the runs it judges), ISO; "" when none is
    there."""
    times = [Path(root, path).stat().st_mtime for path in evidence if Path(root, path).is_file()]
    if not times:
        return ""
    return datetime.datetime.fromtimestamp(max(times), tz=datetime.UTC).isoformat(timespec="seconds")
