"""Command line: evaluate a checkpoint on a split (+ optional zero-shot tasks), or build the tasks of a split.

    python -m common.eval --model DIR --tokenizer DIR --split FILE.jsonl [--cloze TASK.jsonl]
        [--choice TASK.jsonl] --window W --stride S [--batch-size B] [--quantization RECIPE.json]
        [--device auto|cpu|cuda[:N]] [--dtype float32|bfloat16|float16] --out OUT.json
    python -m common.eval build-tasks --split FILE.jsonl --out-dir DIR --n N --seed S
        [--n-choices 4] [--context-words 50] [--context-sentences 3]      # writes DIR/cloze.jsonl, DIR/choice.jsonl
    python -m common.eval lm-eval --model DIR --tasks T1,T2,... [--tokenizer DIR] [--quantization RECIPE]
        [--device D] [--dtype T] [--batch-size B] [--limit N] [--num-fewshot K] [--max-length L] [--include-path DIR]
        --out OUT.json                          # lm-eval-harness on the loaded model (common.eval.lm_eval_adapter)

Bad input exits with status 2 and a message naming the offending value (``lm-eval`` exits with 3 when a task's
dataset is out of reach: offline without the Hugging Face cache); every output file is written
atomically after all computation succeeded, so a failed run writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

from common.cli import COMPUTE_FLAGS, compute_settings
from common.compute import Compute
from common.data import read_jsonl, token_stream
from common.models import load_checkpoint
from common.ptq import checkpoint as _quantized_kind  # noqa: F401  registers the kind "quantized" it loads
from common.qat import lowbit_io as _lowbit_kind  # noqa: F401  registers the kind "lowbit_qat" it loads

from .record import describe_model, evaluation_record, file_summary, write_evaluation
from .sliding_window import perplexity
from .tasks import build_choice_task, build_cloze_task, read_task, write_task
from .zeroshot import TASK_SCORERS

CLOZE_FILE = "cloze.jsonl"
CHOICE_FILE = "choice.jsonl"


def _evaluate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m common.eval", description="Evaluate a causal LM checkpoint.")
    parser.add_argument("--model", required=True, type=Path, help="HF causal LM folder")
    parser.add_argument("--tokenizer", required=True, type=Path, help="HF tokenizer folder")
    parser.add_argument("--split", required=True, type=Path, help="corpus split, JSONL of {id, text}")
    parser.add_argument("--cloze", type=Path, help="cloze task JSONL (build-tasks)")
    parser.add_argument("--choice", type=Path, help="choice task JSONL (build-tasks)")
    parser.add_argument("--window", required=True, type=int, help="perplexity window, tokens")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="score only the first N tokens of the split's stream (default: all; recorded)")
    parser.add_argument("--stride", required=True, type=int, help="perplexity stride, tokens")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--quantization", type=Path,
                        help="JSON recipe the model was quantized with, recorded (default: the quantization_config.json"
                             " of a quantized checkpoint)")
    for flag, options in COMPUTE_FLAGS:
        parser.add_argument(flag, **options)
    parser.add_argument("--out", required=True, type=Path, help="evaluation record JSON")
    return parser


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m common.eval build-tasks", description="Build the zero-shot tasks of a held-out split."
    )
    parser.add_argument("--split", required=True, type=Path)
    parser.add_argument("--out-dir", required=True, type=Path)
    parser.add_argument("--n", required=True, type=int, help="examples per task")
    parser.add_argument("--seed", required=True, type=int)
    parser.add_argument("--n-choices", type=int, default=4)
    parser.add_argument("--context-words", type=int, default=50)
    parser.add_argument("--context-sentences", type=int, default=3)
    return parser


def _lm_eval_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m common.eval lm-eval",
                                     description="Score a checkpoint, as loaded, with lm-eval-harness tasks.")
    parser.add_argument("--model", required=True, type=Path,
                        help="HF folder: a float, quantized (common.ptq) or low-bit QAT checkpoint")
    parser.add_argument("--tokenizer", type=Path, help="HF tokenizer folder (default: the model folder)")
    parser.add_argument("--tasks", required=True,
                        help="comma-separated lm-eval tasks, e.g. wikitext,lambada_openai,hellaswag,arc_easy,"
                             "arc_challenge,piqa,winogrande,mmlu")
    parser.add_argument("--quantization", help="fake-quantize a float model with this block recipe (a name from "
                                               "common.recipes.RECIPES, a JSON object or a .json file)")
    for flag, options in COMPUTE_FLAGS:
        parser.add_argument(flag, **options)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="score only the first N examples of each task")
    parser.add_argument("--num-fewshot", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=None, help="context length (default: the model's)")
    parser.add_argument("--include-path", type=Path, help="folder of extra task YAMLs (local data)")
    parser.add_argument("--out", required=True, type=Path, help="results JSON (lm-eval's, plus the model record)")
    return parser


def _lm_eval(args: argparse.Namespace) -> dict[str, Any]:
    from common.recipes import resolve_recipe

    from .lm_eval_adapter import load_scored_model, prepare_tasks, run_lm_eval

    tokenizer_dir = args.model if args.tokenizer is None else args.tokenizer
    _require("--model", args.model, folder=True)
    _require("--tokenizer", tokenizer_dir, folder=True)
    tasks = [task.strip() for task in args.tasks.split(",") if task.strip()]
    if not tasks:
        raise ValueError(f"--tasks {args.tasks!r} names no task")
    recipe = None if args.quantization is None else resolve_recipe(args.quantization)
    start = time.perf_counter()
    task_manager = prepare_tasks(tasks, args.include_path)  # missing data fails here, before the model loads
    model, record = load_scored_model(args.model, recipe, compute_settings(args))
    results = run_lm_eval(model, AutoTokenizer.from_pretrained(tokenizer_dir), tasks, task_manager=task_manager,
                          limit=args.limit, batch_size=args.batch_size, max_length=args.max_length,
                          num_fewshot=args.num_fewshot)
    info = {**describe_model(model, args.model), "tokenizer": str(tokenizer_dir)}
    return {**evaluation_record(info, record, {"tasks": tasks, "limit": args.limit}, results["results"],
                                wall_time_s=time.perf_counter() - start),
            "lm_eval": {key: results[key] for key in ("versions", "n-shot", "higher_is_better", "n-samples")
                        if key in results}}


def _require(kind: str, path: Path | None, folder: bool = False) -> None:
    if path is not None and not (path.is_dir() if folder else path.is_file()):
        raise ValueError(f"{kind} {str(path)!r} is not {'a folder' if folder else 'a file'}")


def evaluate_checkpoint(model: str | os.PathLike[str], split: str | os.PathLike[str], *, window: int, stride: int,
                        tokenizer: str | os.PathLike[str] | None = None, cloze: str | os.PathLike[str] | None = None,
                        choice: str | os.PathLike[str] | None = None, max_tokens: int | None = None,
                        batch_size: int = 1, quantization: dict[str, Any] | None = None,
                        compute: Compute | None = None) -> dict[str, Any]:
    """The evaluation record of checkpoint ``model`` (tokenizer: ``tokenizer`` or the model folder): strided
    perplexity on the first ``max_tokens`` tokens of ``split`` and the zero-shot ``cloze``/``choice`` tasks given,
    run where ``compute`` says (default :class:`common.compute.Compute`: CUDA when present, float32 weights).
    The model is loaded by :func:`common.models.load_checkpoint` (a quantized checkpoint with its input hooks, a
    low-bit QAT run with its quantizers). ``quantization`` is recorded (default: the checkpoint's own record, a
    quantized checkpoint's quantization config or a low-bit QAT run's ``qat`` record; None for a float checkpoint).
    ValueError naming a missing path or a bad value, before any scoring."""
    model, split = Path(model), Path(split)
    tokenizer = model if tokenizer is None else Path(tokenizer)
    _require("--model", model, folder=True)
    _require("--tokenizer", tokenizer, folder=True)
    for kind, path in (("--split", split), ("--cloze", cloze), ("--choice", choice)):
        _require(kind, None if path is None else Path(path))
    if max_tokens is not None and max_tokens < window:
        raise ValueError(f"--max-tokens {max_tokens} is shorter than --window {window}")
    start = time.perf_counter()
    docs = read_jsonl(split)
    tasks = {kind: (Path(path), read_task(path)) for kind, path in (("cloze", cloze), ("choice", choice)) if path}
    loaded_tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    loaded = load_checkpoint(model)
    network = (compute or Compute()).place(loaded.model)
    if quantization is None:
        quantization = loaded.record
    stream = token_stream(loaded_tokenizer, docs)
    if max_tokens is not None:
        stream = stream[:max_tokens]
    metrics = {"perplexity": perplexity(network, stream, window=window, stride=stride, batch_size=batch_size)}
    data: dict[str, Any] = {
        "split": {**file_summary(split), "documents": len(docs), "tokens": stream.numel(), "max_tokens": max_tokens},
        "window": window,
        "stride": stride,
    }
    for kind, (path, examples) in tasks.items():
        metrics[kind] = TASK_SCORERS[kind](network, loaded_tokenizer, examples, batch_size=batch_size)
        data[kind] = {**file_summary(path), "examples": len(examples)}
    info = {**describe_model(network, model), "tokenizer": str(tokenizer)}
    return evaluation_record(info, quantization, data, metrics, wall_time_s=time.perf_counter() - start)


def _evaluate(args: argparse.Namespace) -> dict[str, Any]:
    _require("--quantization", args.quantization)
    compute = compute_settings(args)
    quantization = None
    if args.quantization is not None:
        try:
            quantization = json.loads(args.quantization.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"--quantization {str(args.quantization)!r} is not valid JSON ({err.msg})") from None
    return evaluate_checkpoint(args.model, args.split, window=args.window, stride=args.stride,
                               tokenizer=args.tokenizer, cloze=args.cloze, choice=args.choice,
                               max_tokens=args.max_tokens, batch_size=args.batch_size, quantization=quantization,
                               compute=compute)


def _build_tasks(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    _require("--split", args.split)
    docs = read_jsonl(args.split)
    return {
        CLOZE_FILE: build_cloze_task(docs, args.n, args.seed, context_words=args.context_words),
        CHOICE_FILE: build_choice_task(
            docs, args.n, args.seed, n_choices=args.n_choices, context_sentences=args.context_sentences
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input)."""
    from .lm_eval_adapter import NO_DATA_STATUS, TaskDataUnavailableError

    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in ("build-tasks", "lm-eval") else None
    parser = {"build-tasks": _build_parser, "lm-eval": _lm_eval_parser, None: _evaluate_parser}[command]()
    args = parser.parse_args(argv[1:] if command else argv)
    building = command == "build-tasks"
    try:
        if command == "lm-eval":
            try:
                record = _lm_eval(args)
            except TaskDataUnavailableError as err:
                print(f"{err}; nothing written", file=sys.stderr)
                return NO_DATA_STATUS
            write_evaluation(args.out, record)
            print(f"wrote {args.out}: {json.dumps(record['metrics'])}")
        elif building:
            outputs = _build_tasks(args)
            for name, examples in outputs.items():
                write_task(args.out_dir / name, examples)
            print(f"wrote {', '.join(f'{len(ex)} examples to {args.out_dir / n}' for n, ex in outputs.items())}")
        else:
            record = _evaluate(args)
            write_evaluation(args.out, record)
            summary = {group: {k: v for k, v in values.items() if k in ("perplexity", "acc", "acc_norm")}
                       for group, values in record["metrics"].items()}
            print(f"wrote {args.out}: {json.dumps(summary)}")
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
