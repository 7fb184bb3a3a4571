# Finer is Better (with the Right Scaling): numerical study (MSE vs sigma per cell), model study (perplexity gap
# per cell), figures (one job, every figure in one process), claims with computed verdicts, and the report context that
# workflow/rules/report.smk renders to reports/finer_is_better.html. Cells are single-threaded jobs (they are
# many and independent: Snakemake runs `--cores` of them at once). Every cell is a file target:
#   results/finer_is_better/mse/e2m1-ue4m3-b4-four_over_six.json             (one job per scale and variant)
#   results/finer_is_better/ptq/small-c0.25/wa/e2m1-ue4m3-b4-four_over_six.json  (a sweep point, weights + activations)
include: "helpers.smk"


rule fib_mse_cells:
    """The numerical cells of one (scale, variant): MSE vs sigma of Normal data at every block size, in one job (one
    process start); each cell is its own file target (asking for one runs its scale and variant)."""
    output:
        expand(
            f"{FIB_DIR}/mse/{FIB['element']}-{{{{scale}}}}-b{{block}}-{{{{variant}}}}.json",
            block=FIB["numerical"]["block_sizes"],
        ),
    log:
        f"{LOGS}/finer_is_better/mse/{{scale}}-{{variant}}.log",
    wildcard_constraints:
        scale="[a-z0-9]+",
        variant="[a-z0-9_]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.finer_is_better.__main__:mse_cells"),
        config=fib_mse_config,
        cells=lambda w: " ".join(
            f"{FIB['element']}-{w.scale}-b{block}-{w.variant}" for block in FIB["numerical"]["block_sizes"]
        ),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.finer_is_better mse-cells --config-json {params.config}"
        " --cells {params.cells} --out {output} > {log} 2>&1"


rule fib_mse_summary:
    """The numerical study's tidy table and the Regions A and B detected in it."""
    input:
        expand(f"{FIB_DIR}/mse/{{cell}}.json", cell=fib_cells(FIB, "numerical")),
    output:
        FIB_NUMERICAL,
    log:
        f"{LOGS}/finer_is_better/mse_summary.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.finer_is_better.__main__:mse_summary"),
        config=json_arg({"element": FIB["element"], "regions": FIB["regions"]}),
    shell:
        "python -m papers.finer_is_better mse-summary --config-json {params.config} --cells {input}"
        " --out {output} > {log} 2>&1"


rule fib_ptq_unquantized:
    """The model study's reference: perplexity of the unquantized sweep point (the same windows as the cells) and
    the weight sigma of the linears the cells quantize."""
    input:
        model=model_dir,
        split=f"data/corpora/{FIB_CORPUS}/{FIB['model']['split']}.jsonl",
    output:
        f"{FIB_DIR}/ptq/{{model}}/unquantized.json",
    log:
        f"{LOGS}/finer_is_better/ptq/{{model}}/unquantized.log",
    wildcard_constraints:
        model="[^/]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.finer_is_better.__main__:ptq_unquantized"),
        config=fib_ptq_config(quantized=False),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.finer_is_better ptq-unquantized --config-json {params.config}"
        " --model {input.model} --split {input.split} {params.compute} --out {output} > {log} 2>&1"


rule fib_ptq_cells:
    """Every model-study cell of one sweep point and operand set (w: weights only, wa: weights and activations),
    in one job that loads the model once; each cell is its own file target (asking for one runs the point)."""
    input:
        model=model_dir,
        split=f"data/corpora/{FIB_CORPUS}/{FIB['model']['split']}.jsonl",
    output:
        expand(f"{FIB_DIR}/ptq/{{{{model}}}}/{{{{operands}}}}/{{cell}}.json", cell=fib_cells(FIB, "model")),
    log:
        f"{LOGS}/finer_is_better/ptq/{{model}}/{{operands}}.log",
    wildcard_constraints:
        model="[^/]+",
        operands="w|wa",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.finer_is_better.__main__:ptq_cells"),
        config=fib_ptq_config(quantized=True),
        cells=" ".join(fib_cells(FIB, "model")),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.finer_is_better ptq-cells --config-json {params.config}"
        " --cells {params.cells} --operands {wildcards.operands} --model {input.model} --split {input.split}"
        " {params.compute} --out {output} > {log} 2>&1"


