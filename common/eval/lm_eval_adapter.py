"""lm-eval-harness (0.4.x, Python API) on a loaded model: the papers' standard tasks (WikiText-2, LAMBADA, HellaSwag,
ARC, PIQA, Winogrande, MMLU) or local task YAMLs, scored on the model as it is, fake-quantization hooks included.

``lm_eval.simple_evaluate`` gets ``HFLM(pretrained=<the nn.Module>, tokenizer=<the tokenizer>)``, never a folder
path, so a quantized checkpoint (:func:`common.models.load_checkpoint` rebuilds it with its activation hooks), a
low-bit QAT checkpoint (its quantizers attached) or a float model under a PTQ recipe is scored as itself.

Command line (:func:`common.eval.cli.main`):

    python -m common.eval lm-eval --model DIR --tasks wikitext,lambada_openai,hellaswag,arc_easy,arc_challenge,\\
        piqa,winogrande,mmlu [--quantization RECIPE] [--device auto|cpu|cuda] [--dtype float32|bfloat16]
        [--batch-size B] [--limit N]
        [--num-fewshot K] [--max-length L] [--include-path DIR] --out OUT.json

lm-eval's standard tasks read their datasets from the Hugging Face hub, so they need a network or a warm HF cache;
offline (``HF_DATASETS_OFFLINE=1``) without the cache the command prints one line naming the task and its dataset,
exits with status 3 (:data:`NO_DATA_STATUS`) and writes nothing. Local YAML tasks (``dataset_path: json`` on a local
file, found through ``--include-path``) run offline; :func:`write_task_yaml` writes one for each of our JSONL task
kinds (:func:`common.eval.build_cloze_task`, :func:`common.eval.build_choice_task`, or documents for a rolling
perplexity).

How lm-eval's numbers relate to ours (the tests check both):

* ``loglikelihood`` / ``multiple_choice`` requests are scored as :mod:`common.eval.zeroshot` scores them: the same
  tokenization and context truncation, so the same log-likelihoods.
* ``loglikelihood_rolling`` (WikiText): each document is scored on its own, its first token conditioned on
  ``prefix_token_id`` (BOS, else EOS), in disjoint windows of ``max_length`` predicted tokens, the first of each
  window conditioned on the one token before it. That is :func:`common.eval.perplexity` on the stream ``[prefix] +
  tokens`` with ``window = max_length + 1`` and ``stride = max_length``, except in a last partial window, where
  lm-eval keeps ``max_length`` tokens of input (more context than our stride gives). lm-eval then reports word
  and byte perplexities (per word / per UTF-8 byte of the document), ours per token.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import torch

from common.compute import Compute
from common.io import write_text

if TYPE_CHECKING:
    from common.recipes import Recipe

NO_DATA_STATUS = 3  # the exit status of the command when a task's dataset is out of reach (offline, no HF cache)


class TaskDataUnavailableError(RuntimeError):
    """A task's dataset could not be read: offline without the HF cache, or the hub unreachable."""


def load_scored_model(model_dir: str | os.PathLike[str], quantization: Recipe | None = None,
                      compute: Compute | None = None) -> tuple[torch.nn.Module, dict[str, Any] | None]:
    """``(model, quantization record)`` to score, in eval mode where ``compute`` says
    (:meth:`common.compute.Compute.place`; default: CUDA when present, float32 weights): any checkpoint as
    :func:`common.models.load_checkpoint` loads it (a quantized checkpoint with its activation hooks, a low-bit QAT
    checkpoint with its quantizers), or a float checkpoint fake-quantized by the block recipe ``quantization`` on its
    default layers (:func:`common.quantization.quantize_`). The record is the checkpoint's own (a quantized
    checkpoint's quantization config, a low-bit QAT run's ``qat`` record, as ``python -m common.eval`` records them),
    the recipe's ``to_dict`` for a float model under a recipe, else None. ValueError for a recipe given with an
    already quantized checkpoint."""
    from common.models import load_checkpoint
    from common.ptq import checkpoint as _quantized_kind  # noqa: F401  registers the kind "quantized" it loads
    from common.qat import lowbit_io as _lowbit_kind  # noqa: F401  registers the kind "lowbit_qat" it loads
    from common.quantization import quantize_

    loaded = load_checkpoint(model_dir)
    if quantization is not None and loaded.kind is not None:
        raise ValueError(f"--quantization given for {str(model_dir)!r}, which is already a "
                         f"{loaded.kind.description} checkpoint (it is scored as it is)")
    record = loaded.record
    if quantization is not None:
        record = quantize_(loaded.model, quantization).recipe.to_dict()
    return (compute or Compute()).place(loaded.model).eval(), record


