"""Quantize-dequantize speed and peak memory on a 4096 x 4096 float32 tensor, side by side in one run.

Cases: our MXFP4, NVFP4, NVFP4 4/6, the plain UE4M3/block-16 rules (absmax, four_over_six, brute_force),
E4M3 and HiF8 per-tensor (FP32 scale, one block per tensor), torch.clone (the memory-bandwidth floor), and
torchao's MX and NVFP4 quantize + dequantize on the CPU. Time: the fastest of 2 x ``--repeats`` calls (see
``time_cases``), all in this process; the minimum is the least noisy estimate of the cost on a shared machine,
the median is printed beside it, and the target ratios use the minimum. Peak extra memory: each case once more
in a fresh subprocess, as the growth of the peak resident set (VmHWM after resetting it) over the input
tensor; the output counts.

Targets (issue 2): MXFP4 and NVFP4 at least as fast as torchao's; four_over_six <= 2.2x absmax; HiF8 <= 2x E4M3
per-tensor; brute_force <= 40x absmax; peak extra memory <= 4x the input for every case of ours.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
from _report import finish, target

from common.quantizers import quantize_tensor
from common.recipes import SPECS
from common.scaling import quantize_blocks

SHAPE = (4096, 4096)


def _torchao_mx(x: torch.Tensor) -> torch.Tensor:
    from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx

    scale, data = to_mx(x, torch.float4_e2m1fn_x2, 32)
    return to_dtype(data, scale, torch.float4_e2m1fn_x2, 32, torch.float32)


def _torchao_nvfp4(x: torch.Tensor) -> torch.Tensor:
    from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

    tensor = NVFP4Tensor.to_nvfp4(x, per_tensor_scale=per_tensor_amax_to_scale(x.abs().amax()))
    return tensor.dequantize(torch.float32)


CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "clone": torch.clone,
    "MXFP4": partial(quantize_tensor, spec=SPECS["MXFP4"]),
    "NVFP4": partial(quantize_tensor, spec=SPECS["NVFP4"]),
    "NVFP4_4over6": partial(quantize_tensor, spec=SPECS["NVFP4_4over6"]),
    "absmax_ue4m3_b16": lambda x: quantize_blocks(x, "e2m1", "ue4m3", 16, "absmax"),
    "four_over_six_ue4m3_b16": lambda x: quantize_blocks(x, "e2m1", "ue4m3", 16, "four_over_six"),
    "brute_force_ue4m3_b16": lambda x: quantize_blocks(x, "e2m1", "ue4m3", 16, "brute_force"),
    "e4m3_per_tensor": lambda x: quantize_blocks(x, "e4m3", "fp32", None),
    "hif8_per_tensor": lambda x: quantize_blocks(x, "hif8", "fp32", None),
    "torchao_MX": _torchao_mx,
    "torchao_NVFP4": _torchao_nvfp4,
}
OURS = [name for name in CASES if name != "clone" and not name.startswith("torchao")]
TARGETS = [  # (label, numerator case, denominator case, limit)
    ("MXFP4 / torchao MX", "MXFP4", "torchao_MX", 1.0),
    ("NVFP4 / torchao NVFP4", "NVFP4", "torchao_NVFP4", 1.0),
    ("four_over_six / absmax", "four_over_six_ue4m3_b16", "absmax_ue4m3_b16", 2.2),
    ("HiF8 / E4M3 (per tensor)", "hif8_per_tensor", "e4m3_per_tensor", 2.0),
    ("brute_force / absmax", "brute_force_ue4m3_b16", "absmax_ue4m3_b16", 40.0),
]
MEMORY_LIMIT = 4.0


def make_input(seed: int = 0) -> torch.Tensor:
    return torch.randn(*SHAPE, generator=torch.Generator().manual_seed(seed))


def time_cases(x: torch.Tensor, repeats: int) -> dict[str, list[float]]:
    """Seconds per call of every case. Each case runs in a steady state of its own (one warm-up, then
    ``repeats`` back-to-back calls), in two rounds, forward then reverse case order, so that a slow spell of the
    shared machine, or the allocator state one case leaves behind, does not fall on one case only."""
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for order in (list(CASES), list(reversed(CASES))):
        for name in order:
            fn = CASES[name]
            fn(x)
            for _ in range(repeats):
                start = time.perf_counter()
                fn(x)
                times[name].append(time.perf_counter() - start)
    return times


def peak_extra_bytes(name: str) -> int:
    """Run one case in a fresh interpreter; return the growth of its peak RSS over the input tensor."""
    out = subprocess.run([sys.executable, __file__, "--memory-case", name], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().splitlines()[-1])


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _memory_case(name: str) -> None:
    """Peak RSS growth of one call: reset the high-water mark (Linux clear_refs 5), run, read VmHWM.

    A fresh interpreter per case, because a warm allocator cache from another case would hide allocations.
    """
    warnings.filterwarnings("ignore")
    CASES[name](torch.randn(64, 64))  # load code paths and caches on a small input first
    x = make_input()
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    CASES[name](x)
    print((_status_kib("VmHWM") - before) * 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--json", type=Path, default=Path("bench/out/quantize.json"))
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_case:
        _memory_case(args.memory_case)
        return
    warnings.filterwarnings("ignore")
    x = make_input()
    input_bytes = x.numel() * x.element_size()
    results = {}
    for name, samples in time_cases(x, args.repeats).items():
        extra = peak_extra_bytes(name)
        results[name] = {"seconds": min(samples), "median_seconds": statistics.median(samples),
                         "peak_extra_bytes": extra, "peak_extra_over_input": extra / input_bytes}
        print(f"{name:26s} {min(samples) * 1e3:9.1f} ms (median {statistics.median(samples) * 1e3:9.1f})"
              f"   peak extra {extra / input_bytes:5.2f} x input", flush=True)
    clone = results["clone"]["seconds"]
    for entry in results.values():
        entry["vs_clone"] = entry["seconds"] / clone
    targets = [target(label, results[num]["seconds"] / results[den]["seconds"], limit)
               for label, num, den, limit in TARGETS]
    worst_memory = max(results[name]["peak_extra_over_input"] for name in OURS)
    targets.append(target("peak extra memory / input (worst of ours)", worst_memory, MEMORY_LIMIT))
    report = {"shape": list(SHAPE), "dtype": "float32", "threads": torch.get_num_threads(),
              "torch": torch.__version__, "repeats": args.repeats, "cases": results, "targets": targets}
    finish(report, args.json)


if __name__ == "__main__":
    main()
