"""``make verify``: recompute published results and compare each with its record.

``python -m workflow.verify [--profile NAME] [--cells FILE ...] [--paper NAME] [--rtol R]`` recomputes

* ``--cells``: the named result files (paths from the repository root, e.g. ``results/finer_is_better/mse/
  e2m1-ue4m3-b4-absmax.json``);
* ``--paper``: every cell of one paper: the outputs of the rules config ``verify.cells.<paper>`` names (its cell,
  training and evaluation rules) that exist;
* neither: the sample of config ``verify.sample`` (one cheap cell a paper, per profile);

and ``--list`` prints the cells it would recompute, and recomputes nothing.

It runs ``snakemake --force <cells>`` in the checkout (the cells' jobs, and whatever they need that is absent, e.g.
the trained checkpoints a published tree leaves out), compares every recomputed cell with the record it replaced,
then puts every file and Snakemake record the run rewrote back as it was, so the checkout ends as it began (new files
the run made, such as checkpoints, stay: none is published). It prints one row a cell: the published and recomputed
digests (SHA-256 of the record without its volatile fields), identical or the first difference, and the job's time
(from Snakemake's record of it). The exit code is 1 when any cell differs.

**What is compared.** A JSON record (``.json``, each line of a ``.jsonl``) with the fields of config
``verify.volatile`` left out at any depth (the timings a rerun changes by design), a CSV without those columns,
any other file byte for byte.

**Where bits are expected.** Bit-identical where the published build's recorded platform
(:mod:`workflow.build_platform`, written by ``make publish``: the library versions and the numerical code paths
under the pins of ``envs/numerics.env``) is this machine's: the steps are seeded, and the cells that sum in
parallel use a fixed number of threads. Elsewhere a note names what differs, and then

* numbers within config ``verify.other_platform_rtol`` agree (``within rtol R``, never identical);
* a statistic of config ``verify.spreads`` beyond it is judged by its published 95% interval, recomputed from the
  record (a perplexity by the bootstrap over its windows, an accuracy by its Clopper-Pearson interval): inside, the
  cell agrees; outside, it fails. A trained run or a quantized cell may follow another trajectory or round a value
  to another code, so no tolerance on its numbers can serve;
* and the verdicts of every paper whose cells were recomputed are re-derived from them (``snakemake --forcerun
  <cells> -- <cells> <paper>/claims.json``): a changed verdict or implementation check fails, an estimate outside
  its published interval fails, and a cell that differs where no spread covers it (a training log) passes only
  where its paper's verdicts were re-derived unchanged. A paper whose claims read cells that are neither recomputed
  nor published (WinQ's summary reads every trained checkpoint) is named, with the jobs re-deriving it would run.

``--rtol R`` sets the tolerance whatever the platform."""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from common.config import merged, profile_dirs, profile_overrides
from common.report.summary import paper_keys
from common.uncertainty import Estimate, binomial_interval, log_perplexity, paired_bootstrap, perplexity_columns
from workflow.build_platform import foreign_notice, recorded_platforms, this_platform
from workflow.published_mtimes import metadata_file
from workflow.status import UPDATE, SnakemakeError, dry_run_jobs, snakemake, summary_rows

WORKFLOW_CONFIG = "workflow/config/default.yaml"


def workflow_config(folder: Path, profile: str) -> dict[str, Any]:
    """The workflow config of ``profile`` in checkout ``folder`` (workflow/config/default.yaml with the profile's
    overrides merged in, as the Snakefile's ``CFG``)."""
    config = yaml.safe_load((folder / WORKFLOW_CONFIG).read_text(encoding="utf-8"))
    return merged(config, profile_overrides(config.get("profiles", {}), profile, "config"))


def verify_config(folder: Path, profile: str) -> dict[str, Any]:
    """Config ``verify`` of ``profile``."""
    return workflow_config(folder, profile)["verify"]


