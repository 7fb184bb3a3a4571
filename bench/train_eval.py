"""Training and evaluation throughput of the `small` base model on this machine, side by side in one run.

Cases (all on the `small` architecture, vocabulary 8192, sequences of 256 tokens, batch 8, random weights:
throughput does not depend on the weights):
  * train: forward + backward + AdamW step, tokens/s, unquantized and with MXFP4 fake quantization (STE,
    ``common.qat``) of the weights and inputs of the MLP linears;
  * eval: forward without gradients, tokens/s, unquantized and with MXFP4 fake quantization of the weights and
    input activations of the MLP linears (``common.ptq``, the same harness as the PTQ pipeline).
Each case runs ``--repeats`` timed iterations after one warm-up, in two rounds (forward then reverse order);
the fastest iteration counts. Target (issue 3): fake-quant evaluation <= 1.5x the unquantized time.
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
from common.quantization import prepare, quantize_
from common.recipes import get_recipe
from common.train import causal_lm_loss

VOCAB, SEQ, BATCH = 8192, 256, 8
TARGET = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("bench/out/train_eval.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    batch = torch.randint(0, VOCAB, (BATCH, SEQ + 1))
    train_model = build_model("small", SyntheticVocab(VOCAB), seed=0)
    optimizer = torch.optim.AdamW(train_model.parameters(), lr=1e-4)
    eval_model = build_model("small", SyntheticVocab(VOCAB), seed=0).eval()
    quant_model = build_model("small", SyntheticVocab(VOCAB), seed=0).eval()
    recipe = get_recipe("MXFP4", activations=True)
    names = quantize_(quant_model, recipe).names  # the recipe's default layers (common.select.select_linears)
    qat_model = build_model("small", SyntheticVocab(VOCAB), seed=0)
    prepare(qat_model, recipe, names=names)
    qat_optimizer = torch.optim.AdamW(qat_model.parameters(), lr=1e-4)

    def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable[[], None]:
        def run() -> None:
            causal_lm_loss(model, batch).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return run

    def eval_step(model: torch.nn.Module) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                model(input_ids=batch[:, :-1])
        return run

    cases = {"train": train_step(train_model, optimizer), "train_mxfp4_mlp": train_step(qat_model, qat_optimizer),
             "eval": eval_step(eval_model), "eval_mxfp4_mlp": eval_step(quant_model)}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for order in (list(cases), list(reversed(cases))):
        for name in order:
            cases[name]()
            for _ in range(args.repeats):
                start = time.perf_counter()
                cases[name]()
                times[name].append(time.perf_counter() - start)
    tokens = BATCH * SEQ
    results = {name: {"seconds_per_batch": min(t), "tokens_per_second": tokens / min(t)} for name, t in times.items()}
    ratio = results["eval_mxfp4_mlp"]["seconds_per_batch"] / results["eval"]["seconds_per_batch"]
    train_ratio = results["train_mxfp4_mlp"]["seconds_per_batch"] / results["train"]["seconds_per_batch"]
    report = {"model": "small", "parameters": count_parameters(eval_model), "quantized_modules": len(names),
              "batch": BATCH, "seq_len": SEQ, "threads": torch.get_num_threads(), "cases": results,
              "train_fake_quant_over_train": train_ratio,
              "targets": [target("eval MXFP4 fake-quant / eval", ratio, TARGET)]}
    for name, entry in results.items():
        milliseconds = entry["seconds_per_batch"] * 1e3
        print(f"{name:16s} {entry['tokens_per_second']:9.0f} tokens/s  ({milliseconds:7.1f} ms/batch)")
    finish(report, args.json)


if __name__ == "__main__":
    main()
