# Is finer better? (microscaling limits): analytic MSE curves (theory cells), Monte Carlo curves (simulation
# cells), their comparison with the crossovers, real weight tensors, the perplexity gap per block size and
# scale variant, figures (one rule each), claims, and the report context that workflow/rules/report.smk
# renders to reports/microscaling_limits.html. Every cell is a file target, e.g.
#   results/microscaling_limits/simulation/e2m1-ue4m3-b16-absmax.json
#   results/microscaling_limits/ptq/small/e2m1-ue5m3-b8.json
include: "helpers.smk"


rule msl_theory:
    """Theory cell: the analytic MSE (three parts) vs sigma for every block size and distribution."""
    output:
        f"{MSL_DIR}/theory/{{element}}-{{scale}}-{{method}}.json",
    log:
        "logs/microscaling_limits/theory/{element}-{scale}-{method}.log",
    wildcard_constraints:
        element="[a-z0-9]+",
        scale="[a-z0-9]+",
        method="[a-z_]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        config=msl_part("theory"),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits theory --config-json {params.config}"
        " --scale {wildcards.scale} --rule {wildcards.method} --out {output} > {log} 2>&1"


rule msl_simulation:
    """Simulation cell: Monte Carlo MSE of Normal data vs sigma at one (scale, block size, rule)."""
    output:
        f"{MSL_DIR}/simulation/{{element}}-{{scale}}-b{{block}}-{{method}}.json",
    log:
        "logs/microscaling_limits/simulation/{element}-{scale}-b{block}-{method}.log",
    wildcard_constraints:
        element="[a-z0-9]+",
        scale="[a-z0-9]+",
        block="[0-9]+",
        method="[a-z_]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        config=msl_part("simulation"),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits simulation --config-json {params.config}"
        " --scale {wildcards.scale} --block {wildcards.block} --rule {wildcards.method} --out {output} > {log} 2>&1"


rule msl_validation:
    """Theory at every simulated point, fit statistics, crossovers and zero-block probabilities."""
    input:
        MSL_SIM_CELLS,
    output:
        f"{MSL_DIR}/validation.json",
    log:
        "logs/microscaling_limits/validation.log",
    conda:
        CONDA_ENV
    params:
        config=msl_part("simulation"),
    shell:
        "python -m papers.microscaling_limits validation --config-json {params.config} --cells {input}"
        " --out {output} > {log} 2>&1"


rule msl_tensors:
    """Every linear weight tensor of a model: fitted sigma, measured vs predicted block MSE, inversions."""
    input:
        checkpoint=msl_tensor_checkpoint,
    output:
        f"{MSL_DIR}/tensors/{{model}}.json",
    log:
        "logs/microscaling_limits/tensors/{model}.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        config=msl_part("tensors"),
        checkpoint=lambda w, input: f"--checkpoint {input.checkpoint}" if input.checkpoint else "",
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits tensors --config-json {params.config}"
        " --model {wildcards.model} {params.checkpoint} --out {output} > {log} 2>&1"


rule msl_ptq_cell:
    """Perplexity cell: every block Linear's weights and activations in FP4 with one scale variant."""
    input:
        model=model_dir,
        split=f"data/corpora/{MSL_CORPUS}/{MSL['model']['split']}.jsonl",
    output:
        f"{MSL_DIR}/ptq/{{model}}/{{cell}}.json",
    log:
        "logs/microscaling_limits/ptq/{model}/{cell}.log",
    wildcard_constraints:
        cell="unquantized|[a-z0-9]+-[a-z0-9]+-b[0-9]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        config=msl_part("model"),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits ptq-cell --config-json {params.config}"
        " --cell {wildcards.cell} --model {input.model} --split {input.split} --out {output} > {log} 2>&1"


rule msl_gap_summary:
    """One model's perplexity gaps (cell minus unquantized)."""
    input:
        unquantized=f"{MSL_DIR}/ptq/{{model}}/unquantized.json",
        cells=msl_model_cells,
    output:
        f"{MSL_DIR}/ptq/{{model}}/summary.json",
    log:
        "logs/microscaling_limits/ptq/{model}/summary.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits gap-summary --model {wildcards.model}"
        " --unquantized {input.unquantized} --cells {input.cells} --out {output} > {log} 2>&1"


rule msl_figure_theory_vs_simulation:
    """Figure: theory curves over simulation points for one scale format."""
    input:
        theory=f"{MSL_DIR}/theory/{MSL_ELEMENT}-{{scale}}-absmax.json",
        validation=f"{MSL_DIR}/validation.json",
    output:
        png=report(
            f"{MSL_DIR}/figures/theory-vs-simulation-{{scale}}.png",
            caption="report/figure.rst",
            category="Is finer better?",
            subcategory="theory",
        ),
        pdf=f"{MSL_DIR}/figures/theory-vs-simulation-{{scale}}.pdf",
    log:
        "logs/microscaling_limits/figures/theory-vs-simulation-{scale}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits figure theory-vs-simulation --inputs {input.theory} {input.validation}"
        " --png {output.png} --pdf {output.pdf} > {log} 2>&1"


rule msl_figure_parts:
    """Figure: the three contributions of the theory's MSE at one block size."""
    input:
        f"{MSL_DIR}/theory/{MSL_ELEMENT}-{{scale}}-absmax.json",
    output:
        png=report(
            f"{MSL_DIR}/figures/parts-{{scale}}-b{{block}}.png",
            caption="report/figure.rst",
            category="Is finer better?",
            subcategory="theory",
        ),
        pdf=f"{MSL_DIR}/figures/parts-{{scale}}-b{{block}}.pdf",
    log:
        "logs/microscaling_limits/figures/parts-{scale}-b{block}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits figure parts --inputs {input} --block {wildcards.block}"
        " --png {output.png} --pdf {output.pdf} > {log} 2>&1"