def without(value: Any, volatile: frozenset[str]) -> Any:
    """``value`` (parsed JSON) without the keys ``volatile`` at any depth."""
    if isinstance(value, dict):
        return {k: without(v, volatile) for k, v in value.items() if k not in volatile}
    if isinstance(value, list):
        return [without(v, volatile) for v in value]
    return value


def comparable(path: Path, volatile: frozenset[str]) -> Any:
    """What of file ``path`` is compared: its JSON (a ``.jsonl``: a list, one entry a line) or CSV rows (a list of
    dicts) without the volatile fields, else its bytes; a gzip-compressed one (``.csv.gz``) by what it holds, as the
    file without ``.gz`` (compressed bytes may differ across zlib builds for the same content)."""
    data, kind = path.read_bytes(), path.suffix
    if kind == ".gz":
        data, kind = gzip.decompress(data), Path(path.stem).suffix
    if kind == ".json":
        return without(json.loads(data.decode("utf-8")), volatile)
    if kind == ".jsonl":
        return [without(json.loads(line), volatile) for line in data.decode("utf-8").splitlines()]
    if kind == ".csv":
        rows = csv.DictReader(io.StringIO(data.decode("utf-8")))
        return [{k: v for k, v in row.items() if k not in volatile} for row in rows]
    return data


def digest(value: Any) -> str:
    data = value if isinstance(value, bytes) else json.dumps(value, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:12]


