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
any other file byte for byte. The expectation is bit-identical on the platform the records were built on (a CPU and
the pinned ``torch==2.13.0``): the steps are seeded and single-threaded where order matters. On another platform
(another CPU's vector units, a GPU, another BLAS) floating-point reductions may sum in another order. So where the
published build's recorded platform (:mod:`workflow.build_platform`, written by ``make publish``) is not this
machine's, numbers are compared within config ``verify.other_platform_rtol``, with a note naming both platforms;
``--rtol R`` sets the tolerance whatever the platform. A row within the tolerance says so (``within rtol R``),
never identical."""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from common.config import merged, profile_overrides
from common.report.summary import paper_keys
from workflow.build_platform import recorded_platforms, this_platform, tolerance
from workflow.published_mtimes import metadata_file
from workflow.status import UPDATE, dry_run_jobs, snakemake, summary_rows

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


def planned_files(profile: str, folder: Path, cells: Sequence[str]) -> dict[str, list[str]]:
    """Every output and log the jobs of ``snakemake --force <cells>`` would write (from its dry run,
    ``workflow.status.dry_run_jobs``): ``{"output": [...], "log": [...]}``."""
    jobs = dry_run_jobs(snakemake(profile, folder, "--force", "--dry-run", *cells).stdout)
    return {"output": list(dict.fromkeys(name for job in jobs for name in job.outputs)),
            "log": list(dict.fromkeys(name for job in jobs for name in job.logs))}


def job_seconds(folder: Path, path: str) -> float | None:
    """The time of the job that made ``path`` (Snakemake's record: end minus start), None without a record."""
    record = folder / metadata_file(path)
    if not record.is_file():
        return None
    data = json.loads(record.read_text(encoding="utf-8"))
    return data["endtime"] - data["starttime"]


def recompute(profile: str, folder: Path, cells: Sequence[str], volatile: frozenset[str],
              rtol: float = 0.0) -> list[dict[str, Any]]:
    """Recompute ``cells`` (existing result files of ``profile`` in the checkout ``folder``) and compare each with
    its record; every file and Snakemake record the run rewrote is put back afterwards. One row a cell: ``cell``,
    ``published``, ``recomputed`` (digests), ``result`` (``identical``, ``within <rtol>`` or the first difference),
    ``seconds`` (its job's time) and ``same`` (bool).

    An input the run had to make first (one a publication leaves out: a rescaled sweep model, a converted model, a
    checkpoint) is removed afterwards with its record, so that the checkout is as it was found: left there, it would
    be newer than the published results made from it, and Snakemake would call them stale."""
    missing = [cell for cell in cells if not (folder / cell).is_file()]
    if missing:
        raise ValueError(f"no published record to compare with: {missing[0]!r} does not exist in {folder}")
    published = {cell: comparable(folder / cell, volatile) for cell in cells}
    planned = planned_files(profile, folder, cells)
    touched = [p for p in planned["output"] + planned["log"] if (folder / p).is_file()]
    made = [p for p in planned["output"] if not (folder / p).exists()]
    made_records = [folder / metadata_file(p) for p in made if not (folder / metadata_file(p)).exists()]
    with tempfile.TemporaryDirectory(prefix="verify-") as scratch:
        backup = Path(scratch)
        saved = [*touched, *(str(metadata_file(p)) for p in touched if (folder / metadata_file(p)).is_file())]
        for name in saved:
            (backup / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / name, backup / name)
        try:
            snakemake(profile, folder, "--force", *cells)
            rows = []
            for cell in cells:
                recomputed = comparable(folder / cell, volatile)
                difference = first_difference(published[cell], recomputed, rtol)
                exact = published[cell] == recomputed
                result = "identical" if exact else f"within rtol {rtol:g}" if difference is None else difference
                rows.append({"cell": cell, "published": digest(published[cell]), "recomputed": digest(recomputed),
                             "result": result, "seconds": job_seconds(folder, cell), "same": difference is None})
        finally:
            for name in saved:
                shutil.copy2(backup / name, folder / name)
            for name in made:
                shutil.rmtree(folder / name) if (folder / name).is_dir() else (folder / name).unlink(missing_ok=True)
            for record in made_records:
                record.unlink(missing_ok=True)
    return rows


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    width = max([4, *(len(row["cell"]) for row in rows)])
    lines = [f"{'cell':<{width}}  published     recomputed    time      result"]
    for row in rows:
        seconds = "-" if row["seconds"] is None else f"{row['seconds']:.1f} s"
        lines.append(f"{row['cell']:<{width}}  {row['published']}  {row['recomputed']}  {seconds:>8}  {row['result']}")
    same = sum(row["same"] for row in rows)
    if same < len(rows):
        lines.append(f"{len(rows) - same} of {len(rows)} cells differ from their records")
    else:
        exact = all(row["result"] == "identical" for row in rows)
        lines.append(f"{same} of {len(rows)} cells {'identical' if exact else 'agree within the tolerance'}")
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
    rtol, recorded = args.rtol, recorded_platforms(args.folder, args.profile)
    if rtol is None:  # this machine (a torch import) is read only where a published build names its platform
        rtol, notice = tolerance(recorded, this_platform(), config["other_platform_rtol"]) if recorded else (0.0, None)
        if notice:
            print(f"note: {notice}")
    started = time.monotonic()
    rows = recompute(args.profile, args.folder, cells, frozenset(config["volatile"]), rtol)
    print(table(rows))
    print(f"profile {args.profile!r}, {len(rows)} cells recomputed in {time.monotonic() - started:.0f} s")
    return 0 if all(row["same"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
