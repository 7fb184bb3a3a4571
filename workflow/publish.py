"""``make publish``: put a finished build's results into the repository, so that a clone has them.

``python -m workflow.publish [--profile default] [--replace-large] [--dry-run]`` checks a build and stages it with
``git add`` (the developer commits). It refuses, naming the reason, unless

* **the build is finished and current**: every report of the profile exists and no result is stale
  (:mod:`workflow.status`: Snakemake's change detection, with each step's code digest among its params);
* **it was made at one clean commit**: every report context's provenance names the same commit and no uncommitted
  change;
* **every artifact a report cites is published** (its ``SHA256SUMS`` lists only published files, so ``sha256sum -c``
  passes in a clone);
* **it fits**: the published files add up to at most ``publish.max_mb`` (config), well under a push's 256 MiB;
* **large files are committed once**: a file over ``publish.large_mb`` that the last commit holds with other bytes
  (a base model pretrained again, not byte-identical) is refused unless ``--replace-large``; one rebuilt
  byte-identical is no change to git.

What it publishes: every output of the profile's build that exists (the files of a folder output), except the
config's ``publish.exclude`` patterns (the trained and quantized checkpoints, the rescaled sweep models, the
fetched archives: each is rebuilt from published inputs on demand), and Snakemake's record of each
(``.snakemake/metadata/``), so that in a clone ``snakemake -n`` finds them current and ``make status`` can tell when
a change stales them; and the platform of this machine, the build's, in ``<results>/platform.json``
(:mod:`workflow.build_platform`), so that ``make verify`` knows where bit-identity is expected. Outputs published
before and no longer made are removed from the index. It then rewrites the README's results table (``python -m
workflow.status --update README.md``) and stages it too, and prints the published size per paper.

``--unfinished`` publishes a build still under way, so that it outlasts the machine it runs on (the default build
takes longer than one sitting; a clone of the commit resumes it with ``make reports``, rebuilding nothing published).
It stages every current output the build has made so far, but the outputs of jobs that did not finish
(:func:`cut_off`), each paper's claims, report context and the reports (:func:`final_outputs`), which the
finished publication makes together at one commit, and the outputs a clone would make again all the same
(:func:`remade_in_clone`: a job whose left-out checkpoint a step still to run reads, and what is made from it); the
README's table says of each paper "not built" and, where results are published, "build under way". It refuses while
a Snakemake run works in the folder (a job finishing during the publication would be half staged), when a result is
stale, and when the checkout has uncommitted changes outside the build's outputs: the results it stages then follow
from the commit's code, as their code digests say."""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import subprocess
import sys
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from common.report.provenance import BUILD_OUTPUTS, git_state
from common.report.summary import paper_keys, replace_table, results_table
from workflow.build_platform import record_platform, this_platform
from workflow.published_mtimes import metadata_file
from workflow.status import SHARED, PlannedJob, classify, paper_of, planned_jobs, status_text, summary_rows
from workflow.unlock_stale import snakemake_processes
from workflow.verify import workflow_config

MIB = 1024 * 1024
PUBLISHED_ROOTS = ("results", "reports", "data", ".snakemake/metadata")  # where published files live
KEEP = ("reports/README.md",)  # tracked files under those roots that are not build outputs
REPORT_RULES = ("render_report", "report_pdf", "report_index")
INCOMPLETE = Path(".snakemake") / "incomplete"  # Snakemake's marks of the outputs of jobs that have not finished


def output_files(rows: Sequence[Mapping[str, str]], folder: Path) -> dict[str, str]:
    """``{file: output}`` of every existing output of summary ``rows``: a file output is its own, a folder output
    gives each file under it (Snakemake records the folder)."""
    files = {}
    for row in rows:
        path = folder / row["output_file"]
        if path.is_dir():
            files.update({str(p.relative_to(folder)): row["output_file"] for p in sorted(path.rglob("*"))
                          if p.is_file()})
        elif path.is_file():
            files[row["output_file"]] = row["output_file"]
    return files


def excluded(path: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in patterns)


