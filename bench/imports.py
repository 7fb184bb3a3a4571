"""Start-up CPU of the pipeline steps that only read records, side by side with the same step loading torch and
transformers as every step did before the packages of ``common`` imported their heavy parts on use.

A build runs each step as a process of its own (``python -m papers.<paper> figure|claims|context ...``,
``python -m common.report render ...``), and most of them read a few JSON files and draw or write one artifact, so
their cost is the interpreter and its imports. Each row is the CPU time (user + system, of the child process) of a
fresh interpreter importing what the step imports before it reads its inputs (its entry point and the modules its
step function imports), then the same plus ``torch`` and ``transformers`` (what it cost when every step loaded them,
:mod:`common.lazy`), and the ratio. Above the rows: the bare interpreter and ``import torch, transformers`` alone. A
step marked ``torch`` still loads them: the WinQ claims and context read the base model's weights and config, and
the Max-Window and microscaling claims import the layer selection (``common.select``) and the rescaling plans
(``common.models``), which load torch at import. Time: the fastest of ``--repeats`` runs (the least noisy on a shared
machine), the median beside it.

Targets: no figure step, and none of the other steps that read records only (:data:`RECORD_ONLY`), loads torch or
transformers.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from _report import finish, target

ROOT = Path(__file__).resolve().parents[1]
PAPERS = sorted(p.parent.name for p in (ROOT / "papers").glob("*/rules.smk"))
# step -> what it imports (papers/<paper>/__main__.py: the entry point, then the step function's own imports)
STEPS = {
    **{f"{paper} figure": (f"papers.{paper}.__main__", "common.report.figures", f"papers.{paper}.figures")
       for paper in PAPERS},
    **{f"{paper} claims": (f"papers.{paper}.__main__", "common.report", f"papers.{paper}.claims",
                           f"papers.{paper}.regime") for paper in PAPERS},
    **{f"{paper} context": (f"papers.{paper}.__main__", "common.report", f"papers.{paper}.context",
                            f"papers.{paper}.figures") for paper in PAPERS},
    "report render": ("common.report.__main__",),
}
STEP_EXTRAS = {"winq claims": ("common.models", "common.ptq.checkpoint"), "winq context": ("papers.winq.regime",),
               "microscaling_limits claims": ("papers.microscaling_limits.sweep",)}
# the steps that read records only and load neither torch nor transformers
RECORD_ONLY = (*(f"{paper} figure" for paper in PAPERS), "finer_is_better claims",
               *(f"{paper} context" for paper in PAPERS if paper != "winq"), "report render")
HEAVY = ("torch", "transformers")
FLOORS = {"bare interpreter": (), "torch + transformers": HEAVY}


def import_cpu(modules: tuple[str, ...]) -> tuple[float, bool]:
    """(CPU seconds of a fresh interpreter importing ``modules``, whether it loaded torch or transformers)."""
    script = f"import sys{''.join(f', {m}' for m in modules)}; print(any(n in sys.modules for n in {HEAVY!r}))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, run.stdout.strip() == "True"


def measure(modules: tuple[str, ...], repeats: int) -> dict[str, float | bool]:
    runs = [import_cpu(modules) for _ in range(repeats)]
    times = [seconds for seconds, _ in runs]
    return {"seconds": min(times), "median_seconds": statistics.median(times), "loads_torch": runs[0][1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("bench/out/imports.json"))
    args = parser.parse_args()

    floors = {name: measure(modules, args.repeats) for name, modules in FLOORS.items()}
    for name, row in floors.items():
        print(f"{name:28s} {row['seconds']:6.2f} s (median {row['median_seconds']:.2f})")
    heavy = floors["torch + transformers"]["seconds"]
    print(f"\n{'step':28s} {'loads':>5s} {'now s':>6s} {'median':>6s} {'+torch+tf s':>11s} {'now / +torch+tf':>15s}")
    steps = {}
    for name, modules in STEPS.items():
        modules = (*modules, *STEP_EXTRAS.get(name, ()))
        now, before = measure(modules, args.repeats), measure((*modules, *HEAVY), args.repeats)
        steps[name] = {**now, "with_torch_transformers_seconds": before["seconds"],
                       "over_with_torch_transformers": now["seconds"] / before["seconds"],
                       "over_torch_transformers": now["seconds"] / heavy}
        print(f"{name:28s} {'torch' if now['loads_torch'] else '-':>5s} {now['seconds']:6.2f} "
              f"{now['median_seconds']:6.2f} {before['seconds']:11.2f} {now['seconds'] / before['seconds']:15.2f}",
              flush=True)
    record_only = [steps[name] for name in RECORD_ONLY]
    targets = [target("figure steps loading torch or transformers",
                      sum(steps[f"{paper} figure"]["loads_torch"] for paper in PAPERS), 0),
               target("record-only steps loading torch or transformers", sum(r["loads_torch"] for r in record_only),
                      0)]
    print(f"\nrecord-only steps: {sum(r['seconds'] for r in record_only):.1f} s of CPU to start, "
          f"{sum(r['with_torch_transformers_seconds'] for r in record_only):.1f} s with torch and transformers")
    finish({"repeats": args.repeats, "floors": floors, "steps": steps, "record_only_steps": list(RECORD_ONLY),
            "targets": targets}, args.json)


if __name__ == "__main__":
    main()
