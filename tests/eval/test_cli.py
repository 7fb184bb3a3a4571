"""The command line: build-tasks and evaluate end to end on saved tiny artifacts; bad input writes nothing."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from common.data import token_stream
from common.eval import build_choice_task, build_cloze_task, perplexity, read_task, score_cloze
from common.eval.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_build_tasks_then_evaluate(tmp_path, saved, docs, model, tokenizer, capsys):
    tasks = tmp_path / "tasks"
    args = ["build-tasks", "--split", str(saved["split"]), "--out-dir", str(tasks), "--n", "5", "--seed", "3"]
    assert main([*args, "--context-words", "20"]) == 0
    cloze = read_task(tasks / "cloze.jsonl")
    assert cloze == build_cloze_task(docs, 5, 3, context_words=20)
    assert read_task(tasks / "choice.jsonl") == build_choice_task(docs, 5, 3)

    out = tmp_path / "eval.json"
    recipe = tmp_path / "recipe.json"
    recipe.write_text('{"name": "NVFP4"}')
    assert main([
        "--model", str(saved["model"]), "--tokenizer", str(saved["tokenizer"]), "--split", str(saved["split"]),
        "--cloze", str(tasks / "cloze.jsonl"), "--choice", str(tasks / "choice.jsonl"),
        "--window", "32", "--stride", "16", "--batch-size", "4", "--quantization", str(recipe), "--out", str(out),
    ]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["quantization"] == {"name": "NVFP4"}
    assert record["model"]["path"] == str(saved["model"])
    assert record["model"]["tokenizer"] == str(saved["tokenizer"])
    stream = token_stream(tokenizer, docs)
    assert record["data"]["split"]["tokens"] == stream.numel()
    assert record["data"]["split"]["documents"] == len(docs)
    assert (record["data"]["window"], record["data"]["stride"]) == (32, 16)
    assert record["data"]["cloze"]["examples"] == record["data"]["choice"]["examples"] == 5
    expected = perplexity(model, stream, window=32, stride=16)
    assert record["metrics"]["perplexity"]["perplexity"] == pytest.approx(expected["perplexity"], rel=1e-6)
    assert record["metrics"]["perplexity"]["tokens"] == expected["tokens"]
    assert record["metrics"]["cloze"]["loglikelihood_sum"] == pytest.approx(
        score_cloze(model, tokenizer, cloze)["loglikelihood_sum"], rel=1e-6
    )
    assert {"acc", "acc_norm", "chance", "examples"} <= record["metrics"]["choice"].keys()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--window": "1"}, "window must be >= 2, got 1"),
        ({"--stride": "40"}, r"stride must be in \[1, window=32\], got 40"),
        ({"--split": "missing.jsonl"}, "--split 'missing.jsonl' is not a file"),
        ({"--model": "nowhere"}, "--model 'nowhere' is not a folder"),
        ({"--device": "gpu"}, "unknown device 'gpu'; valid: cpu, cuda, cuda:N, auto"),
        ({"--dtype": "fp8"}, "unknown dtype 'fp8'; valid: float32, bfloat16, float16"),
    ],
)
def test_bad_evaluate_input_exits_nonzero_and_writes_nothing(tmp_path, saved, capsys, change, message):
    options = {"--model": str(saved["model"]), "--tokenizer": str(saved["tokenizer"]),
               "--split": str(saved["split"]), "--window": "32", "--stride": "16", "--out": str(tmp_path / "e.json")}
    options |= change
    assert main([item for pair in options.items() for item in pair]) == 2
    assert message.replace("\\", "") in capsys.readouterr().err.replace("\\", "")
    assert list(tmp_path.iterdir()) == []


def test_bad_build_input_exits_nonzero_and_writes_nothing(tmp_path, saved, capsys):
    out = tmp_path / "tasks"
    base = ["build-tasks", "--split", str(saved["split"]), "--out-dir", str(out), "--seed", "0"]
    assert main([*base, "--n", "0"]) == 2
    assert "n_examples must be >= 1, got 0" in capsys.readouterr().err
    assert main([*base, "--n", "3", "--n-choices", "1"]) == 2  # the cloze task would build; nothing is written
    assert "n_choices must be >= 2, got 1" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--n", "three"])
    assert exit_info.value.code == 2
    assert "invalid int value: 'three'" in capsys.readouterr().err


def test_module_entry_point(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "common.eval", "--model", str(tmp_path / "none"), "--tokenizer", str(tmp_path),
         "--split", "x.jsonl", "--window", "8", "--stride", "4", "--out", str(tmp_path / "o.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert f"--model '{tmp_path / 'none'}' is not a folder" in proc.stderr
    assert not (tmp_path / "o.json").exists()


def test_evaluate_in_bfloat16_scores_the_bf16_cast_model(tmp_path, saved, docs, model, tokenizer):
    """--dtype bfloat16 casts the weights once after loading: the record is the perplexity of that model."""
    out = tmp_path / "bf16.json"
    assert main(["--model", str(saved["model"]), "--tokenizer", str(saved["tokenizer"]), "--split",
                 str(saved["split"]), "--window", "32", "--stride", "16", "--device", "cpu", "--dtype", "bfloat16",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    stream = token_stream(tokenizer, docs)
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    expected = perplexity(bf16, stream, window=32, stride=16)["perplexity"]
    assert record["metrics"]["perplexity"]["perplexity"] == pytest.approx(expected, rel=1e-9)
    assert record["metrics"]["perplexity"]["perplexity"] != pytest.approx(
        perplexity(model, stream, window=32, stride=16)["perplexity"], rel=1e-6)