def report_problems(status: Mapping[str, Mapping[str, Any]], contexts: Mapping[str, Mapping[str, Any] | None],
                    missing_reports: Sequence[str]) -> list[str]:
    """Why the build cannot be published: a missing report, a stale result, a paper without a context, or contexts
    that name no commit, a dirty tree or different commits."""
    problems = [f"missing report {path}" for path in missing_reports]
    problems += [f"stale: {path} ({reason})" for entry in status.values() for path, reason in entry["stale"].items()]
    commits = {}
    for paper, context in contexts.items():
        git = (context or {}).get("provenance", {}).get("git", {})
        if context is None:
            problems.append(f"{paper}: no report context yet (the build has not reached it)")
        elif not git.get("commit"):
            problems.append(f"{paper}: its report context names no commit (built outside a git checkout?)")
        elif git.get("dirty"):
            problems.append(f"{paper}: built at {git['commit'][:7]} + uncommitted changes")
        else:
            commits[paper] = git["commit"]
    if len(set(commits.values())) > 1:
        problems.append("built at several commits: " + ", ".join(f"{p} {c[:7]}" for p, c in sorted(commits.items())))
    return problems


def unfinished_problems(folder: Path) -> list[str]:
    """Why a build under way in ``folder`` cannot be published unfinished (module docstring): a Snakemake run in
    progress, or a checkout that is no git checkout or has uncommitted changes outside the build's outputs."""
    problems = []
    running = snakemake_processes(folder)
    if running:
        problems.append(f"a Snakemake run is in progress in {folder.resolve()} (process "
                        f"{', '.join(map(str, running))}): stop it first")
    state = git_state(folder)
    if state["commit"] is None:
        problems.append(f"{folder.resolve()} is not a git checkout")
    elif state["dirty"]:
        problems.append(f"uncommitted changes at {state['commit'][:7]} outside {', '.join(BUILD_OUTPUTS)}")
    return problems


def final_outputs(rows: Sequence[Mapping[str, str]], papers: Sequence[str]) -> set[str]:
    """The outputs among summary ``rows`` that a finished publication makes at one commit: each paper's claims and
    report context (``<results>/<paper>/claims.json``, ``<results>/<paper>/report/``) and the reports."""
    folders = [paper_results(rows, paper) for paper in papers]
    return {row["output_file"] for row in rows if row["rule"] in REPORT_RULES
            or any(row["output_file"] in (f"{f}/claims.json", f"{f}/report") or
                   row["output_file"].startswith(f"{f}/report/") for f in folders)}


def cut_off(rows: Sequence[Mapping[str, str]], folder: Path) -> set[str]:
    """The outputs among summary ``rows`` of jobs that did not finish: Snakemake marks them in
    ``.snakemake/incomplete/`` (named as their records) while the job runs, and a run stopped hard leaves the mark
    beside what the job had written so far; the next build reruns the job."""
    return {row["output_file"] for row in rows
            if (folder / INCOMPLETE / metadata_file(row["output_file"]).name).exists()}


def remade_in_clone(jobs: Sequence[PlannedJob], published: set[str], exclude: Iterable[str]) -> set[str]:
    """The outputs of the plan ``jobs`` that a clone holding only ``published`` would make again, as Snakemake plans
    it: a job runs when an output it owes is missing (one not published and not left out by the ``exclude``
    patterns: not made yet, cut off, left for the finished publication); a job that runs reads its inputs, so the
    job of an input that is not published runs too (WinQ's summary reads the trained and quantized checkpoints, so
    while it is not built, every run would train again); and a job whose input is made again runs again. Returns
    every output of those jobs."""
    producer = {name: job for job in jobs for name in job.outputs}
    readers = defaultdict(list)
    for job in jobs:
        for name in job.inputs:
            readers[name].append(job)
    runs = {job for job in jobs if any(name not in published and not excluded(name, exclude) for name in job.outputs)}
    queue = deque(runs)
    while queue:
        running = queue.popleft()
        following = {producer[name] for name in running.inputs if name in producer and name not in published}
        following.update(reader for name in running.outputs for reader in readers[name])
        for job in following - runs:
            runs.add(job)
            queue.append(job)
    return {name for job in runs for name in job.outputs}


