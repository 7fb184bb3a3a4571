"""HiF8 W8A8 QAT training step (quantized gradients, delayed scaling) vs the plain FP32 step, side by side in one run.

Cases (the `small` architecture, vocabulary 8192, batch 16 x 256 tokens, random weights: throughput does not
depend on the weights), each a forward + backward + AdamW step:
  * train: unquantized;
  * train_hif8_w8a8: ``common.quantization.prepare`` of a ``DelayedScalingRecipe`` on the paper's selection (MLP
    gate/up/down, first and last blocks skipped in proportion, ``w8a8_selection``): inputs, weights and output
    gradients HiF8 with per-tensor delayed scales (max_window observer), telemetry on.
After one warm-up each, the cases alternate, ``2 x --repeats`` timed iterations each (order reversed every other
time, so that load drift on a shared machine hits both alike); the fastest iteration counts. Process CPU time is
reported beside it (less sensitive to other processes on the machine).
Target (issue 6): the QAT step <= 1.5x the FP32 step.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from _report import finish, target
from _vocab import SyntheticVocab

from common.models import build_model, count_parameters
from common.quantization import prepare
from common.quantizers import w8a8_selection
from common.recipes import DelayedScalingRecipe
from common.train import causal_lm_loss

VOCAB, SEQ, BATCH = 8192, 256, 16
TARGET = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("bench/out/qat_hif8.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch = torch.randint(0, VOCAB, (BATCH, SEQ + 1)).to(device)
    models = {name: build_model("small", SyntheticVocab(VOCAB), seed=0).to(device).train()
              for name in ("train", "train_hif8_w8a8")}
    names = w8a8_selection(models["train_hif8_w8a8"])
    handle = prepare(models["train_hif8_w8a8"], DelayedScalingRecipe(format="hif8", observer="max_window"), names=names)
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-4) for name, model in models.items()}
    steps = {name: 0 for name in models}

    def train_step(name: str) -> Callable[[], None]:
        def run() -> None:
            handle.step(steps[name])
            steps[name] += 1
            causal_lm_loss(models[name], batch).backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize()
        return run

    cases = {name: train_step(name) for name in models}
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu_times: dict[str, list[float]] = {name: [] for name in cases}
    for case in cases.values():
        case()  # warm-up
    for repeat in range(2 * args.repeats):  # interleaved, alternating order: load drift hits both cases alike
        for name in list(cases) if repeat % 2 == 0 else list(reversed(cases)):
            start, cpu_start = time.perf_counter(), time.process_time()
            cases[name]()
            times[name].append(time.perf_counter() - start)
            cpu_times[name].append(time.process_time() - cpu_start)
    tokens = BATCH * SEQ
    results = {name: {"seconds_per_batch": min(t), "tokens_per_second": tokens / min(t),
                      "cpu_seconds_per_batch": min(cpu_times[name])} for name, t in times.items()}
    ratio = results["train_hif8_w8a8"]["seconds_per_batch"] / results["train"]["seconds_per_batch"]
    cpu_ratio = results["train_hif8_w8a8"]["cpu_seconds_per_batch"] / results["train"]["cpu_seconds_per_batch"]
    rows = handle.telemetry_rows()
    report = {"model": "small", "parameters": count_parameters(models["train"]), "quantized_modules": len(names),
              "batch": BATCH, "seq_len": SEQ, "device": device.type, "threads": torch.get_num_threads(),
              "cases": results, "cpu_time_ratio": cpu_ratio, "telemetry_rows": len(rows),
              "overflow_events": sum(bool(row["overflow"]) for row in rows),
              "targets": [target("train HiF8 W8A8 QAT / train FP32", ratio, TARGET)]}
    for name, entry in results.items():
        milliseconds = entry["seconds_per_batch"] * 1e3
        print(f"{name:16s} {entry['tokens_per_second']:9.0f} tokens/s  ({milliseconds:7.1f} ms/batch)")
    finish(report, args.json)


if __name__ == "__main__":
    main()