rule msl_figure_fit:
    """Figure: theory / simulation - 1 at every simulated point."""
    input:
        f"{MSL_DIR}/validation.json",
    output:
        png=report(
            f"{MSL_DIR}/figures/fit.png",
            caption="report/figure.rst",
            category="Is finer better?",
            subcategory="theory",
        ),
        pdf=f"{MSL_DIR}/figures/fit.pdf",
    log:
        "logs/microscaling_limits/figures/fit.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits figure fit --inputs {input} --png {output.png} --pdf {output.pdf}"
        " > {log} 2>&1"


rule msl_figure_crossovers:
    """Figure: crossover sigma per block size and scale with the models' weight sigma ranges."""
    input:
        validation=f"{MSL_DIR}/validation.json",
        tensors=expand(f"{MSL_DIR}/tensors/{{model}}.json", model=MSL_TENSOR_MODELS),
    output:
        png=report(
            f"{MSL_DIR}/figures/crossovers.png",
            caption="report/figure.rst",
            category="Is finer better?",
            subcategory="theory",
        ),
        pdf=f"{MSL_DIR}/figures/crossovers.pdf",
    log:
        "logs/microscaling_limits/figures/crossovers.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits figure crossovers --inputs {input.validation} {input.tensors}"
        " --png {output.png} --pdf {output.pdf} > {log} 2>&1"


rule msl_figure_tensors:
    """Figure: measured vs predicted MSE of one model's weight tensors."""
    input:
        f"{MSL_DIR}/tensors/{{model}}.json",
    output:
        png=report(
            f"{MSL_DIR}/figures/tensors-{{model}}.png",
            caption="report/figure.rst",
            category="Is finer better?",
            subcategory="weight tensors",
        ),
        pdf=f"{MSL_DIR}/figures/tensors-{{model}}.pdf",
    log:
        "logs/microscaling_limits/figures/tensors-{model}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits figure tensors --inputs {input} --png {output.png} --pdf {output.pdf}"
        " > {log} 2>&1"


rule msl_figure_gap:
    """Figure: perplexity gap vs block size per scale variant for one model."""
    input:
        f"{MSL_DIR}/ptq/{{model}}/summary.json",
    output:
        png=report(
            f"{MSL_DIR}/figures/gap-{{model}}.png",
            caption="report/figure.rst",
            category="Is finer better?",
            subcategory="model study",
        ),
        pdf=f"{MSL_DIR}/figures/gap-{{model}}.pdf",
    log:
        "logs/microscaling_limits/figures/gap-{model}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m papers.microscaling_limits figure gap --inputs {input} --png {output.png} --pdf {output.pdf}"
        " > {log} 2>&1"


rule msl_claims:
    """The claims table: every claim checked against the artifacts by its stated rule."""
    input:
        validation=f"{MSL_DIR}/validation.json",
        tensors=expand(f"{MSL_DIR}/tensors/{{model}}.json", model=MSL_TENSOR_MODELS),
        models=expand(f"{MSL_DIR}/ptq/{{model}}/summary.json", model=MSL_MODELS),
    output:
        report(f"{MSL_DIR}/claims.json", caption="report/claims.rst", category="Is finer better?"),
    log:
        "logs/microscaling_limits/claims.log",
    conda:
        CONDA_ENV
    params:
        thresholds=json_arg(MSL["claims"]),
    shell:
        "python -m papers.microscaling_limits claims --config-json {params.thresholds}"
        " --validation {input.validation} --tensors {input.tensors} --models {input.models} --out {output}"
        " > {log} 2>&1"


rule msl_context:
    """The report context: figures, tables, claims, provenance, rerun commands and the cited artifacts."""
    input:
        validation=f"{MSL_DIR}/validation.json",
        tensors=expand(f"{MSL_DIR}/tensors/{{model}}.json", model=MSL_TENSOR_MODELS),
        models=expand(f"{MSL_DIR}/ptq/{{model}}/summary.json", model=MSL_MODELS),
        claims=f"{MSL_DIR}/claims.json",
        figures=expand(f"{MSL_DIR}/figures/{{figure}}.{{ext}}", figure=MSL_FIGURES, ext=("png", "pdf")),
        theory=expand(
            f"{MSL_DIR}/theory/{MSL_ELEMENT}-{{scale}}-{{method}}.json", scale=MSL["scales"], method=MSL["rules"]
        ),
        cells=MSL_SIM_CELLS,
        model_cells=expand(
            f"{MSL_DIR}/ptq/{{model}}/{{cell}}.json", model=MSL_MODELS, cell=["unquantized", *MSL_PTQ_CELLS]
        ),
    output:
        f"{MSL_DIR}/report/context.json",
    log:
        "logs/microscaling_limits/context.log",
    conda:
        CONDA_ENV
    params:
        config=json_arg(MSL),
        profile=config["profile"],
        seed=CFG["seed"],
        pngs=lambda w, input: [f for f in input.figures if f.endswith(".png")],
        metadata=[f"results/models/base/{CFG['base_model']}/lowbit_metadata.json"],
        examples=[f"{MSL_DIR}/ptq/{CFG['base_model']}/{MSL_PTQ_CELLS[0]}.json", MSL_SIM_CELLS[0]],
    shell:
        "python -m papers.microscaling_limits context --config-json {params.config} --profile {params.profile}"
        " --seed {params.seed} --validation {input.validation} --tensors {input.tensors} --models {input.models}"
        " --claims {input.claims} --figures {params.pngs} --cited {input.theory} {input.cells} {input.model_cells}"
        " --base-model-metadata {params.metadata} --rerun-example {params.examples} --out {output} > {log} 2>&1"
