"""The workflow without running it: Snakemake's linter, snakefmt, and the plans of forced dry runs of the profiles
(the SLURM ones must plan on a machine without SLURM). Each dry run is made once per test run and read by every test
that checks its plan (:func:`dry_runs`)."""

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from shared_testing import made_once

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
Plan = Callable[..., str]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="session")
def dry_runs(tmp_path_factory) -> Plan:
    """``dry_runs(profile, *targets, extra=())``: the plan (stdout and stderr) of the forced dry run ``snakemake
    --profile workflow/profiles/<profile> -n -F *extra -- *targets``, made once per test run for each (profile,
    targets, extra), whichever xdist worker asks first, and read by every test that asks; a failed one fails them
    all."""
    def plan(profile: str, *targets: str, extra: tuple[str, ...] = ()) -> str:
        command = [sys.executable, "-m", "snakemake", "--profile", f"workflow/profiles/{profile}", "-n", "-F", *extra,
                   "--", *targets]
        name = f"dry_run-{hashlib.sha256(json.dumps(command).encode()).hexdigest()[:16]}"

        def make(root: Path) -> None:
            done = run(*command)
            assert done.returncode == 0, done.stderr[-3000:]
            (root / f"{name}.txt").write_text(done.stdout + done.stderr)

        return (made_once(tmp_path_factory, name, make) / f"{name}.txt").read_text()

    return plan


def test_snakemake_lint_is_clean():
    done = run(sys.executable, "-m", "snakemake", "--lint")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Congratulations, your workflow is in a good condition" in done.stdout + done.stderr


def test_snakefmt_check_passes():
    done = run(str(BIN / "snakefmt"), "--check", "Snakefile", "workflow", "papers")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_design_command_runs_with_no_flag_and_a_size_profile_keeps_its_own():
    """``snakemake reports/finer_is_better.html`` as the design card writes it, from the repository root: Snakemake's
    workflow profile (profiles/default) gives the cores, the default size profile its paths; with --profile smoke on
    top, the smoke profile's config and paths stand (the workflow profile sets nothing a size profile does but the
    cores and the rerun policy)."""
    snakemake = str(BIN / "snakemake")
    design = run(snakemake, "-n", "-F", "reports/finer_is_better.html")
    assert design.returncode == 0, design.stderr[-3000:]
    assert "output: reports/finer_is_better.html" in design.stdout
    assert "results/smoke/" not in design.stdout
    smoke = run(snakemake, "--profile", "workflow/profiles/smoke", "-n", "-F", "reports/smoke/finer_is_better.html")
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    assert "output: reports/smoke/finer_is_better.html" in smoke.stdout
    assert "profile=default" not in smoke.stdout + smoke.stderr


def test_the_winq_pilot_plans_the_baselines_of_every_candidate(dry_runs):
    """results/<profile>/winq/pilot.json (papers.winq.premise): one baseline per candidate and pilot setting on the
    pilot's seed, each under its candidate's folder, then the table; nothing of the study itself."""
    plan = dry_runs("smoke", "results/smoke/winq/pilot.json")
    trained = sorted(line.split("output: ", 1)[1].split(",")[0] for line in plan.splitlines()
                     if "output: results/smoke/models/trained/winq/pilot/" in line)
    assert trained == [f"results/smoke/models/trained/winq/pilot/{c}/{s}-baseline/seed100"
                       for c in ("lr1e-3", "lr3e-4_2560", "lr4e-3") for s in ("w1", "w2")]
    assert "rule wq_pilot:" in plan
    assert "rule wq_train:" not in plan
    assert "rule wq_summary:" not in plan


def test_slurm_profile_dry_run_needs_no_cluster(dry_runs):
    assert "fib_ptq_cell" in dry_runs("slurm", "reports/finer_is_better.html")


