"""lm-eval-harness on local custom tasks (dataset_path: json) built from our JSONL artifacts: it runs offline on a
saved tiny checkpoint and agrees with score_cloze / score_choice request for request."""

import pytest

from common.eval import build_choice_task, build_cloze_task, run_lm_eval, score_choice, score_cloze, write_task

CLOZE_YAML = """task: lowbit_cloze
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
  cache_dir: {cache}
output_type: loglikelihood
test_split: test
doc_to_text: context
doc_to_target: target
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

CHOICE_YAML = """task: lowbit_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
  cache_dir: {cache}
output_type: multiple_choice
test_split: test
doc_to_text: context
doc_to_choice: choices
doc_to_target: gold
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
"""


def test_custom_tasks_agree_with_our_scorers(tmp_path, saved, docs, model, tokenizer):
    cloze, choice = build_cloze_task(docs, 8, seed=0, context_words=20), build_choice_task(docs, 8, seed=0)
    write_task(tmp_path / "cloze.jsonl", cloze)
    write_task(tmp_path / "choice.jsonl", choice)
    (tmp_path / "cloze.yaml").write_text(CLOZE_YAML.format(path=tmp_path / "cloze.jsonl", cache=tmp_path / "hf"))
    (tmp_path / "choice.yaml").write_text(CHOICE_YAML.format(path=tmp_path / "choice.jsonl", cache=tmp_path / "hf"))

    results = run_lm_eval(
        saved["model"], ["lowbit_cloze", "lowbit_choice"], str(tmp_path), None, 4,
        tokenizer_dir=saved["tokenizer"], include_defaults=False, bootstrap_iters=0,
    )["results"]
    ours_cloze, ours_choice = score_cloze(model, tokenizer, cloze), score_choice(model, tokenizer, choice)
    assert results["lowbit_cloze"]["sample_len"] == results["lowbit_choice"]["sample_len"] == 8
    assert results["lowbit_cloze"]["acc,none"] == ours_cloze["acc"]
    assert results["lowbit_cloze"]["perplexity,none"] == pytest.approx(ours_cloze["perplexity"], rel=1e-5)
    assert results["lowbit_choice"]["acc,none"] == ours_choice["acc"]
    assert results["lowbit_choice"]["acc_norm,none"] == ours_choice["acc_norm"]

    limited = run_lm_eval(saved["model"], ["lowbit_cloze"], tmp_path, 3, 1, tokenizer_dir=saved["tokenizer"],
                          include_defaults=False, bootstrap_iters=0)
    assert limited["results"]["lowbit_cloze"]["sample_len"] == 3


def test_bad_arguments_name_the_value(tmp_path, saved):
    with pytest.raises(ValueError, match=r"tasks must name at least one task, got \[\]"):
        run_lm_eval(saved["model"], [], None, None, 1)
    with pytest.raises(ValueError, match=r"model_dir '.*nowhere' is not a folder"):
        run_lm_eval(tmp_path / "nowhere", ["t"], None, None, 1)
    with pytest.raises(ValueError, match="limit must be >= 1 or None, got 0"):
        run_lm_eval(saved["model"], ["t"], None, 0, 1)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        run_lm_eval(saved["model"], ["t"], None, None, 0)
