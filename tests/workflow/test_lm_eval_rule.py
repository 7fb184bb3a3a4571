"""End to end: the lm_eval_model rule on the smoke build. lm-eval scores the smoke model's own zero-shot tasks
(local YAMLs through `lm_eval.include_path`) offline, the quantized checkpoint as itself; the standard tasks,
offline without an HF cache, stop the job with one line and no output."""

import json

import pytest

from common.eval.lm_eval_adapter import write_task_yaml

pytestmark = pytest.mark.slow

def lm_eval_config(folder, tasks, include_path=None):
    """A config file that replaces the profile's `lm_eval` block (a nested --config value would stay a string)."""
    settings = {"tasks": tasks, "models": [], "batch_size": 8, "limit": 20, "num_fewshot": None,
                "include_path": None if include_path is None else str(include_path)}
    path = folder / "lm_eval.yaml"
    path.write_text(json.dumps({"lm_eval": settings}))  # JSON is YAML
    return str(path)


def test_local_task_on_the_base_and_quantized_smoke_models(smoke_build, run_snakemake, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    choice = smoke_build / "results/smoke/tasks/sotu/choice.jsonl"
    write_task_yaml(tasks / "smoke_choice.yaml", "smoke_choice", "choice", choice)
    targets = ["results/smoke/lm_eval/base/smoke.json", "results/smoke/lm_eval/quantized/mxfp4_mlp/base/smoke.json"]
    run = run_snakemake(smoke_build, *targets, "--configfile", lm_eval_config(tmp_path, ["smoke_choice"], tasks))
    assert run.returncode == 0, run.stderr[-3000:]
    base, quantized = (json.loads((smoke_build / target).read_text()) for target in targets)
    assert base["quantization"] is None
    assert quantized["quantization"]["recipe"]["weights"]["elem"] == "e2m1"  # the checkpoint's own config
    assert base["metrics"]["smoke_choice"]["sample_len"] == quantized["metrics"]["smoke_choice"]["sample_len"] == 20
    for target, evaluation in zip(targets, ("base/smoke", "quantized/mxfp4_mlp/base/smoke"), strict=True):
        ours = json.loads((smoke_build / f"results/smoke/eval/{evaluation}/sotu-validation.json").read_text())
        first_20 = ours["metrics"]["choice"]["example_correct"][:20]  # our scorer on the same examples
        theirs = json.loads((smoke_build / target).read_text())["metrics"]["smoke_choice"]
        assert theirs["acc,none"] == sum(first_20) / 20


def test_standard_tasks_offline_stop_with_one_line(smoke_build, run_snakemake, tmp_path):
    target = "results/smoke/lm_eval/base/smoke.json"
    (smoke_build / target).unlink(missing_ok=True)
    run = run_snakemake(smoke_build, target, "--configfile", lm_eval_config(tmp_path, ["lambada_openai"]))
    assert run.returncode != 0
    assert "lm-eval task 'lambada_openai' cannot read its dataset" in run.stderr
    assert "nothing written" in run.stderr
    assert not (smoke_build / target).exists()