def test_default_qat_studies_train_three_seeds_from_their_base_models(dry_runs):
    """The default profile's QAT plans: every training cell starts on seeds 0-2 from the QAT papers' shared base
    model `tiny_tied` (63% of its parameters in linears: WinQ's card bound 60%, Max-Window's MLP share bound 0.257)."""
    plan = dry_runs("default", "all")
    for command in ("python -m papers.maxwindow_hif8 train", "python -m papers.winq train"):
        trains = [line for line in plan.splitlines() if command in line]
        assert trains, command
        assert all("--init results/models/base/tiny_tied " in line for line in trains), command
        assert {int(line.split(" --seed ")[1].split()[0]) for line in trains} == {0, 1, 2}, command
    assert plan.count("python -m papers.maxwindow_hif8 train") == 30  # with the negative control on 3 seeds


def planned_outputs(plan: str) -> set[str]:
    """Every output file of a dry run's ``plan`` (its `output:` lines)."""
    outputs = set()
    for line in plan.splitlines():
        if line.strip().startswith("output:"):
            outputs |= {path.strip() for path in line.split(":", 1)[1].split(",")}
    return outputs


def test_results_of_two_profiles_coexist(dry_runs):
    """The smoke and default plans write disjoint files: smoke under results/smoke, reports/smoke, logs/smoke; the
    default profile under the short paths; only data/ (corpora, tokenizers keyed by their own parameters) is
    shared."""
    smoke = planned_outputs(dry_runs("smoke", "all", "shared_stages"))
    default = planned_outputs(dry_runs("default", "all"))
    assert smoke
    assert default
    assert all(path.startswith(("results/smoke/", "reports/smoke/", "data/")) for path in smoke), sorted(smoke)[:5]
    assert not any(path.startswith(("results/smoke/", "reports/smoke/")) for path in default)
    assert all(path.startswith("data/") for path in smoke & default), sorted(smoke & default)[:5]
    assert {"reports/smoke/index.html", "reports/smoke/winq.html"} <= smoke
    assert {"reports/index.html", "reports/winq.html"} <= default


def test_an_external_model_by_path_or_hub_id_is_linked(tmp_path):
    """`external_models: {name: {path: DIR}}` or `{hub: ID}` plans rule link_external_model for it, then its
    evaluation like any model's; a local folder is the link's input, so a missing one is named before any job."""
    (tmp_path / "checkpoint").mkdir()
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
    config.write_text(json.dumps({"external_models": {"gone": {"path": str(tmp_path / "gone")}},
                                  "evaluate_external": ["gone"]}))
    missing = run(sys.executable, "-m", "snakemake", "--profile", "workflow/profiles/smoke", "-n", "-F",
                  "--configfile", str(config), "--", "shared_stages")
    assert missing.returncode != 0
    assert "MissingInputException" in missing.stdout + missing.stderr
    assert str(tmp_path / "gone") in missing.stdout + missing.stderr


def test_training_steps_given_several_gpus_run_under_torchrun(dry_runs):
    """A training job with N > 1 GPUs (resource gpu) starts one process per GPU; with none or one, plain python."""
    smoke = planned_jobs(dry_runs("smoke", "all", "shared_stages"))
    trains = [job["shell"] for job in smoke if job["rule"] == "wq_train"]
    assert trains
    assert all(shell.startswith("OMP_NUM_THREADS=1 python -m papers.winq train ") for shell in trains)
    four = dry_runs("smoke", "results/smoke/models/trained/winq/w1-winq/seed0", extra=("--set-resources",
                                                                                        "wq_train:gpu=4"))
    assert "OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node=4 -m papers.winq train " in four


def planned_jobs(plan: str) -> list[dict[str, str]]:
    """The jobs of a dry run's ``plan``: per job its ``rule``, ``resources`` (the plan's line) and ``shell``
    command."""
    jobs: list[dict[str, str]] = []
    for line in plan.splitlines():
        if line.startswith(("rule ", "localrule ")) and line.endswith(":"):
            jobs.append({"rule": line.split()[1].rstrip(":"), "resources": "", "shell": ""})
        elif jobs and line.strip().startswith("resources:"):
            jobs[-1]["resources"] = line.split(":", 1)[1].strip()
        elif jobs and line.startswith("Shell command:"):
            jobs[-1]["shell"] = line.split(":", 1)[1].strip()
    return jobs