def cited_unpublished(sums_files: Iterable[Path], published: set[str]) -> list[str]:
    """Every file a report's SHA256SUMS lists that is not in ``published`` (the published outputs and the files the
    commit tracks, such as the authors' results a report cites: ``sha256sum -c`` would fail in a clone)."""
    missing = []
    for sums in sums_files:
        for line in sums.read_text(encoding="utf-8").splitlines():
            name = line.split(maxsplit=1)[1].lstrip("*") if line.strip() else ""
            if name and name not in published:
                missing.append(f"{sums.name}: {name}")
    return missing


def git(folder: Path, *args: str, binary: bool = False) -> Any:
    done = subprocess.run(["git", *args], cwd=folder, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:3])} failed: {done.stderr.decode()[-2000:]}")
    return done.stdout if binary else done.stdout.decode()


def blob_id(path: Path) -> str:
    """Git's id of the file's bytes (``git hash-object``)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def committed_blobs(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """``{file: blob id}`` of the files of ``names`` the last commit holds."""
    names = list(names)
    if not names:
        return {}
    listed = git(folder, "ls-tree", "-r", "-z", "HEAD", "--", *PUBLISHED_ROOTS, binary=True).decode()
    wanted = set(names)
    blobs = {}
    for entry in filter(None, listed.split("\0")):
        meta, name = entry.split("\t", 1)
        if name in wanted:
            blobs[name] = meta.split()[2]
    return blobs


def replaced_large(folder: Path, files: Iterable[str], large_mb: float) -> list[str]:
    """The files over ``large_mb`` MiB that the last commit holds with other bytes."""
    large = [name for name in files if (folder / name).stat().st_size > large_mb * MIB]
    committed = committed_blobs(folder, large)
    return [name for name in large if name in committed and committed[name] != blob_id(folder / name)]


def sizes(files: Iterable[str], folder: Path, profile: str, papers: Sequence[str]) -> dict[str, int]:
    """Bytes published per paper (and :data:`workflow.status.SHARED`), Snakemake's records under ``shared``."""
    totals = dict.fromkeys([*papers, SHARED], 0)
    for name in files:
        totals[paper_of(name, profile, papers)] += (folder / name).stat().st_size
    return totals


