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
lazy_exports(__name__, {"cli": ("evaluate_checkpoint",),
                        "fake_quant": ("fake_quant_perplexity", "fake_quant_zero_shot"),
                        "lm_eval_adapter": ("run_lm_eval", "write_task_yaml"),
                        "perplexity": ("perplexity", "window_spans"),
                        "record": ("describe_model", "evaluation_record", "file_summary", "write_evaluation"),
                        "zeroshot": ("encode_pair", "loglikelihoods", "score_choice", "score_cloze")})

__all__ = [
    "ACCURACY",
    "AccuracyFields",
    "accuracy_standard_error",
    "build_choice_task",
    "build_cloze_task",
    "describe_model",
    "encode_pair",
    "evaluate_checkpoint",
    "evaluation_record",
    "example_correct",
    "fake_quant_perplexity",
    "fake_quant_zero_shot",
    "file_summary",
    "loglikelihoods",
    "metric_entry",
    "perplexity",
    "perplexity_gaps",
    "read_task",
    "relative_drop",
    "run_lm_eval",
    "score_choice",
    "score_cloze",
    "score_mismatches",
    "sentence_spans",
    "window_columns",
    "window_spans",
    "write_evaluation",
    "write_task",
    "write_task_yaml",
]
