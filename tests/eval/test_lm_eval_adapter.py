"""lm-eval-harness on loaded models, offline: local custom tasks (dataset_path: json) built from our JSONL artifacts
agree with score_cloze / score_choice request for request, on a float and on a quantized model; rolling perplexity
equals common.eval.perplexity at the matching window and stride; the command writes a record, or, when a task's
data is out of reach, one line and nothing."""

import json

import datasets
import pytest
import torch

from common.data.documents import Document, write_jsonl
from common.eval import (
    build_choice_task,
    build_cloze_task,
    perplexity,
    run_lm_eval,
    score_choice,
    score_cloze,
    write_task,
)
from common.eval.cli import main
from common.eval.lm_eval_adapter import NO_DATA_STATUS, load_scored_model, write_task_yaml
from common.eval.zeroshot import loglikelihoods
from common.ptq import read_quantization_config, save_quantized_checkpoint, select_linears
from common.recipes import get_recipe


@pytest.fixture
def local_tasks(tmp_path, docs):
    """The include path of the cloze and choice YAML tasks, and their examples."""
    cloze, choice = build_cloze_task(docs, 8, seed=0, context_words=20), build_choice_task(docs, 8, seed=0)
    write_task(tmp_path / "cloze.jsonl", cloze)
    write_task(tmp_path / "choice.jsonl", choice)
    write_task_yaml(tmp_path / "cloze.yaml", "lowbit_cloze", "cloze", tmp_path / "cloze.jsonl", tmp_path / "hf")
    write_task_yaml(tmp_path / "choice.yaml", "lowbit_choice", "choice", tmp_path / "choice.jsonl", tmp_path / "hf")
    return tmp_path, cloze, choice


@pytest.fixture(scope="module")
def quantized_checkpoint(tmp_path_factory, model, tokenizer):
    """A quantized checkpoint folder (NVFP4 weights and inputs) of the tiny model, with its tokenizer."""
    folder = tmp_path_factory.mktemp("quantized") / "nvfp4"
    recipe = get_recipe("NVFP4", activations=True)
    return save_quantized_checkpoint(model, tokenizer, recipe, select_linears(model), folder)


def test_custom_tasks_agree_with_our_scorers(local_tasks, model, tokenizer):
    include, cloze, choice = local_tasks
    results = run_lm_eval(model, tokenizer, ["lowbit_cloze", "lowbit_choice"], include_path=include, batch_size=4,
                          include_defaults=False, bootstrap_iters=0)["results"]
    ours_cloze, ours_choice = score_cloze(model, tokenizer, cloze), score_choice(model, tokenizer, choice)
    assert results["lowbit_cloze"]["sample_len"] == results["lowbit_choice"]["sample_len"] == 8
    assert results["lowbit_cloze"]["acc,none"] == ours_cloze["acc"]
    assert results["lowbit_cloze"]["perplexity,none"] == pytest.approx(ours_cloze["perplexity"], rel=1e-5)
    assert results["lowbit_choice"]["acc,none"] == ours_choice["acc"]
    assert results["lowbit_choice"]["acc_norm,none"] == ours_choice["acc_norm"]

    limited = run_lm_eval(model, tokenizer, ["lowbit_cloze"], include_path=include, limit=3, include_defaults=False,
                          bootstrap_iters=0)
    assert limited["results"]["lowbit_cloze"]["sample_len"] == 3


def test_quantized_model_loglikelihoods_equal_our_scorer(local_tasks, quantized_checkpoint, tokenizer):
    """The quantized checkpoint, loaded with its activation hooks, is what lm-eval scores: every request's
    log-likelihood is our scorer's on the same model (one request per forward pass in both)."""
    include, _, choice = local_tasks
    model, record = load_scored_model(quantized_checkpoint)
    assert record == read_quantization_config(quantized_checkpoint)  # the checkpoint's record, as common.eval's
    assert record["recipe"]["name"] == "W:NVFP4,A:NVFP4"
    results = run_lm_eval(model, tokenizer, ["lowbit_choice"], include_path=include, include_defaults=False,
                          bootstrap_iters=0, log_samples=True)
    samples = sorted(results["samples"]["lowbit_choice"], key=lambda sample: sample["doc_id"])
    theirs = [float(resp[0][0]) for sample in samples for resp in sample["resps"]]
    requests = [(ex["context"], " " + c) for ex in choice for c in ex["choices"]]
    ours = [ll for ll, _, _ in loglikelihoods(model, tokenizer, requests)[0]]
    assert theirs == pytest.approx(ours, rel=1e-6, abs=1e-6)