PAPER_MODELS = {"llama31_8b": "meta-llama/Llama-3.1-8B", "granite33_8b": "ibm-granite/granite-3.3-8b-base",
                "deepseek_7b": "deepseek-ai/deepseek-llm-7b-base", "qwen25_14b": "Qwen/Qwen2.5-14B",
                "llama2_7b": "meta-llama/Llama-2-7b-hf", "llama32_1b": "meta-llama/Llama-3.2-1B"}


def test_paper_profile_plans_the_papers_models_and_data_without_network_or_gpu(dry_runs):
    """`--profile workflow/profiles/paper -n`: every report from the papers' hub models (linked, never pretrained or
    converted) and hub datasets (WikiText-2 in its own splits joined, WikiText-103, a FineWeb sample, which the QAT
    trains read as token shards made with the study model's tokenizer), every model step asking for a GPU, under
    results/paper/."""
    jobs = planned_jobs(dry_runs("paper", "all"))
    rules = [job["rule"] for job in jobs]
    assert not {"pretrain_base_model", "train_tokenizer", "convert_smollm2", "fetch_corpus"} & set(rules)
    links = sorted(job["shell"] for job in jobs if job["rule"] == "link_external_model")
    assert links == sorted(f"python -m common.models link --source '{{\"hub\": \"{hub}\"}}' --out"
                           f" results/paper/models/external/{name} > logs/paper/link_external_model/{name}.log 2>&1"
                           for name, hub in PAPER_MODELS.items())
    prepared = " ".join(job["shell"] for job in jobs if job["rule"] == "prepare_corpus")
    assert ("--hf-dataset wikitext --text-field text --hf-config wikitext-2-raw-v1 --hf-splits test=test train=train"
            " validation=validation --join '\\n\\n'") in prepared
    (fineweb,) = [job["shell"] for job in jobs if job["rule"] == "prepare_corpus" and "fineweb" in job["shell"]]
    assert "--hf-dataset HuggingFaceFW/fineweb --text-field text --hf-config sample-10BT --hf-split train" \
           " --streaming " in fineweb  # the whole sample, streamed through, split by the hash of each row id
    assert " --validation 0.005 --test 0.005 " in fineweb
    init = "--init results/paper/models/external/llama32_1b "
    shards = "results/paper/tokens/fineweb_sample/llama32_1b"
    sharding = sorted(job["shell"] for job in jobs if job["rule"] == "token_shards")
    assert sharding == [f"python -m common.data shards --tokenizer results/paper/models/external/llama32_1b --split"
                        f" data/corpora/fineweb_sample/{split}.jsonl --shard-tokens 268435456 --out {shards}/{split}"
                        f" > logs/paper/token_shards/fineweb_sample/llama32_1b/{split}.log 2>&1"
                        for split in ("train", "validation")]  # both studies' trains share them
    for rule, cells in (("mw_train", 30), ("wq_train", 44)):  # Max-Window: with its negative control
        trains = [job for job in jobs if job["rule"] == rule]
        assert len(trains) == cells, rule
        assert all(init in job["shell"] for job in trains), rule
        assert all(f" --train {shards}/train --validation {shards}/validation " in job["shell"] for job in trains)
        assert all("--device auto" in job["shell"] and "gpu=1" in job["resources"] for job in trains), rule
        assert all(job["shell"].startswith("OMP_NUM_THREADS=1 python -m ") for job in trains), rule  # one GPU each
    fib = {job["shell"].split(" --model ")[1].split()[0] for job in jobs if job["rule"] == "fib_ptq_cells"}
    assert fib == {f"results/paper/models/external/{m}" for m in ("llama31_8b", "granite33_8b", "deepseek_7b",
                                                                   "qwen25_14b")}
    evaluations = [job for job in jobs
                   if job["rule"] in ("fib_ptq_cells", "msl_ptq_cells", "msl_ptq_sweep_cells", "wq_hessian")]
    assert all("--device auto --dtype bfloat16" in job["shell"] and "gpu=1" in job["resources"]
               for job in evaluations)
    outputs = planned_outputs(dry_runs("paper", "all"))
    assert all(path.startswith(("results/paper/", "reports/paper/", "data/")) for path in outputs)


