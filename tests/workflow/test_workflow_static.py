"""The workflow without running it: Snakemake's linter, snakefmt, and a dry run of the SLURM profile (which
must work on a machine without SLURM)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_snakemake_lint_is_clean():
    done = run(sys.executable, "-m", "snakemake", "--lint")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Congratulations, your workflow is in a good condition" in done.stdout + done.stderr


def test_snakefmt_check_passes():
    done = run(str(BIN / "snakefmt"), "--check", "Snakefile", "workflow", "papers")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_slurm_profile_dry_run_needs_no_cluster():
    done = run(sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/slurm", "-n", "-F",
               "reports/finer_is_better.html")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fib_ptq_cell" in done.stdout


def test_default_qat_studies_train_three_seeds_from_the_tiny_model():
    """The default profile's QAT plans: every training cell of both papers starts from `tiny`, on seeds 0-2."""
    done = run(sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/default", "-n", "-F",
               "reports/maxwindow_hif8.html", "reports/winq.html")
    assert done.returncode == 0, done.stderr[-3000:]
    plan = done.stdout + done.stderr
    for command in ("python -m papers.maxwindow_hif8 train", "python -m papers.winq train"):
        trains = [line for line in plan.splitlines() if command in line]
        assert trains, command
        assert all("--init results/models/base/tiny " in line for line in trains), command
        assert {int(line.split(" --seed ")[1].split()[0]) for line in trains} == {0, 1, 2}, command
    assert plan.count("python -m papers.maxwindow_hif8 train") == 27


def planned_outputs(profile: str, *targets: str) -> set[str]:
    """Every output file of a forced dry run of ``targets`` under ``profile`` (the `output:` lines of the plan)."""
    done = run(sys.executable, "-m", "snakemake", "--profile", f"workflow/profiles/{profile}", "-n", "-F", *targets)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = set()
    for line in (done.stdout + done.stderr).splitlines():
        if line.strip().startswith("output:"):
            outputs |= {path.strip() for path in line.split(":", 1)[1].split(",")}
    return outputs


def test_results_of_two_profiles_coexist():
    """The smoke and default plans write disjoint files: smoke under results/smoke, reports/smoke, logs/smoke; the
    default profile under the short paths; only data/ (corpora, tokenizers keyed by their own parameters) is
    shared."""
    smoke, default = planned_outputs("smoke", "all", "shared_stages"), planned_outputs("default", "all")
    assert smoke
    assert default
    assert all(path.startswith(("results/smoke/", "reports/smoke/", "data/")) for path in smoke), sorted(smoke)[:5]
    assert not any(path.startswith(("results/smoke/", "reports/smoke/")) for path in default)
    assert all(path.startswith("data/") for path in smoke & default), sorted(smoke & default)[:5]
    assert {"reports/smoke/index.html", "reports/smoke/winq.html"} <= smoke
    assert {"reports/index.html", "reports/winq.html"} <= default


def test_an_external_model_by_path_or_hub_id_is_linked(tmp_path):
    """`external_models: {name: {path: DIR}}` or `{hub: ID}` plans rule link_external_model for it, then its
    evaluation like any model's."""
    models = {"mine": {"path": str(tmp_path / "checkpoint")}, "llama": {"hub": "meta-llama/Llama-3.2-1B"}}
    config = tmp_path / "external.yaml"
    config.write_text(json.dumps({"external_models": models, "evaluate_external": ["mine", "llama"]}))
    done = run(sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/smoke", "-n", "-F",
               "--configfile", str(config), "--", "shared_stages")
    assert done.returncode == 0, done.stderr[-3000:]
    plan = done.stdout + done.stderr
    assert "python -m common.models link --source '{\"path\": \"" in plan
    assert "python -m common.models link --source '{\"hub\": \"meta-llama/Llama-3.2-1B\"}'" in plan
    for name in models:
        assert f"results/smoke/eval/external/{name}/sotu-validation.json" in plan


def test_training_steps_given_several_gpus_run_under_torchrun():
    """A training job with N > 1 GPUs (resource gpu) starts one process per GPU; with none or one, plain python."""
    target = "results/smoke/models/trained/winq/w1-winq/seed0"
    for resources, launch in (([], "python -m papers.winq train"),
                              (["--set-resources", "wq_train:gpu=4"],
                               "torchrun --standalone --nproc_per_node=4 -m papers.winq train")):
        done = run(sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/smoke", "-n", "-F", *resources,
                   "--", target)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"OMP_NUM_THREADS=1 {launch} " in done.stdout + done.stderr
