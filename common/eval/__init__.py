"""Evaluation of causal LMs: strided perplexity, zero-shot cloze and multiple-choice tasks built from held-out
documents (scored as lm-eval-harness scores LAMBADA and HellaSwag), evaluation records, an lm-eval adapter.

Corpus splits and their token streams come from ``common.data``:

>>> from common.data import read_jsonl, token_stream
>>> from common.eval import perplexity
>>> stream = token_stream(tokenizer, read_jsonl("data/valid.jsonl"))            # doctest: +SKIP
>>> perplexity(model, stream, window=512, stride=256)["perplexity"]             # doctest: +SKIP
"""

from common.lazy import lazy_exports

from .compare import accuracy_standard_error, metric_entry, perplexity_gaps, relative_drop
from .scores import ACCURACY, AccuracyFields, example_correct, score_mismatches, window_columns
from .tasks import build_choice_task, build_cloze_task, read_task, sentence_spans, write_task

# the records, scores and task files above; evaluating a model (torch, transformers) on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    "cli": ("evaluate_checkpoint",),
    "fake_quant": ("fake_quant_perplexity", "fake_quant_zero_shot"),
    "lm_eval_adapter": ("run_lm_eval", "write_task_yaml"),
    "record": ("describe_model", "evaluation_record", "file_summary", "write_evaluation"),
    "sliding_window": ("perplexity", "window_spans"),
    "zeroshot": ("encode_pair", "loglikelihoods", "score_choice", "score_cloze"),
})

__all__ = [
    "ACCURACY",
    "AccuracyFields",
    "accuracy_standard_error",
    "build_choice_task",
    "build_cloze_task",
    "example_correct",
    "metric_entry",
    "perplexity_gaps",
    "read_task",
    "relative_drop",
    "score_mismatches",
    "sentence_spans",
    "window_columns",
    "write_task",
    *_LAZY,
]
