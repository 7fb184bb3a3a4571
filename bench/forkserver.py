"""Start of a pipeline step cold (a fresh ``python -m``) and warm (forked from ``workflow/forkserver.py``'s server,
as the tests' builds run them), side by side.

A build runs each step as a process of its own, and on a CPU a step's imports cost more than most steps' work. Each
row imports what one kind of step imports before it reads its inputs (``bench/_import_step.py``: its entry point,
the modules its step function imports) and exits: the wall time of ``python -m bench._import_step <modules>`` from
the repository root, cold and through a running server (the fastest of ``--repeats`` runs, the least noisy on a
shared machine), and their ratio. The server's own start (its preloading, once per build) is printed above the rows.

Target: a step that loads torch starts warm in at most 0.2 of its cold time. A step that imports next to nothing
(the bare interpreter's row) starts faster cold: a warm start costs the client, the fork and the preloaded
libraries' exit handlers, about 0.25 s; every step of a build imports far more than that.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _report import finish, target
from imports import import_cpu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
from forkserver import WARM_PYTHON, ForkServer  # noqa: E402 (workflow/ is no package)

# kind of step -> what it imports (papers/<paper>/__main__.py, then its step function's own imports)
STEPS = {
    "bare interpreter": (),
    "figure (WinQ)": ("papers.winq.__main__", "common.report.figures", "papers.winq.figures"),
    "claims (Max-Window)": ("papers.maxwindow_hif8.__main__", "common.report", "papers.maxwindow_hif8.claims"),
    "PTQ cells (Finer is Better)": ("papers.finer_is_better.__main__", "papers.finer_is_better.model_study",
                                    "common.models", "common.eval"),
    "evaluation (Max-Window)": ("papers.maxwindow_hif8.__main__", "common.eval.cli", "common.models"),
    "QAT training (WinQ)": ("papers.winq.__main__", "papers.winq.run", "common.train.loop", "common.models"),
}


def start_seconds(python: str, modules: tuple[str, ...], environ: dict[str, str], repeats: int) -> float:
    """The fastest wall time of ``python -m bench._import_step <modules>`` in the repository root."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([python, "-m", "bench._import_step", *modules], cwd=ROOT, env=environ, check=True,
                       stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("bench/out/forkserver.json"))
    args = parser.parse_args()

    environ = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    with ForkServer(environ) as server:
        if server.process is None:
            print("no fork server on a machine with NVIDIA GPUs: every step runs cold there (workflow/forkserver.py)")
            return
        server_start = time.perf_counter() - started
        print(f"server start (preloading, once a build) {server_start:6.2f} s\n")
        warm_python = str(Path(server.environ()[WARM_PYTHON]) / "python")
        print(f"{'step':30s} {'loads':>5s} {'cold s':>7s} {'warm s':>7s} {'warm / cold':>11s}")
        steps = {}
        for name, modules in STEPS.items():
            cold = start_seconds(sys.executable, modules, environ, args.repeats)
            warm = start_seconds(warm_python, modules, server.environ(), args.repeats)
            heavy = import_cpu(modules)[1]  # whether the step loads torch or transformers
            steps[name] = {"cold_seconds": cold, "warm_seconds": warm, "warm_over_cold": warm / cold,
                           "loads_torch_transformers": heavy}
            print(f"{name:30s} {'torch' if heavy else '-':>5s} {cold:7.2f} {warm:7.2f} {warm / cold:11.2f}",
                  flush=True)
    heavy_steps = [row["warm_over_cold"] for row in steps.values() if row["loads_torch_transformers"]]
    targets = [target("warm / cold start, steps loading torch (max)", max(heavy_steps), 0.2)]
    finish({"repeats": args.repeats, "server_start_seconds": server_start, "steps": steps, "targets": targets},
           args.json)


if __name__ == "__main__":
    main()
