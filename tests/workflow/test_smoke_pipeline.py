"""End to end: the smoke profile's shared stages run from a clean copy of the repository with Snakemake.

One temporary copy of the tracked files, one run of `snakemake --profile workflow/profiles/smoke
shared_stages` (fetch from the registries, split, tokenizer, smoke model, evaluation, MXFP4 checkpoint
quantization and its evaluation), then the artifacts are checked. A second dry run must find nothing to do.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    copy = tmp_path_factory.mktemp("repo")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    snakemake = [sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/smoke"]
    run = subprocess.run([*snakemake, "shared_stages"], cwd=copy, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    return copy, snakemake


@pytest.mark.slow
def test_shared_stages_artifacts(smoke_run):
    copy, _ = smoke_run
    stats = json.loads((copy / "results/data/sotu.stats.json").read_text())
    assert stats["train"]["documents"] + stats["validation"]["documents"] + stats["test"]["documents"] == 233
    assert stats["tokenizer"]["vocab_size"] == 2048
    base = json.loads((copy / "results/eval/base/smoke/sotu-validation.json").read_text())
    quantized = json.loads((copy / "results/eval/quantized/mxfp4_mlp/base/smoke/sotu-validation.json").read_text())
    ppl = base["metrics"]["perplexity"]["perplexity"]
    assert 1 < ppl < 2048  # learned something: better than uniform over the vocabulary
    assert quantized["metrics"]["perplexity"]["perplexity"] != ppl
    assert quantized["quantization"]["recipe"]["weights"]["elem"] == "e2m1"
    assert base["metrics"]["choice"]["chance"] == 0.25
    size = json.loads((copy / "results/models/quantized/mxfp4_mlp/base/smoke/size_report.json").read_text())
    assert size["checkpoint_bytes"] < size["original_bytes"]


@pytest.mark.slow
def test_rerun_finds_nothing_to_do(smoke_run):
    copy, snakemake = smoke_run
    dry = subprocess.run([*snakemake, "-n", "shared_stages"], cwd=copy, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0
    assert "Nothing to be done" in dry.stdout + dry.stderr
