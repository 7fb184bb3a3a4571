"""What the pinned numerical paths (envs/numerics.env) cost, side by side in one run: each case timed in a process
under the pins and in one without them (the CPU's own oneMKL and ATen dispatch).

Cases (one thread; random weights: time does not depend on them):
  * sgemm: a (2048 x 576) @ (576 x 1536) float32 matrix product, the roofline of the steps' linears;
  * train_tiny_tied / train_small: forward + backward + AdamW step, 4 x 128 tokens (tiny_tied, vocabulary 8192) and
    8 x 256 tokens (small), the shapes of the QAT runs and of pretraining;
  * eval_small: a forward pass of `small` without gradients, 8 x 256 tokens, as the PTQ and perplexity cells run.
Each process times ``--repeats`` iterations per case after one warm-up; the two processes run twice, in alternating
order, and the fastest iteration counts. The ratio is pinned / unpinned time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's workflow/, which holds the pins
from common.io import write_json
from workflow.build_platform import numerical_pins, pinned_environment, unpinned_environment

VOCAB = 8192


def cases() -> dict[str, Callable[[], None]]:
    """Each case's one iteration, set up once."""
    import torch
    from _vocab import SyntheticVocab

    from common.models import build_model
    from common.train import causal_lm_loss

    torch.manual_seed(0)
    a, b = torch.randn(2048, 576), torch.randn(576, 1536)

    def train_step(architecture: str, batch: int, seq: int) -> Callable[[], None]:
        model = build_model(architecture, SyntheticVocab(VOCAB), seed=0)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        tokens = torch.randint(0, VOCAB, (batch, seq + 1))

        def run() -> None:
            causal_lm_loss(model, tokens).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return run

    eval_model = build_model("small", SyntheticVocab(VOCAB), seed=0).eval()
    eval_tokens = torch.randint(0, VOCAB, (8, 256))

    def evaluate() -> None:
        with torch.no_grad():
            eval_model(input_ids=eval_tokens)

    return {"sgemm": lambda: a @ b, "train_tiny_tied": train_step("tiny_tied", 4, 128),
            "train_small": train_step("small", 8, 256), "eval_small": evaluate}


def time_cases(repeats: int) -> dict[str, float]:
    """The fastest of ``repeats`` timed iterations of each case, after one warm-up, in this process."""
    import torch

    torch.set_num_threads(1)
    best = {}
    for name, run in cases().items():
        run()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        best[name] = min(times)
    return best


def child(pinned: bool, repeats: int) -> dict[str, float]:
    environ = pinned_environment() if pinned else unpinned_environment()
    done = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(repeats)], env=environ,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path("bench/out/numerics.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(time_cases(args.repeats)))
        return
    runs: dict[str, list[dict[str, float]]] = {"pinned": [], "unpinned": []}
    for order in (("unpinned", "pinned"), ("pinned", "unpinned")):
        for variant in order:
            runs[variant].append(child(variant == "pinned", args.repeats))
    best = {variant: {name: min(run[name] for run in found) for name in found[0]} for variant, found in runs.items()}
    print(f"{'case':16s} {'unpinned':>11s} {'pinned':>11s} {'pinned/unpinned':>16s}")
    ratios = {}
    for name in best["pinned"]:
        ratios[name] = best["pinned"][name] / best["unpinned"][name]
        print(f"{name:16s} {best['unpinned'][name] * 1e3:8.1f} ms {best['pinned'][name] * 1e3:8.1f} ms "
              f"{ratios[name]:16.2f}")
    report = {"pins": numerical_pins(), "threads": 1, "seconds": best, "pinned_over_unpinned": ratios}
    write_json(args.json, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
