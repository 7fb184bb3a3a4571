# lowbit-lab: one Snakefile for every paper. `snakemake` (no target) builds every report that exists;
# `snakemake reports/<paper>.html` builds one; any intermediate file (an ablation cell) is a target too.
import os
import shutil
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

from workflow.build_platform import numerical_pins
from workflow.published_mtimes import restore

min_version("9.0")

# a clone's published results get their build's modification times (git writes every file at checkout time, and a
# base model folder checked out after the results built from it would stale them all)
restore()
# every job runs under the pinned numerical code paths (envs/numerics.env), whoever started Snakemake
os.environ.update(numerical_pins())


configfile: "workflow/config/default.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


# Shared stages in dependency order (data, base models, evaluation, quantization, reports), then the papers.
SHARED_RULES = ("common", "data", "base_model", "eval", "ptq", "report")
for name in SHARED_RULES:
    if Path(f"workflow/rules/{name}.smk").exists():

        include: f"workflow/rules/{name}.smk"


PAPERS = [p.parent.name for p in sorted(Path("papers").glob("*/rules.smk"))]
for paper in PAPERS:

    include: f"papers/{paper}/rules.smk"


onstart:
    # before any job (not on a dry run): stop, naming each hub model or dataset the planned jobs cannot reach
    unreachable = unreachable_hub_inputs(workflow.dag.needrun_jobs())
    if unreachable:
        raise WorkflowError(
            f"profile {config['profile']!r} needs from the Hugging Face hub what this machine cannot reach (offline,"
            " not in the cache); fetch each with the command given, or name a local copy ({path: DIR} for a model,"
            " a dataset folder for a corpus), then rerun:\n  " + "\n  ".join(unreachable)
        )


rule all:
    """Every report of every paper whose pipeline exists, the index, and the PDFs when latexmk is installed."""
    default_target: True
    input:
        expand(f"{REPORTS}/{{paper}}.html", paper=PAPERS),
        f"{REPORTS}/index.html",
        expand(f"{REPORTS}/{{paper}}.pdf", paper=PAPERS) if shutil.which("latexmk") else [],