def test_rolling_perplexity_is_ours_at_window_max_length_plus_one(tmp_path, model, tokenizer, docs):
    """lm-eval's loglikelihood_rolling on one document = common.eval.perplexity of [prefix] + tokens with
    window = max_length + 1 and stride = max_length, when the document fills whole windows (module docstring)."""
    max_length = 16
    ids = tokenizer(docs[0].text, add_special_tokens=False)["input_ids"]
    ids = ids[: len(ids) // max_length * max_length]  # whole windows: no last partial window
    text = tokenizer.decode(ids)
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == ids
    write_jsonl(tmp_path / "text.jsonl", [Document("doc", text)])
    write_task_yaml(tmp_path / "rolling.yaml", "lowbit_rolling", "rolling", tmp_path / "text.jsonl", tmp_path / "hf")
    results = run_lm_eval(model, tokenizer, ["lowbit_rolling"], include_path=tmp_path, max_length=max_length,
                          include_defaults=False, bootstrap_iters=0, log_samples=True)
    (sample,) = results["samples"]["lowbit_rolling"]
    theirs = float(sample["resps"][0][0])
    stream = torch.tensor([tokenizer.eos_token_id, *ids])  # lm-eval's prefix token: BOS, else EOS
    ours = perplexity(model, stream, window=max_length + 1, stride=max_length)
    assert ours["tokens"] == len(ids)
    assert theirs == pytest.approx(-ours["nll_sum"], rel=1e-6)
    words = len(text.split())
    assert results["results"]["lowbit_rolling"]["word_perplexity,none"] == pytest.approx(
        torch.exp(torch.tensor(ours["nll_sum"] / words, dtype=torch.float64)).item(), rel=1e-5)


def test_lm_eval_command_writes_a_record(local_tasks, quantized_checkpoint, tmp_path, capsys):
    include, cloze, _ = local_tasks
    out = tmp_path / "out" / "lm_eval.json"
    assert main(["lm-eval", "--model", str(quantized_checkpoint), "--tasks", "lowbit_cloze", "--include-path",
                 str(include), "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["quantization"]["recipe"]["name"] == "W:NVFP4,A:NVFP4"
    assert record["data"] == {"tasks": ["lowbit_cloze"], "limit": None}
    assert record["metrics"]["lowbit_cloze"]["sample_len"] == len(cloze)
    assert "wrote" in capsys.readouterr().out


def test_lm_eval_command_offline_says_so_and_writes_nothing(tmp_path, saved, monkeypatch, capsys):
    """lm-eval's hub tasks without a network or cache: one line, status 3, no output file."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "empty-cache")
    out = tmp_path / "lm_eval.json"
    status = main(["lm-eval", "--model", str(saved["model"]), "--tokenizer", str(saved["tokenizer"]),
                   "--tasks", "lambada_openai", "--out", str(out)])
    assert status == NO_DATA_STATUS
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("lm-eval task 'lambada_openai' cannot read its dataset")
    assert err.endswith("nothing written")
    assert not out.exists()


def test_bad_arguments_name_the_value(tmp_path, saved, model, tokenizer, quantized_checkpoint):
    with pytest.raises(ValueError, match=r"tasks must name at least one task, got \[\]"):
        run_lm_eval(model, tokenizer, [])
    with pytest.raises(ValueError, match="limit must be >= 1 or None, got 0"):
        run_lm_eval(model, tokenizer, ["t"], limit=0)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        run_lm_eval(model, tokenizer, ["t"], batch_size=0)
    with pytest.raises(ValueError, match=r"include_path '.*nowhere' is not a folder"):
        run_lm_eval(model, tokenizer, ["t"], include_path=tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"unknown lm-eval task 'no_such_task'"):
        run_lm_eval(model, tokenizer, ["no_such_task"], include_path=tmp_path, include_defaults=False)
    with pytest.raises(ValueError, match=r"--quantization given for .*nvfp4', which is already a quantized"):
        load_scored_model(quantized_checkpoint, get_recipe("MXFP4"))
    with pytest.raises(ValueError, match=r"kind must be one of \['choice', 'cloze', 'rolling'\], got 'mcq'"):
        write_task_yaml(tmp_path / "t.yaml", "t", "mcq", tmp_path / "t.jsonl")
    assert not (tmp_path / "t.yaml").exists()
    assert main(["lm-eval", "--model", str(tmp_path / "nowhere"), "--tasks", "t", "--out", str(tmp_path / "o")]) == 2


def test_float_model_fake_quantized_by_a_recipe(saved, model):
    scored, record = load_scored_model(saved["model"], get_recipe("MXFP4"))
    assert record["name"] == "W:MXFP4"
    names = select_linears(model)
    assert not torch.equal(scored.get_submodule(names[0]).weight, model.get_submodule(names[0]).weight)
    unquantized, none = load_scored_model(saved["model"])
    assert none is None
    assert torch.equal(unquantized.get_submodule(names[0]).weight, model.get_submodule(names[0]).weight)
