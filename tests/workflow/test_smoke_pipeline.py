"""End to end: the smoke profile's shared stages, built from a clean copy by the session's smoke build
(``conftest.py``): fetch from the registries, split, tokenizer, smoke model, evaluation, MXFP4 checkpoint
quantization and its evaluation. A second dry run must find nothing to do."""

import json

import pytest

pytestmark = pytest.mark.slow


def test_shared_stages_artifacts(smoke_build):
    stats = json.loads((smoke_build / "results/smoke/data/sotu.stats.json").read_text())
    assert stats["train"]["documents"] + stats["validation"]["documents"] + stats["test"]["documents"] == 233
    assert stats["tokenizer"]["vocab_size"] == 2048
    base = json.loads((smoke_build / "results/smoke/eval/base/smoke/sotu-validation.json").read_text())
    quantized = json.loads(
        (smoke_build / "results/smoke/eval/quantized/mxfp4_mlp/base/smoke/sotu-validation.json").read_text())
    ppl = base["metrics"]["perplexity"]["perplexity"]
    assert 1 < ppl < 2048  # learned something: better than uniform over the vocabulary
    assert quantized["metrics"]["perplexity"]["perplexity"] != ppl
    assert quantized["quantization"]["recipe"]["weights"]["elem"] == "e2m1"
    assert base["metrics"]["choice"]["chance"] == 0.25
    quantized = smoke_build / "results/smoke/models/quantized/mxfp4_mlp/base/smoke"
    size = json.loads((quantized / "size_report.json").read_text())
    assert size["checkpoint_bytes"] < size["original_bytes"]


def test_rerun_finds_nothing_to_do(smoke_build, plan_snakemake):
    dry = plan_snakemake(smoke_build, "all", "shared_stages")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "Nothing to be done" in dry.stdout + dry.stderr