TASK_KINDS: dict[str, dict[str, Any]] = {
    # our cloze examples {"context", "target"}: the target's log-likelihood given the context, like LAMBADA
    "cloze": {"output_type": "loglikelihood", "doc_to_text": "context", "doc_to_target": "target",
              "metric_list": [{"metric": "perplexity", "aggregation": "perplexity", "higher_is_better": False},
                              {"metric": "acc", "aggregation": "mean", "higher_is_better": True}]},
    # our choice examples {"context", "choices", "gold"}: the most likely continuation, like HellaSwag
    "choice": {"output_type": "multiple_choice", "doc_to_text": "context", "doc_to_choice": "choices",
               "doc_to_target": "gold",
               "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                               {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True}]},
    # documents {"text"}: each one's rolling log-likelihood, like WikiText
    "rolling": {"output_type": "loglikelihood_rolling", "doc_to_text": "", "doc_to_target": "text",
                "metric_list": [{"metric": "word_perplexity"}, {"metric": "byte_perplexity"},
                                {"metric": "bits_per_byte"}]},
}


def write_task_yaml(path: str | os.PathLike[str], name: str, kind: str, data_file: str | os.PathLike[str],
                    cache_dir: str | os.PathLike[str] | None = None) -> None:
    """Atomically write an lm-eval task YAML named ``name`` that reads the local JSONL ``data_file`` (``dataset_path:
    json``, split "test") as one of :data:`TASK_KINDS`; put it in a folder given as ``include_path``. ``cache_dir``:
    where ``datasets`` caches the parsed file (default: the HF cache). ValueError naming an unknown ``kind``."""
    if kind not in TASK_KINDS:
        raise ValueError(f"kind must be one of {sorted(TASK_KINDS)}, got {kind!r}")
    import yaml

    dataset_kwargs: dict[str, Any] = {"data_files": {"test": str(data_file)}}
    if cache_dir is not None:
        dataset_kwargs["cache_dir"] = str(cache_dir)
    task = {"task": name, "dataset_path": "json", "dataset_kwargs": dataset_kwargs, "test_split": "test",
            **TASK_KINDS[kind]}
    write_text(path, yaml.safe_dump(task, sort_keys=False))


def prepare_tasks(tasks: list[str], include_path: str | os.PathLike[str] | None = None,
                  include_defaults: bool = True) -> Any:
    """lm-eval's ``TaskManager`` for ``tasks``, after reading each task's data once, so that missing data fails
    before a model is loaded or anything scored. ValueError naming an unknown task or a bad ``include_path``;
    :class:`TaskDataUnavailableError` when a task's dataset cannot be read."""
    if not tasks:
        raise ValueError(f"tasks must name at least one task, got {tasks!r}")
    if include_path is not None and not os.path.isdir(include_path):
        raise ValueError(f"include_path {str(include_path)!r} is not a folder")
    from lm_eval.tasks import TaskManager

    task_manager = TaskManager(
        include_path=None if include_path is None else str(include_path), include_defaults=include_defaults
    )
    for task in tasks:
        try:
            task_manager.load(task)
        except KeyError:
            raise ValueError(f"unknown lm-eval task {task!r} (not a registered task, group or YAML path)") from None
        except OSError as err:  # ConnectionError / OfflineModeIsEnabled / a missing local file
            raise TaskDataUnavailableError(f"lm-eval task {task!r} cannot read its dataset: "
                                           f"{str(err).splitlines()[0]} (it needs a network or a warm Hugging Face "
                                           "cache)") from None
    return task_manager


def run_lm_eval(
    model: torch.nn.Module,
    tokenizer: Any,
    tasks: list[str],
    *,
    task_manager: Any | None = None,
    include_path: str | os.PathLike[str] | None = None,
    limit: int | None = None,
    batch_size: int = 1,
    max_length: int | None = None,
    num_fewshot: int | None = None,
    include_defaults: bool = True,
    bootstrap_iters: int = 100000,
    log_samples: bool = False,
) -> dict[str, Any]:
    """Results dict of ``lm_eval.simple_evaluate`` on ``HFLM(pretrained=model, tokenizer=tokenizer)`` (per-task
    metrics under "results", as "acc,none" etc.), made JSON-ready with lm-eval's own ``handle_non_serializable``;
    with ``log_samples`` the per-request records under "samples" too. The model runs on its own device.

    ``task_manager``: from :func:`prepare_tasks` (default: prepared here from ``include_path`` and
    ``include_defaults``; ``include_defaults=False`` skips indexing lm-eval's built-in tasks, about 6 s, when only
    ``include_path`` tasks are run). ``bootstrap_iters`` is lm-eval's (stderr of non-mean aggregations; 0 skips
    them); ``max_length`` caps the context (default: the model config's). ValueError naming a bad argument.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be >= 1 or None, got {max_length}")
    if task_manager is None:
        task_manager = prepare_tasks(tasks, include_path, include_defaults)

    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.utils import handle_non_serializable

    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, max_length=max_length)
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=list(tasks),
        task_manager=task_manager,
        limit=limit,
        num_fewshot=num_fewshot,
        bootstrap_iters=bootstrap_iters,
        log_samples=log_samples,
    )
    if results is None:
        raise RuntimeError("lm_eval.simple_evaluate returned no results (not rank 0)")
    return json.loads(json.dumps(results, default=handle_non_serializable))