def publish(folder: Path, profile: str, replace_large: bool = False, dry_run: bool = False,
            unfinished: bool = False) -> dict[str, Any]:
    """Check the build of ``profile`` in checkout ``folder`` and stage it (module docstring; ``unfinished``: a build
    under way, without its claims, contexts and reports); ValueError listing every reason it cannot be published.
    Returns ``{"files", "bytes", "commit", "left_out"}`` (``left_out``: the outputs a build under way leaves out, as
    cut off or made again in a clone)."""
    config = workflow_config(folder, profile)["publish"]
    papers = paper_keys(folder)
    rows = all_rows = summary_rows(profile, folder)
    left_out = cut_off(rows, folder) if unfinished else set()  # a finished build has none: they would be stale
    rows = [row for row in rows if row["output_file"] not in left_out]
    status = classify(rows, profile, papers)
    if unfinished:
        problems = unfinished_problems(folder) + report_problems(status, {}, [])
        final = final_outputs(rows, papers)
        made = {row["output_file"] for row in rows if row["output_file"] not in final
                and (folder / row["output_file"]).exists() and not excluded(row["output_file"], config["exclude"])}
        left_out |= remade_in_clone(planned_jobs(profile, folder), made, config["exclude"]) & made
        rows = [row for row in rows if row["output_file"] not in final | left_out]
        reports = []
    else:
        reports = [row["output_file"] for row in rows if row["rule"] in ("render_report", "report_index")]
        contexts = {paper: read_context(folder / paper_results(rows, paper) / "report/context.json")
                    for paper in papers}
        problems = report_problems(status, contexts, [p for p in reports if not (folder / p).is_file()])
    files = {name: output for name, output in output_files(rows, folder).items()
             if not excluded(name, config["exclude"]) and not excluded(output, config["exclude"])}
    records = sorted({str(metadata_file(output)) for output in files.values()})
    problems += [f"no Snakemake record {r} (built by another checkout?)" for r in records if not (folder / r).is_file()]
    problems += [f"cited but not published: {entry}" for entry in
                 cited_unpublished([folder / p for p in reports if p.endswith(".SHA256SUMS")
                                    and (folder / p).is_file()],  # a missing one is named above
                                   {*files, *git(folder, "ls-files", "-z").split("\0")})]
    published = sorted({*files, *records})
    per_paper = sizes([name for name in published if (folder / name).is_file()], folder, profile, papers)
    total = sum(per_paper.values())
    if total > config["max_mb"] * MIB:
        problems.append(f"{total / MIB:.1f} MiB to publish, over publish.max_mb = {config['max_mb']}")
    if not replace_large:
        problems += [f"{name}: committed with other bytes (--replace-large commits it again)"
                     for name in replaced_large(folder, files, config["large_mb"])]
    if problems:
        raise ValueError("cannot publish:\n  " + "\n  ".join(problems))
    commit = git_state(folder)["commit"] if unfinished else next(iter(contexts.values()))["provenance"]["git"]["commit"]
    if not dry_run:
        published.append(record_platform(folder, profile, this_platform()))
        tracked = set(filter(None, git(folder, "ls-files", "-z", "--", *PUBLISHED_ROOTS).split("\0")))
        gone = sorted(tracked - set(published) - set(KEEP))
        if gone:
            git(folder, "rm", "--cached", "-q", "--", *gone)
        for start in range(0, len(published), 500):
            git(folder, "add", "-f", "--", *published[start:start + 500])
        readme = folder / "README.md"
        outputs = set(files.values())
        published_status = classify([row if row["output_file"] in outputs else {**row, "date": "-"}
                                     for row in all_rows], profile, papers)  # as a clone of the commit sees it
        table = results_table(folder, profile, {paper: status_text(published_status[paper]) for paper in papers},
                              claims=not unfinished)
        readme.write_text(replace_table(readme.read_text(encoding="utf-8"), table, "README.md"), encoding="utf-8")
        git(folder, "add", "--", "README.md")
    return {"files": len(published), "bytes": per_paper, "commit": commit, "left_out": sorted(left_out)}


def read_context(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def paper_results(rows: Sequence[Mapping[str, str]], paper: str) -> str:
    """The results folder of ``paper``'s claims among summary ``rows`` (``results`` or ``results/<profile>``)."""
    claims = next((row["output_file"] for row in rows if row["output_file"].endswith(f"/{paper}/claims.json")), None)
    if claims is None:
        raise ValueError(f"the profile's plan has no claims of {paper!r}")
    return claims.removesuffix(f"/{paper}/claims.json") + f"/{paper}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default", help="a profile of workflow/profiles (default: default)")
    parser.add_argument("--replace-large", action="store_true",
                        help="commit large files again that the last commit holds with other bytes")
    parser.add_argument("--dry-run", action="store_true", help="check and print, stage nothing")
    parser.add_argument("--unfinished", action="store_true",
                        help="a build under way: stage what it has made so far but the claims, contexts and reports")
    parser.add_argument("--folder", type=Path, default=Path("."), help="the checkout (default: here)")
    args = parser.parse_args(argv)
    try:
        done = publish(args.folder, args.profile, args.replace_large, args.dry_run, args.unfinished)
    except (ValueError, RuntimeError) as err:  # the reasons it refuses; Snakemake's or git's own message
        print(err, file=sys.stderr)
        return 1
    for name, size in done["bytes"].items():
        print(f"  {name:<20} {size / MIB:8.1f} MiB")
    if done["left_out"]:
        print(f"left out {len(done['left_out'])} outputs of jobs that did not finish, or that a clone would run "
              "again (a step still to run reads their left-out checkpoints): " + ", ".join(done["left_out"]))
    what = "build under way" if args.unfinished else "results built"
    print(f"{done['files']} files, {sum(done['bytes'].values()) / MIB:.1f} MiB, built at {done['commit'][:7]}"
          + (" (dry run: nothing staged)" if args.dry_run else
             f"; staged: git commit -m 'Publish the {args.profile} {what} at {done['commit'][:7]}'"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