rule fib_gap_summary:
    """One sweep point's perplexity gaps (cell minus unquantized), windows and weight sigma."""
    input:
        unquantized=f"{FIB_DIR}/ptq/{{model}}/unquantized.json",
        cells=fib_model_cells,
    output:
        f"{FIB_DIR}/ptq/{{model}}/summary.json",
    log:
        f"{LOGS}/finer_is_better/ptq/{{model}}/summary.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.finer_is_better.__main__:gap_summary"),
    shell:
        "python -m papers.finer_is_better gap-summary --model {wildcards.model} --unquantized {input.unquantized}"
        " --cells {input.cells} --out {output} > {log} 2>&1"


rule fib_figures:
    """Every figure of the report, PNG and PDF, in one job (one process): each figure's kind, inputs and options from
    FIB_FIGURE_PLANS (helpers.smk); each figure is its own file target (asking for one draws them all)."""
    input:
        figure_inputs(FIB_FIGURE_PLANS),
    output:
        png=figure_pngs(FIB_FIGURE_PLANS, f"{FIB_DIR}/figures", "Finer is Better"),
        pdf=expand(f"{FIB_DIR}/figures/{{figure}}.pdf", figure=FIB_FIGURES),
    log:
        f"{LOGS}/finer_is_better/figures.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.finer_is_better.__main__:figures"),
        figures=lambda w: figure_arguments(FIB_FIGURE_PLANS, f"{FIB_DIR}/figures", "--summary"),
    shell:
        "python -m papers.finer_is_better figures {params.figures} > {log} 2>&1"


rule fib_claims:
    """The claims document: every row's estimate, interval and rule-made verdict, and the implementation checks."""
    input:
        numerical=FIB_NUMERICAL,
        models=expand(f"{FIB_DIR}/ptq/{{model}}/summary.json", model=FIB_SWEEP),
        paper=FIB_PAPER_RESULTS,
    output:
        report(f"{FIB_DIR}/claims.json", caption="report/claims.rst", category="Finer is Better"),
    log:
        f"{LOGS}/finer_is_better/claims.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.finer_is_better.__main__:claims"),
        config=lambda w: json_arg(
            {k: FIB[k] for k in ("element", "model", "paper_gaps", "claims", "coverage", "regime")}
        ),
        # no {} expansion
        evidence=json_arg(CFG["evidence"]),
    shell:
        "python -m papers.finer_is_better claims --config-json {params.config} --evidence-json {params.evidence}"
        " --numerical {input.numerical} --models {input.models} --paper-results {input.paper} --out {output}"
        " > {log} 2>&1"


rule fib_context:
    """The report context: figures, tables, claims, provenance, rerun commands and the cited artifacts."""
    input:
        numerical=FIB_NUMERICAL,
        models=expand(f"{FIB_DIR}/ptq/{{model}}/summary.json", model=FIB_SWEEP),
        claims=f"{FIB_DIR}/claims.json",
        paper=FIB_PAPER_RESULTS,
        paper_source=FIB_PAPER_SOURCE,
        figures=expand(f"{FIB_DIR}/figures/{{figure}}.{{ext}}", figure=FIB_FIGURES, ext=("png", "pdf")),
        cells=expand(f"{FIB_DIR}/mse/{{cell}}.json", cell=fib_cells(FIB, "numerical")),
        model_cells=expand(
            f"{FIB_DIR}/ptq/{{model}}/{{cell}}.json",
            model=FIB_SWEEP,
            cell=["unquantized", *(f"{o}/{c}" for o in FIB["model"]["operands"] for c in fib_cells(FIB, "model"))],
        ),
    output:
        f"{FIB_DIR}/report/context.json",
    log:
        f"{LOGS}/finer_is_better/context.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.finer_is_better.__main__:context"),
        config=lambda w: json_arg(FIB),  # a function: the claims' LaTeX braces are not wildcards
        profile=config["profile"],
        seed=CFG["seed"],
        pngs=lambda w, input: [f for f in input.figures if f.endswith(".png")],
        metadata=pretraining_metadata(FIB_MODELS),
        examples=[
            f"{FIB_DIR}/ptq/{FIB_SWEEP[0]}/{FIB['model']['operands'][0]}/{fib_cells(FIB, 'model')[0]}.json",
            f"{FIB_DIR}/mse/{fib_cells(FIB, 'numerical')[0]}.json",
        ],
    shell:
        "python -m papers.finer_is_better context --config-json {params.config} --profile {params.profile}"
        " --seed {params.seed} --numerical {input.numerical} --models {input.models} --claims {input.claims}"
        " --paper-results {input.paper} --figures {params.pngs}"
        " --cited {input.cells} {input.model_cells} {input.paper} {input.paper_source}"
        " --base-model-metadata {params.metadata} --rerun-example {params.examples} --out {output} > {log} 2>&1"
