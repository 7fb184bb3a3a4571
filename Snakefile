# lowbit-lab: one Snakefile for every paper. `snakemake` (no target) builds every report that exists;
# `snakemake reports/<paper>.html` builds one; any intermediate file (an ablation cell) is a target too.
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.0")

configfile: "workflow/config/default.yaml"

validate(config, "workflow/schemas/config.schema.yaml")

# Shared stages (data, base models, evaluation, report machinery), then one rules file per paper.
for rules_file in sorted(Path("workflow/rules").glob("*.smk")):
    include: str(rules_file)

PAPERS = [p.parent.name for p in sorted(Path("papers").glob("*/rules.smk"))]
for paper in PAPERS:
    include: f"papers/{paper}/rules.smk"


rule all:
    """Every report of every paper whose pipeline exists."""
    default_target: True
    input:
        expand("reports/{paper}.html", paper=PAPERS),
