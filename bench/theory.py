"""Analytic block MSE (common.theory) against Monte Carlo of the same accuracy: time per point, side by side.

Theory: ``block_mse`` over the issue's grid (41 log-spaced sigmas in [1e-5, 1] x block sizes 4..256 x UE4M3/UE5M3
x absmax/prevent_zero, Normal data, E2M1 elements), the average per point once the per-format grids are cached,
and the first (cold) call. Laplace and Student-t (df 5) averages are printed beside it. Accuracy: the largest
relative difference from a high-precision reference, the same integral with 32 instead of 8 Gauss-Legendre
nodes per sub-interval (the test suite also checks an independent nested-quad oracle to ~1e-14).

Monte Carlo: for a subset of points, ``quantize_blocks`` on seeded Normal draws with enough samples for a
relative standard error of ``--accuracy`` (0.1% by default; the theory's error is far smaller, so this favours
Monte Carlo). A 2^18-sample pilot gives the per-sample relative spread ``c`` of the per-block squared error; the
run then draws ``N = c^2 / accuracy^2`` samples (a multiple of 4096) and is timed including the draw. Points that
need more than ``--max-samples`` run that many and their time is scaled linearly to ``N`` (marked "extrapolated").
Both sides run on one thread (numpy is single-threaded; torch is set to 1 thread, which is also much faster than
two on a busy 2-core machine). Speedup = Monte Carlo time / theory time, per point and in total.

Targets: theory <= 10 ms per point (normal); theory error vs the reference <= the Monte Carlo accuracy; theory
time <= 10% of Monte Carlo's at equal accuracy (speedup >= 10).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from _report import finish, target

from common.analysis import sigma_grid
from common.scaling import quantize_blocks
from common.theory import block_mse

BLOCK_SIZES = (4, 8, 16, 32, 64, 128, 256)
SETTINGS = [(scale, rule) for scale in ("ue4m3", "ue5m3") for rule in ("absmax", "prevent_zero")]
MC_POINTS = [(sigma, n) for sigma in (0.002, 0.005, 0.02, 0.1, 1.0) for n in (4, 16, 64, 256)]
ROW = 4096
CHUNK_ROWS = 1024  # 4M samples per quantize_blocks call


def theory_grid(dist: str = "normal", df: float | None = None) -> tuple[float, float, int]:
    """(mean seconds per point, seconds of the first call, points) over the grid; the first call of the process
    is cold (it fills the format and quantile caches)."""
    start = time.perf_counter()
    block_mse(0.01, 16, dist=dist, df=df)
    cold = time.perf_counter() - start
    points = [(float(s), n, scale, rule) for scale, rule in SETTINGS for n in BLOCK_SIZES for s in sigma_grid()]
    start = time.perf_counter()
    for sigma, n, scale, rule in points:
        block_mse(sigma, n, scale=scale, rule=rule, dist=dist, df=df)
    return (time.perf_counter() - start) / len(points), cold, len(points)


def theory_error() -> float:
    """Largest relative difference of the default integration from the 32-node reference over the grid."""
    worst = 0.0
    for scale, rule in SETTINGS:
        for n in BLOCK_SIZES:
            for sigma in sigma_grid():
                base = block_mse(float(sigma), n, scale=scale, rule=rule)["total"]
                ref = block_mse(float(sigma), n, scale=scale, rule=rule, order=32)["total"]
                worst = max(worst, abs(base / ref - 1))
    return worst


def monte_carlo(sigma: float, n: int, samples: int, seed: int) -> tuple[float, float]:
    """(mse, relative standard error) of ``samples`` Normal values, drawn and quantized in chunks."""
    generator = torch.Generator().manual_seed(seed)
    sums = []
    for start in range(0, samples // ROW, CHUNK_ROWS):
        rows = min(CHUNK_ROWS, samples // ROW - start)
        x = torch.randn(rows, ROW, generator=generator) * sigma
        q = quantize_blocks(x, "e2m1", "ue4m3", n, "absmax")
        sums.append((x - q).square().reshape(-1, n).sum(dim=1, dtype=torch.float64))
    block_sse = torch.cat(sums)
    mean = float(block_sse.mean())
    return mean / n, float(block_sse.std()) / math.sqrt(block_sse.numel()) / mean


def compare_point(sigma: float, n: int, accuracy: float, max_samples: int) -> dict:
    _, pilot_rse = monte_carlo(sigma, n, 1 << 18, seed=1)
    needed = max(ROW, math.ceil((1 << 18) * (pilot_rse / accuracy) ** 2 / ROW) * ROW)
    run = min(needed, max_samples)
    start = time.perf_counter()
    mse, rse = monte_carlo(sigma, n, run, seed=2)
    mc_seconds = (time.perf_counter() - start) * needed / run
    repeats = 20
    start = time.perf_counter()
    for _ in range(repeats):
        theory = block_mse(sigma, n)["total"]
    theory_seconds = (time.perf_counter() - start) / repeats
    return {"sigma": sigma, "block_size": n, "theory": theory, "mc": mse, "mc_relative_se": rse,
            "mc_samples": needed, "extrapolated": needed > run, "theory_seconds": theory_seconds,
            "mc_seconds": mc_seconds, "speedup": mc_seconds / theory_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accuracy", type=float, default=1e-3, help="Monte Carlo relative standard error")
    parser.add_argument("--max-samples", type=int, default=1 << 25)
    parser.add_argument("--json", type=Path, default=Path("bench/out/theory.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)

    per_point, cold, points = theory_grid()
    others = {name: theory_grid(dist, df)[0] for name, dist, df in
              (("laplace", "laplace", None), ("student_t(5)", "student_t", 5.0))}
    error = theory_error()
    print(f"theory, normal: {per_point * 1e3:.2f} ms per point over {points} points (first call {cold * 1e3:.1f} ms)"
          + "".join(f"; {name}: {t * 1e3:.2f} ms" for name, t in others.items()))
    print(f"theory error vs 32-node reference: {error:.1e} (max relative over the grid)\n")
    print(f"{'sigma':>7s} {'n':>4s} {'MC samples':>12s} {'MC ms':>10s} {'theory ms':>10s} {'speedup':>9s}"
          f" {'MC-theory':>10s}")
    rows = []
    for sigma, n in MC_POINTS:
        row = compare_point(sigma, n, args.accuracy, args.max_samples)
        rows.append(row)
        print(f"{sigma:7.3f} {n:4d} {row['mc_samples']:12d} {row['mc_seconds'] * 1e3:10.1f}"
              f" {row['theory_seconds'] * 1e3:10.2f} {row['speedup']:9.0f} {row['mc'] / row['theory'] - 1:+10.4f}"
              f"{'  (extrapolated)' if row['extrapolated'] else ''}", flush=True)
    mc_total = sum(r["mc_seconds"] for r in rows)
    theory_total = sum(r["theory_seconds"] for r in rows)
    speedups = [r["speedup"] for r in rows]
    print(f"\ntotal: MC {mc_total:.1f} s, theory {theory_total * 1e3:.1f} ms, speedup {mc_total / theory_total:.0f}x"
          f" (per point: median {statistics.median(speedups):.0f}x, min {min(speedups):.0f}x)")
    targets = [
        target("theory ms / point (normal, 41x7x2x2 grid)", per_point * 1e3, 10.0),
        target("theory error vs reference / MC accuracy", error / args.accuracy, 1.0),
        target("theory / MC time at equal accuracy (%)", 100 * theory_total / mc_total, 10.0),
    ]
    report = {"threads": torch.get_num_threads(), "torch": torch.__version__, "numpy": np.__version__,
              "grid_points": points, "theory_seconds_per_point": per_point, "theory_first_call_seconds": cold,
              "theory_seconds_per_point_other": others, "theory_error_vs_reference": error,
              "mc_accuracy": args.accuracy, "mc_max_samples": args.max_samples, "points": rows,
              "mc_total_seconds": mc_total, "theory_total_seconds": theory_total,
              "speedup_total": mc_total / theory_total, "speedup_median": statistics.median(speedups),
              "speedup_min": min(speedups), "targets": targets}
    finish(report, args.json)


if __name__ == "__main__":
    main()
