"""Fingerprints: a few cheap cells computed under the pinned numerical paths, whose digests are committed, so that
any machine can show it computes the bits every other one does (``workflow/build_platform.py``).

``python -m workflow.fingerprints`` computes the cells of :data:`CELLS` from published inputs (the base model
``tiny_tied``, the ``sotu`` corpus and its zero-shot tasks) in a child process under :data:`PINS_FILE`'s pins and
compares each with :data:`RECORD`: a PTQ evaluation (NVFP4 weights and activations of the MLP, perplexity over four
windows), a short QAT run of each training recipe the papers use (three AdamW steps of ``common.train.train``: HiF8
W8A8 with delayed scaling, ParetoQ W2) and a zero-shot cell (the log-likelihoods of cloze and multiple-choice
requests). Exit 1 when a cell differs.

* ``--record``: after a check that passes, add this CPU to the record's ``checked_on`` (vendor, model, vector
  instruction sets, date);
* ``--update``: write this machine's values as the record (a change of numerics), ``checked_on`` this CPU alone;
* ``--unpinned``: compute without the pins (the negative control: the digests then follow the CPU's dispatch).

A machine of a vendor the record does not name runs ``--record`` and commits the entry it adds
(docs/pipeline.md#numerical-paths).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from common.io import write_json
from workflow.build_platform import (
    PINS_FILE,
    ROOT,
    numerical_pins,
    pinned_environment,
    this_cpu,
    unpinned_environment,
)
from workflow.verify import first_difference

RECORD = "workflow/fingerprints.json"
MODEL = "results/models/base/tiny_tied"  # published, as the corpus and tasks below
TEST_SPLIT = "data/corpora/sotu/test.jsonl"
TRAIN_SPLIT = "data/corpora/sotu/train.jsonl"
CLOZE, CHOICE = "results/tasks/sotu/cloze.jsonl", "results/tasks/sotu/choice.jsonl"
MLP = r"mlp\.(gate_proj|up_proj|down_proj)$"


def first_lines(path: Path, count: int) -> list[str]:
    """The first ``count`` lines of text file ``path`` (a JSONL split's first documents), read no further."""
    with path.open(encoding="utf-8") as lines:
        return [next(lines) for _ in range(count)]


def ptq_evaluation() -> dict[str, Any]:
    """Perplexity of ``tiny_tied`` with NVFP4 weights and activations on its MLP linears, over the first 1024
    tokens of the test split's first two documents (four windows of 256): the PTQ cells' function,
    ``fake_quant_perplexity``."""
    from common.eval import fake_quant_perplexity
    from common.recipes import get_recipe

    with tempfile.TemporaryDirectory(prefix="fingerprint-") as folder:
        split = Path(folder) / "test.jsonl"
        split.write_text("".join(first_lines(ROOT / TEST_SPLIT, 2)), encoding="utf-8")
        record = fake_quant_perplexity(ROOT / MODEL, split, get_recipe("NVFP4", activations=True), include=MLP,
                                       window=256, stride=256, max_tokens=1024, batch_size=4)
    ppl = record["metrics"]["perplexity"]
    return {key: ppl[key] for key in ("mean_nll", "window_nll", "window_tokens")}


def qat_run(recipe: str) -> dict[str, Any]:
    """Three AdamW steps of ``common.train.train`` (4 sequences of 128 tokens, seed 0, from the train split's first
    two documents) of ``tiny_tied`` prepared for QAT with ``recipe``: each step's loss and the SHA-256 of the
    trained weights."""
    import torch

    from common.data import read_jsonl, token_stream
    from common.models import load_model
    from common.quantization import prepare
    from common.train import TrainConfig, train

    model, tokenizer = load_model(ROOT / MODEL)
    prepare(model, recipe)
    tokens = token_stream(tokenizer, read_jsonl(ROOT / TRAIN_SPLIT)[:2])
    config = TrainConfig(max_steps=3, seq_len=128, micro_batch_size=4, lr=1e-3, progress=False)
    with tempfile.TemporaryDirectory(prefix="fingerprint-") as run_dir:
        train(model, tokens, config, run_dir, device=torch.device("cpu"))
        losses = [float(row.split(",")[1]) for row in
                  (Path(run_dir) / "train_log.csv").read_text(encoding="utf-8").splitlines()[1:]]
    weights = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        weights.update(name.encode() + tensor.detach().contiguous().numpy().tobytes())
    return {"losses": losses, "weights_sha256": weights.hexdigest()}


def zero_shot() -> dict[str, Any]:
    """The log-likelihoods of the first 16 cloze requests and of the choices of the first 8 multiple-choice
    examples (``common.eval.loglikelihoods``, as the zero-shot cells score them)."""
    from common.eval import read_task
    from common.eval.zeroshot import TARGET_DELIMITER, loglikelihoods
    from common.models import load_model

    model, tokenizer = load_model(ROOT / MODEL)
    cloze = [(ex["context"], ex["target"]) for ex in read_task(ROOT / CLOZE)[:16]]
    choice = [(ex["context"], TARGET_DELIMITER + c) for ex in read_task(ROOT / CHOICE)[:8] for c in ex["choices"]]
    return {name: [ll for ll, _, _ in loglikelihoods(model, tokenizer, requests, 8, None)[0]]
            for name, requests in (("cloze", cloze), ("choice", choice))}


CELLS: dict[str, Callable[[], dict[str, Any]]] = {
    "ptq_evaluation": ptq_evaluation,
    "qat_hif8_w8a8": lambda: qat_run("HIF8_W8A8"),
    "qat_paretoq_w2": lambda: qat_run("PARETOQ_W2"),
    "zero_shot": zero_shot,
}


def digest(values: Any) -> str:
    """SHA-256 (12 hex digits) of ``values`` as canonical JSON (floats written exactly, as ``repr``)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:12]


def compute_all() -> dict[str, Any]:
    """Every cell of :data:`CELLS`, computed in this process (the child; the caller sets the pins)."""
    import torch

    torch.set_num_threads(1)
    return {name: cell() for name, cell in CELLS.items()}


def compute(pinned: bool = True) -> dict[str, Any]:
    """The cells' values, computed in a child process under the pins (or without them)."""
    environ = pinned_environment() if pinned else unpinned_environment()
    command = [sys.executable, "-m", "workflow.fingerprints", "--compute"]
    done = subprocess.run(command, cwd=ROOT, env={**environ, "PYTHONWARNINGS": "ignore"}, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"computing the fingerprints failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def compare(record: Mapping[str, Any], values: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row a cell of the record: ``cell``, ``recorded`` and ``here`` digests, ``result`` (``identical``, or
    the first value that differs)."""
    rows = []
    for name, entry in record["cells"].items():
        here = values.get(name)
        result = "identical" if here == entry["values"] else first_difference(entry["values"], here)
        rows.append({"cell": name, "recorded": entry["digest"], "here": digest(here), "result": result})
    return rows


def checked_entry() -> dict[str, str]:
    """This machine's CPU as a ``checked_on`` entry."""
    return {**this_cpu(), "date": datetime.date.today().isoformat()}


def same_check(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Whether two ``checked_on`` entries name one CPU (the date aside)."""
    return all(a.get(key) == b.get(key) for key in ("vendor", "cpu_id"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="add this CPU to the record's checked_on")
    parser.add_argument("--update", action="store_true", help="write this machine's values as the record")
    parser.add_argument("--unpinned", action="store_true", help="compute without the pins (negative control)")
    parser.add_argument("--compute", action="store_true", help=argparse.SUPPRESS)  # the child: print the values
    args = parser.parse_args(argv)
    if args.compute:
        print(json.dumps(compute_all()))
        return 0
    if args.unpinned and (args.record or args.update):
        parser.error("--unpinned computes the negative control: it is never recorded")
    try:
        entry = checked_entry()
        values = compute(pinned=not args.unpinned)
    except (ValueError, RuntimeError) as err:
        parser.error(str(err))
    path = ROOT / RECORD
    if args.update:
        write_json(path, {"pins": numerical_pins(), "cells": {name: {"digest": digest(v), "values": v}
                                                        for name, v in values.items()},
                          "checked_on": [entry]})
        print(f"{RECORD}: {len(values)} cells written, checked on {entry['vendor']} {entry['cpu']}")
        return 0
    record = json.loads(path.read_text(encoding="utf-8"))
    if record["pins"] != numerical_pins():
        print(f"note: the record was made under other pins than {PINS_FILE}'s: {record['pins']}")
    rows = compare(record, values)
    width = max(len(row["cell"]) for row in rows)
    print(f"{'cell':<{width}}  recorded      here          result")
    for row in rows:
        print(f"{row['cell']:<{width}}  {row['recorded']:<12}  {row['here']:<12}  {row['result']}")
    same = sum(row["result"] == "identical" for row in rows)
    print(f"{same} of {len(rows)} cells identical on {entry['vendor']} {entry['cpu']} "
          f"({'unpinned' if args.unpinned else 'pinned'}); the record was checked on: "
          + "; ".join(f"{e['vendor']} {e['cpu']} ({e['cpu_id']})" for e in record["checked_on"]))
    if same < len(rows):
        return 1
    if args.record:
        if not any(same_check(entry, known) for known in record["checked_on"]):
            record["checked_on"].append(entry)
            write_json(path, record)
        print(f"{RECORD}: checked on {entry['vendor']} {entry['cpu']} ({entry['cpu_id']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
