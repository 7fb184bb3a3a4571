"""Evaluation records: required fields, versions, wall time, atomic JSON, argument errors."""

import json

import pytest
import torch
import transformers

from common.eval import describe_model, evaluation_record, file_summary, write_evaluation

METRICS = {
    "perplexity": {"nll_sum": 12.0, "tokens": 4, "mean_nll": 3.0, "perplexity": 20.08, "wall_time_s": 1.5},
    "cloze": {"examples": 2, "correct": 1, "acc": 0.5, "wall_time_s": 0.5},
}
DATA = {"split": {"path": "valid.jsonl", "documents": 3, "tokens": 5}, "window": 4, "stride": 2}


def test_record_fields(model):
    info = describe_model(model, "ckpt")
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    assert (info["path"], info["class"]) == ("ckpt", "LlamaForCausalLM")
    assert (info["max_length"], info["dtype"]) == (64, "float32")
    recipe = {"name": "NVFP4", "elem": "e2m1", "scale": "ue4m3", "block_size": 16}
    record = evaluation_record(info, recipe, DATA, METRICS)
    assert record["record_version"] == 1
    assert (record["model"], record["quantization"], record["data"], record["metrics"]) == (info, recipe, DATA, METRICS)
    assert record["versions"]["torch"] == torch.__version__
    assert record["versions"]["transformers"] == transformers.__version__
    assert record["wall_time_s"] == 2.0  # the metric groups' own times
    assert evaluation_record(info, None, DATA, METRICS, wall_time_s=7.0)["wall_time_s"] == 7.0
    assert evaluation_record(info, None, DATA, METRICS)["quantization"] is None


def test_write_evaluation_is_atomic_sorted_json(tmp_path):
    record = evaluation_record({"path": "m"}, None, DATA, METRICS)
    write_evaluation(tmp_path / "out" / "eval.json", record)
    assert json.loads((tmp_path / "out" / "eval.json").read_text()) == record
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["eval.json"]
    with pytest.raises(ValueError, match=r"evaluation record lacks \['record_version', 'versions', 'wall_time_s'\]"):
        write_evaluation(tmp_path / "bad.json", {k: record[k] for k in ("model", "quantization", "data", "metrics")})
    assert not (tmp_path / "bad.json").exists()


def test_file_summary(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"abc")
    assert file_summary(tmp_path / "a.txt") == {
        "path": str(tmp_path / "a.txt"),
        "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (({}, None, DATA, METRICS), "model_info must be a non-empty dict, got {}"),
        (({"path": "m"}, "NVFP4", DATA, METRICS), "quantization must be a dict or None, got 'NVFP4'"),
        (({"path": "m"}, None, [], METRICS), r"data must be a non-empty dict, got \[\]"),
        (({"path": "m"}, None, DATA, {}), "metrics must be a non-empty dict"),
        (({"path": "m"}, None, DATA, {"ppl": 3.0}), "metric group 'ppl' must be a dict, got 3.0"),
        (({"path": "m"}, None, DATA, {"ppl": {"perplexity": 3.0}}), "metric group 'ppl' has no wall_time_s"),
    ],
)
def test_bad_arguments_name_the_value(args, message):
    with pytest.raises(ValueError, match=message):
        evaluation_record(*args)