def test_slurm_gpu_profile_gives_each_training_job_eight_gpus_under_torchrun(dry_runs):
    """workflow/profiles/slurm-gpu, dry run (no cluster): the paper profile, every model step on one GPU, every QAT
    training job on 8 GPUs of one node under torchrun."""
    jobs = planned_jobs(dry_runs("slurm-gpu", "reports/paper/winq.html", "reports/paper/maxwindow_hif8.html",
                                 extra=("--cores", "64")))
    for job in jobs:
        if job["rule"] in ("mw_train", "wq_train"):
            assert "gpu=8" in job["resources"], job
            assert "cpus_per_task=64" in job["resources"], job
            assert "torchrun --standalone --nproc_per_node=8 -m papers." in job["shell"], job
        elif job["rule"] in ("mw_evaluate", "mw_evaluate_base", "wq_evaluate", "wq_hessian", "quantize_checkpoint"):
            assert "gpu=1" in job["resources"], job
        else:
            assert "gpu=" not in job["resources"], job
    assert {job["rule"] for job in jobs} >= {"mw_train", "wq_train", "wq_hessian", "link_external_model"}


def test_standin_profile_plans_the_paper_profile_on_local_models(tmp_path, dry_runs):
    """`--profile workflow/profiles/standin -n` (docs/scale.md; `make standin`): the paper profile's plan with
    every hub model a local folder (here an empty stand-in; the profile's own is the smoke base model), every corpus a
    registry one: all four reports and the index, nothing pretrained, every model linked, the QAT studies continuing
    the linked 1B stand-in on token shards made with its tokenizer, bf16 evaluation, files under results/standin/."""
    stand_in = tmp_path / "model"
    stand_in.mkdir()
    config = tmp_path / "standin.yaml"
    config.write_text(json.dumps({"profiles": {"standin": {"external_models": {
        name: {"path": str(stand_in)} for name in PAPER_MODELS}}}}))
    plan = dry_runs("standin", "all", extra=("--configfile", str(config)))
    jobs = planned_jobs(plan)
    rules = [job["rule"] for job in jobs]
    assert not {"pretrain_base_model", "train_tokenizer", "convert_smollm2"} & set(rules)
    assert rules.count("render_report") == 4
    assert rules.count("report_index") == 1
    links = sorted(job["shell"] for job in jobs if job["rule"] == "link_external_model")
    assert links == sorted(f"python -m common.models link --source '{{\"path\": \"{stand_in}\"}}' --out"
                           f" results/standin/models/external/{name} > logs/standin/link_external_model/{name}.log"
                           " 2>&1" for name in PAPER_MODELS if name != "deepseek_7b")  # two of FIB's four models
    assert not any("--hf-dataset" in job["shell"] for job in jobs if job["rule"] == "prepare_corpus")
    sharding = [job["shell"] for job in jobs if job["rule"] == "token_shards"]
    assert sharding
    assert all(" --tokenizer results/standin/models/external/llama32_1b " in shell for shell in sharding)
    for rule in ("mw_train", "wq_train"):
        trains = [job["shell"] for job in jobs if job["rule"] == rule]
        assert trains, rule
        assert all("--init results/standin/models/external/llama32_1b " in shell for shell in trains), rule
        assert all(" --train results/standin/tokens/" in shell for shell in trains), rule
    fib = {job["shell"].split(" --model ")[1].split()[0] for job in jobs if job["rule"] == "fib_ptq_cells"}
    assert fib == {f"results/standin/models/external/{m}" for m in ("llama31_8b", "qwen25_14b")}
    evaluations = [job for job in jobs if job["rule"] in ("fib_ptq_cells", "msl_ptq_cells", "wq_hessian")]
    assert all("--device auto --dtype bfloat16" in job["shell"] for job in evaluations)
    outputs = planned_outputs(plan)
    assert {f"reports/standin/{paper}.html" for paper in ("finer_is_better", "microscaling_limits",
                                                          "maxwindow_hif8", "winq", "index")} <= outputs
    assert all(path.startswith(("results/standin/", "reports/standin/", "data/")) for path in outputs)