def first_difference(published: Any, recomputed: Any, rtol: float = 0.0, where: str = "") -> str | None:
    """The first place where ``recomputed`` differs from ``published`` (``where: published -> recomputed``), None
    when they are equal; with ``rtol`` > 0, numbers (and numeric CSV strings) within that relative tolerance are
    equal."""
    if isinstance(published, dict) and isinstance(recomputed, dict):
        for key in sorted(set(published) | set(recomputed), key=str):
            if key not in published or key not in recomputed:
                return f"{where}.{key}: {'absent' if key not in published else 'present'} -> " \
                       f"{'absent' if key not in recomputed else 'present'}"
            found = first_difference(published[key], recomputed[key], rtol, f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(published, list) and isinstance(recomputed, list):
        if len(published) != len(recomputed):
            return f"{where or 'the record'}: {len(published)} -> {len(recomputed)} entries"
        for index, (a, b) in enumerate(zip(published, recomputed, strict=True)):
            found = first_difference(a, b, rtol, f"{where}[{index}]")
            if found:
                return found
        return None
    if published == recomputed:
        return None
    if rtol > 0 and close(published, recomputed, rtol):
        return None
    if isinstance(published, bytes):
        return f"{where or 'the file'}: bytes differ"
    return f"{where.lstrip('.') or 'the value'}: {published!r} -> {recomputed!r}"


def close(a: Any, b: Any, rtol: float) -> bool:
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isclose(x, y, rel_tol=rtol) or (math.isnan(x) and math.isnan(y))


def cells_of(rows: Sequence[Mapping[str, str]], rules: Iterable[str], folder: Path) -> list[str]:
    """The existing files among summary ``rows`` (of the checkout ``folder``) that rules ``rules`` make (a folder,
    such as a checkpoint, is not a record), in summary order."""
    wanted = set(rules)
    return [row["output_file"] for row in rows if row["rule"] in wanted and row["date"] != "-"
            and not (folder / row["output_file"]).is_dir()]


def planned_files(profile: str, folder: Path, arguments: Sequence[str]) -> dict[str, list[str]]:
    """Every output and log the jobs of ``snakemake <arguments>`` would write (from its dry run,
    ``workflow.status.dry_run_jobs``): ``{"output": [...], "log": [...]}``."""
    jobs = dry_run_jobs(snakemake(profile, folder, "--dry-run", *arguments).stdout)
    return {"output": list(dict.fromkeys(name for job in jobs for name in job.outputs)),
            "log": list(dict.fromkeys(name for job in jobs for name in job.logs))}


def spread(published: Mapping[str, Any], statistic: str, spec: Mapping[str, Any],
           evidence: Mapping[str, Any]) -> Estimate | None:
    """The published 95% interval of ``statistic`` in record ``published`` (a JSON object), as config
    ``verify.spreads`` gives it (``spec``): ``windows: [nll, tokens]``, the paired bootstrap over the evaluation
    windows of the NLL per token (``common.uncertainty``, with config ``evidence``'s resamples, seed and level);
    ``successes``/``trials``, the Clopper-Pearson interval of a proportion. None where the record lacks what the
    spec needs (or has fewer than two windows)."""
    if "windows" in spec:
        nll, tokens = (published.get(name) for name in spec["windows"])
        if not isinstance(nll, list) or not isinstance(tokens, list) or len(nll) < 2:
            return None
        return paired_bootstrap(perplexity_columns("cell", nll, tokens), lambda sums: log_perplexity(sums, "cell"),
                                resamples=evidence["resamples"], seed=evidence["seed"], level=evidence["level"],
                                unit="windows")
    successes, trials = published.get(spec["successes"]), published.get(spec["trials"])
    if not isinstance(successes, int) or not isinstance(trials, int) or trials < 1:
        return None
    return binomial_interval(successes, trials, evidence["level"], unit="examples")


def judgements(published: Any, recomputed: Any, rtol: float, spreads: Mapping[str, Mapping[str, Any]],
               evidence: Mapping[str, Any], where: str = "") -> list[dict[str, Any]]:
    """Every place where ``recomputed`` differs from ``published`` beyond ``rtol``: ``{"where", "text",
    "inside"}``, with ``inside`` True or False for a statistic of config ``verify.spreads`` against its published
    interval (:func:`spread`; the fields it derives from are judged with it) and None for a difference no spread
    covers."""
    if isinstance(published, dict) and isinstance(recomputed, dict):
        found, covered = [], set()
        for statistic, spec in spreads.items():
            interval = spread(published, statistic, spec, evidence) if statistic in recomputed else None
            if interval is None:
                continue
            fields = [statistic, *spec["derived"]]
            covered.update(fields)
            if all(first_difference(published.get(f), recomputed.get(f), rtol) is None for f in fields):
                continue
            value = recomputed[statistic]
            inside = isinstance(value, int | float) and interval.low <= value <= interval.high
            found.append({"where": f"{where}.{statistic}".lstrip("."), "inside": inside,
                          "text": f"{f'{where}.{statistic}'.lstrip('.')} {published[statistic]!r} -> {value!r} "
                                  f"{'inside' if inside else 'outside'} [{interval.low:.6g}, {interval.high:.6g}] "
                                  f"({interval.method})"})
        for key in sorted(set(published) | set(recomputed), key=str):
            if key in covered:
                continue
            if key not in published or key not in recomputed:
                found.append({"where": f"{where}.{key}", "inside": None,
                              "text": first_difference({key: published.get(key)}, {key: recomputed.get(key)}, rtol,
                                                       where) or f"{where}.{key}"})
                continue
            found += judgements(published[key], recomputed[key], rtol, spreads, evidence, f"{where}.{key}")
        return found
    if isinstance(published, list) and isinstance(recomputed, list) and len(published) == len(recomputed):
        return [found for index, (a, b) in enumerate(zip(published, recomputed, strict=True))
                for found in judgements(a, b, rtol, spreads, evidence, f"{where}[{index}]")]
    difference = first_difference(published, recomputed, rtol, where)
    return [] if difference is None else [{"where": where, "inside": None, "text": difference}]


def judged(published: Any, recomputed: Any, rtol: float, spreads: Mapping[str, Mapping[str, Any]],
           evidence: Mapping[str, Any]) -> tuple[str, bool | None]:
    """A recomputed cell against its record: ``(result, same)``: ``identical`` or ``within rtol R`` (True); its
    spread statistics ``inside their spread`` (True) or one ``outside its spread`` (False); or a difference no
    spread covers (None: the paper's re-derived verdicts decide, :func:`verdict_changes`). Without ``spreads``
    (bit-identity expected) every difference beyond ``rtol`` is False."""
    if published == recomputed:
        return "identical", True
    found = judgements(published, recomputed, rtol, spreads, evidence)
    if not found:
        return f"within rtol {rtol:g}", True
    if not spreads:
        return found[0]["text"], False
    outside = [item for item in found if item["inside"] is False]
    if outside:
        return f"outside its spread: {outside[0]['text']}", False
    uncovered = [item for item in found if item["inside"] is None]
    if uncovered:
        return f"differs where no spread covers it: {uncovered[0]['text']}", None
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"inside its spread: {found[0]['text']}{more}", True


def rederive(profile: str, folder: Path, arguments: Sequence[str], keep_going: bool) -> str | None:
    """Run ``snakemake <arguments>``; with ``keep_going`` (verdicts are re-derived too) a failed job stops
    neither the others nor verify: the failure is returned (the rule and its log), and a cell whose job failed is
    missing afterwards, which :func:`recompute` reports."""
    if not keep_going:
        snakemake(profile, folder, *arguments)
        return None
    try:
        snakemake(profile, folder, "--keep-going", *arguments)
    except SnakemakeError as err:
        failed = re.findall(r"Error in rule (\S+):", err.stderr)
        logs = re.findall(r"log: (\S+) \(check log", err.stderr)
        return (f"{', '.join(dict.fromkeys(failed)) or 'a job'} failed"
                + (f" (log: {', '.join(logs)})" if logs else ""))
    return None


def claims_file(profile: str, paper: str) -> str:
    """The claims of ``paper`` in ``profile``'s results: ``<results>/<paper>/claims.json``."""
    return f"{profile_dirs(profile)[0]}/{paper}/claims.json"


def papers_of(cells: Sequence[str], rows: Sequence[Mapping[str, str]], config: Mapping[str, Any]
              ) -> dict[str, list[str]]:
    """The recomputed ``cells`` by paper (the paper whose config ``verify.cells`` names the rule that makes it)."""
    rule_of = {row["output_file"]: row["rule"] for row in rows}
    paper_of_rule = {rule: paper for paper, rules in config["cells"].items() for rule in rules}
    by_paper: dict[str, list[str]] = {}
    for cell in cells:
        paper = paper_of_rule.get(rule_of.get(cell, ""))
        if paper:
            by_paper.setdefault(paper, []).append(cell)
    return by_paper


def rederive_arguments(cells: Sequence[str], claims: Sequence[str]) -> list[str]:
    """Snakemake's arguments that recompute ``cells`` and re-derive the ``claims`` files from them."""
    return ["--forcerun", *cells, "--", *cells, *claims] if claims else ["--force", *cells]


def rederivable(profile: str, folder: Path, cells: Sequence[str], by_paper: Mapping[str, Sequence[str]],
                config: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The papers whose verdicts can be re-derived from the recomputed ``cells`` alone, and for each other one
    why not: its claims read a cell that was not recomputed and is not published (a trained checkpoint), so
    re-deriving them would run further jobs of its cell rules (the dry run of :func:`rederive_arguments`)."""
    papers, reasons = [], {}
    for paper, own in by_paper.items():
        claims = claims_file(profile, paper)
        if not (folder / claims).is_file():
            reasons[paper] = f"{claims} is not published"
            continue
        jobs = dry_run_jobs(snakemake(profile, folder, "--dry-run", *rederive_arguments(own, [claims])).stdout)
        further = [job.rule for job in jobs if job.rule in config["cells"][paper] and not set(job.outputs) & set(own)]
        if further:
            counts = ", ".join(f"{rule} {further.count(rule)}" for rule in dict.fromkeys(further))
            reasons[paper] = (f"re-deriving its verdicts would run {len(further)} further jobs of its cells "
                              f"({counts}); make verify PAPER={paper} recomputes them all")
        else:
            papers.append(paper)
    return papers, reasons


def verdict_changes(published: Mapping[str, Any], recomputed: Mapping[str, Any], rtol: float) -> dict[str, list[str]]:
    """How re-derived claims differ from the published ones: ``verdicts`` (a row's verdict, or an implementation
    check's outcome, changed), ``outside`` (a row's estimate left its published interval by more than ``rtol``)
    and ``moved`` (estimates that changed, inside their intervals)."""
    changes: dict[str, list[str]] = {"verdicts": [], "outside": [], "moved": []}
    again = {row["id"]: row for row in recomputed.get("claims", [])}
    for row in published.get("claims", []):
        new = again.get(row["id"])
        if new is None or new["verdict"] != row["verdict"]:
            changes["verdicts"].append(f"{row['id']}: {row['verdict']} -> {new['verdict'] if new else 'absent'}")
            continue
        old, now = row.get("estimate") or {}, new.get("estimate") or {}
        if old.get("value") == now.get("value") or old.get("value") is None:
            continue
        inside = old["low"] <= now["value"] <= old["high"] or close(old["value"], now["value"], rtol)
        changes["moved" if inside else "outside"].append(
            f"{row['id']}: {old['value']:.6g} -> {now['value']:.6g} in [{old['low']:.6g}, {old['high']:.6g}]")
    checks = {check["id"]: check.get("passed") for check in recomputed.get("checks", [])}
    changes["verdicts"] += [f"check {check['id']}: passed {check.get('passed')} -> {checks.get(check['id'])}"
                            for check in published.get("checks", []) if checks.get(check["id"]) != check.get("passed")]
    return changes


def job_seconds(folder: Path, path: str) -> float | None:
    """The time of the job that made ``path`` (Snakemake's record: end minus start), None without a record."""
    record = folder / metadata_file(path)
    if not record.is_file():
        return None
    data = json.loads(record.read_text(encoding="utf-8"))
    return data["endtime"] - data["starttime"]


def recompute(profile: str, folder: Path, cells: Sequence[str], volatile: frozenset[str], rtol: float = 0.0, *,
              spreads: Mapping[str, Mapping[str, Any]] | None = None, evidence: Mapping[str, Any] | None = None,
              claims: Sequence[str] = ()) -> tuple[list[dict[str, Any]], dict[str, dict[str, list[str]]]]:
    """Recompute ``cells`` (existing result files of ``profile`` in the checkout ``folder``), and re-derive the
    ``claims`` files from them, then compare each with its record; every file and Snakemake record the run rewrote
    is put back afterwards. Returns one row a cell: ``cell``, ``published``, ``recomputed`` (digests), ``result``
    and ``same`` (:func:`judged`, with ``spreads``: config ``verify.spreads``, and ``evidence``, where
    bit-identity is not expected), ``seconds`` (its job's time); and each claims file's
    :func:`verdict_changes`.

    An input the run had to make first (one a publication leaves out: a rescaled sweep model, a converted model, a
    checkpoint) is removed afterwards with its record, so that the checkout is as it was found: left there, it would
    be newer than the published results made from it, and Snakemake would call them stale."""
    missing = [cell for cell in [*cells, *claims] if not (folder / cell).is_file()]
    if missing:
        raise ValueError(f"no published record to compare with: {missing[0]!r} does not exist in {folder}")
    published = {cell: comparable(folder / cell, volatile) for cell in cells}
    published_claims = {name: json.loads((folder / name).read_text(encoding="utf-8")) for name in claims}
    arguments = rederive_arguments(cells, claims)
    planned = planned_files(profile, folder, arguments)
    touched = [p for p in planned["output"] + planned["log"] if (folder / p).is_file()]
    made = [p for p in planned["output"] if not (folder / p).exists()]
    made_records = [folder / metadata_file(p) for p in made if not (folder / metadata_file(p)).exists()]
    with tempfile.TemporaryDirectory(prefix="verify-") as scratch:
        backup = Path(scratch)
        saved = [*touched, *(str(metadata_file(p)) for p in touched if (folder / metadata_file(p)).is_file())]
        for name in saved:
            (backup / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / name, backup / name)
        before = {name: (folder / name).stat().st_mtime_ns for name in claims}
        try:
            failure = rederive(profile, folder, arguments, bool(claims))
            rows = []
            for cell in cells:
                if not (folder / cell).is_file():
                    raise RuntimeError(f"recomputing {cell} failed: {failure}")
                recomputed = comparable(folder / cell, volatile)
                result, same = judged(published[cell], recomputed, rtol, spreads or {}, evidence or {})
                rows.append({"cell": cell, "published": digest(published[cell]), "recomputed": digest(recomputed),
                             "result": result, "seconds": job_seconds(folder, cell), "same": same})
            rederived = {name: verdict_changes(published_claims[name],
                                               json.loads((folder / name).read_text(encoding="utf-8")), rtol)
                         if (folder / name).is_file() and (folder / name).stat().st_mtime_ns != before[name]
                         else {"failed": [failure or "its claims were not rebuilt"]} for name in claims}
        finally:
            for name in saved:
                shutil.copy2(backup / name, folder / name)
            for name in made:
                shutil.rmtree(folder / name) if (folder / name).is_dir() else (folder / name).unlink(missing_ok=True)
            for record in made_records:
                record.unlink(missing_ok=True)
    return rows, rederived


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    width = max([4, *(len(row["cell"]) for row in rows)])
    lines = [f"{'cell':<{width}}  published     recomputed    time      result"]
    for row in rows:
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.1f} s"
        lines.append(f"{row['cell']:<{width}}  {row['published']}  {row['recomputed']}  {seconds:>8}  {row['result']}")
    same = sum(row["same"] is True for row in rows)
    undecided = sum(row["same"] is None for row in rows)
    if undecided:
        lines.append(f"{undecided} of {len(rows)} cells differ where no spread covers them: their papers' re-derived "
                     "verdicts decide")
    if same + undecided < len(rows):
        lines.append(f"{len(rows) - same - undecided} of {len(rows)} cells differ from their records")
    elif same == len(rows):
        exact = all(row["result"] == "identical" for row in rows)
        lines.append(f"{same} of {len(rows)} cells "
                     f"{'identical' if exact else 'agree within the tolerance or their published spreads'}")
    return "\n".join(lines)


def select(args: argparse.Namespace, config: Mapping[str, Any], rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The cells to recompute: ``--cells``, every cell of ``--paper``, or the profile's sample. ValueError naming an
    unknown paper or a cell that is no output of the workflow."""
    outputs = {row["output_file"] for row in rows}
    if args.cells:
        unknown = [cell for cell in args.cells if cell not in outputs]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is no result of profile {args.profile!r} (a path from the repository "
                             "root, e.g. results/<paper>/...)")
        return list(args.cells)
    if args.paper:
        papers = config["cells"]
        if args.paper not in papers:
            raise ValueError(f"unknown paper {args.paper!r}; verify.cells names {', '.join(sorted(papers))}")
        return cells_of(rows, papers[args.paper], args.folder)
    return list(config["sample"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="default", help="a profile of workflow/profiles (default: default)")
    parser.add_argument("--cells", nargs="+", help="result files to recompute (paths from the repository root)")
    parser.add_argument("--paper", help="recompute every cell of this paper (config verify.cells)")
    parser.add_argument("--rtol", type=float, default=None,
                        help="accept numbers within this relative tolerance (default: exact where the records' "
                             "platform is this one, config verify.other_platform_rtol where it is not)")
    parser.add_argument("--list", action="store_true", help="print the cells, recompute nothing")
    parser.add_argument("--folder", type=Path, default=Path("."), help="the checkout (default: here)")
    args = parser.parse_args(argv)
    if args.rtol is not None and (args.rtol < 0 or not math.isfinite(args.rtol)):
        parser.error(f"--rtol must be a finite number >= 0, got {args.rtol}")
    papers = paper_keys(args.folder)
    if args.paper and args.paper not in papers:
        parser.error(f"--paper {args.paper!r} is not a paper of this checkout: {', '.join(papers)}")
    try:
        config = verify_config(args.folder, args.profile)
        rows = summary_rows(args.profile, args.folder)
        cells = select(args, config, rows)
    except (ValueError, RuntimeError) as err:  # an unknown profile or cell; Snakemake's own message
        parser.error(str(err))
    selected = set(cells)
    stale = [row["output_file"] for row in rows if row["output_file"] in selected and row["plan"] == UPDATE]
    if stale:
        print(f"note: {len(stale)} of the cells are stale (make status): the code or config that made them changed, "
              "so a difference is expected", file=sys.stderr)
    if args.list:
        print("\n".join(cells))
        return 0
    recorded = recorded_platforms(args.folder, args.profile)
    # this machine (a torch import) is read only where a published build names its platform
    notice = foreign_notice(recorded, this_platform()) if recorded else None
    if notice:
        print(f"note: {notice}")
    rtol = args.rtol if args.rtol is not None else config["other_platform_rtol"] if notice else 0.0
    by_paper, claims, reasons = papers_of(cells, rows, config), [], {}
    if notice:  # bits are not expected: judge by the published spreads, and re-derive the papers' verdicts
        papers, reasons = rederivable(args.profile, args.folder, cells, by_paper, config)
        claims = [claims_file(args.profile, paper) for paper in papers]
    started = time.monotonic()
    try:
        rows, rederived = recompute(args.profile, args.folder, cells, frozenset(config["volatile"]), rtol,
                                    spreads=config["spreads"] if notice else None,
                                    evidence=workflow_config(args.folder, args.profile)["evidence"], claims=claims)
    except RuntimeError as err:  # a cell's job failed: Snakemake's message, the checkout put back as it was
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(table(rows))
    verdicts_ok = True
    if notice:
        text, verdicts_ok = verdicts_table(args.profile, by_paper, rows, rederived, reasons)
        print(text)
    print(f"profile {args.profile!r}, {len(rows)} cells recomputed in {time.monotonic() - started:.0f} s")
    return 0 if verdicts_ok and all(row["same"] is not False for row in rows) else 1


def verdicts_table(profile: str, by_paper: Mapping[str, Sequence[str]], rows: Sequence[Mapping[str, Any]],
                   rederived: Mapping[str, Mapping[str, list[str]]], reasons: Mapping[str, str]) -> tuple[str, bool]:
    """Per paper whose cells were recomputed: whether its re-derived verdicts are unchanged (and which changed),
    its estimates' moves against their published intervals, or why its verdicts were not re-derived; and whether
    all is well: no verdict changed, no estimate left its interval, and every cell that differs where no spread
    covers it belongs to a paper whose verdicts were re-derived."""
    lines, ok = ["verdicts, re-derived from the recomputed cells (a changed verdict fails):"], True
    undecided = {row["cell"] for row in rows if row["same"] is None}
    for paper, cells in by_paper.items():
        name = claims_file(profile, paper)
        changes = rederived.get(name, {})
        reason = reasons.get(paper) or (changes["failed"][0] if "failed" in changes else None)
        if reason:
            blocking = undecided & set(cells)
            ok &= not blocking
            tail = f"; {len(blocking)} of its cells are undecided, so they fail" if blocking else ""
            lines.append(f"  {paper}: not re-derived: {reason}{tail}")
            continue
        ok &= not changes["verdicts"] and not changes["outside"]
        state = "verdicts unchanged" if not changes["verdicts"] else (
            f"{len(changes['verdicts'])} verdicts changed: " + "; ".join(changes["verdicts"]))
        moved = f"{len(changes['moved'])} estimates moved inside their published intervals"
        outside = (f"; {len(changes['outside'])} left them: " + "; ".join(changes["outside"])
                   if changes["outside"] else "")
        lines.append(f"  {paper} ({name}): {state}; {moved}{outside}")
    return "\n".join(lines), ok


if __name__ == "__main__":
    sys.exit(main())
