# Is finer better? (microscaling limits): analytic MSE curves (theory cells), Monte Carlo curves (simulation
# cells), their comparison with the crossovers, real weight tensors, the perplexity gap per block size and
# scale variant, the function-preserving sweep of the base model (pre-registered crossover, tensor studies,
# perplexity and zero-shot cells per sweep point), figures (one job, every figure in one process), claims, and the
# report context that workflow/rules/report.smk renders to reports/microscaling_limits.html. Every cell is a file
# target, e.g.
#   results/microscaling_limits/simulation/e2m1-ue4m3-b16-absmax.json
#   results/microscaling_limits/ptq/small/e2m1-ue5m3-b8.json            (every block Linear, weights + activations)
#   results/microscaling_limits/ptq/small-c0.1/e2m1-ue4m3-b16-weights.json   (sweep point c=0.1, moved weights)
#   results/microscaling_limits/zeroshot/small-c0.1/e2m1-ue5m3-b16-weights.json
include: "helpers.smk"


from papers.microscaling_limits.sweep import sweep_plan

MSL_SWEEP = sweep_plan(MSL, CFG)  # the sweep points, their cells and the moved linears (papers/.../sweep.py)
MSL_SWEEP_PTQ = [f"{MSL_DIR}/ptq/{m}/{c}.json" for m, cells in MSL_SWEEP["cells"].items() for c in cells]
MSL_SWEEP_CELLS = next(iter(MSL_SWEEP["cells"].values()))  # every sweep point has the same cells (sweep_plan)
MSL_MODEL_CELLS = ["unquantized", *MSL_PTQ_CELLS]  # a model's: the reference and every variant x block size
MSL_SWEEP_ZERO_SHOT = [f"{MSL_DIR}/zeroshot/{m}/{c}.json" for m, cells in MSL_SWEEP["zero_shot"].items() for c in cells]
MSL_SWEEP_TENSORS = [f"{MSL_DIR}/sweep/tensors/{p['model']}.json" for p in MSL_SWEEP["points"]]
MSL_PREREGISTERED = f"{MSL_DIR}/sweep/preregistered.json"
# a cell's config: a sweep point (<model>-c<factor>, common.smk) quantizes the moved linears and scores
# sweep.max_tokens, any other model every block Linear
MSL_CELL_PARTS = {
    False: msl_part("model"),
    True: json_arg({"element": MSL_ELEMENT, "scales": MSL["scales"], "model": MSL_SWEEP["model"]}),
}


rule msl_theory:
    """Theory cell: the analytic MSE (three parts) vs sigma for every block size and distribution."""
    output:
        f"{MSL_DIR}/theory/{{element}}-{{scale}}-{{method}}.json",
    log:
        f"{LOGS}/microscaling_limits/theory/{{element}}-{{scale}}-{{method}}.log",
    wildcard_constraints:
        element="[a-z0-9]+",
        scale="[a-z0-9]+",
        method="[a-z_]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:theory"),
        config=msl_part("theory"),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits theory --config-json {params.config}"
        " --scale {wildcards.scale} --rule {wildcards.method} --out {output} > {log} 2>&1"


rule msl_simulation:
    """The simulation cells of one (scale, rule): Monte Carlo MSE of Normal data vs sigma at every block size, in one
    job (one process start); each cell is its own file target (asking for one runs its scale and rule)."""
    output:
        expand(
            f"{MSL_DIR}/simulation/{{{{element}}}}-{{{{scale}}}}-b{{block}}-{{{{method}}}}.json",
            block=MSL["simulation"]["block_sizes"],
        ),
    log:
        f"{LOGS}/microscaling_limits/simulation/{{element}}-{{scale}}-{{method}}.log",
    wildcard_constraints:
        element="[a-z0-9]+",
        scale="[a-z0-9]+",
        method="[a-z_]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:simulation"),
        config=msl_part("simulation"),
        blocks=" ".join(str(block) for block in MSL["simulation"]["block_sizes"]),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits simulation --config-json {params.config}"
        " --scale {wildcards.scale} --blocks {params.blocks} --rule {wildcards.method} --out {output} > {log} 2>&1"


rule msl_validation:
    """Theory at every simulated point, fit statistics, crossovers and zero-block probabilities."""
    input:
        MSL_SIM_CELLS,
    output:
        MSL_VALIDATION,
    log:
        f"{LOGS}/microscaling_limits/validation.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:validation"),
        config=msl_part("simulation"),
    shell:
        "python -m papers.microscaling_limits validation --config-json {params.config} --cells {input}"
        " --out {output} > {log} 2>&1"


rule msl_paper_simulation:
    """The simulation cells of one scale on the authors' grid (sigma 1e-4 and linspace(1e-3, 0.05, 50)) at every
    block size, in one job (one process start); each cell is its own file target (asking for one runs its scale)."""
    output:
        expand(
            f"{MSL_DIR}/paper_model/simulation/{{{{element}}}}-{{{{scale}}}}-b{{block}}-absmax.json",
            block=MSL["paper_model"]["block_sizes"],
        ),
    log:
        f"{LOGS}/microscaling_limits/paper_model/simulation/{{element}}-{{scale}}.log",
    wildcard_constraints:
        element="[a-z0-9]+",
        scale="[a-z0-9]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:paper_simulation"),
        config=json_arg(
            {"element": MSL_ELEMENT, "paper_model": {k: MSL["paper_model"][k] for k in ("samples", "seed")}}
        ),
        blocks=" ".join(str(block) for block in MSL["paper_model"]["block_sizes"]),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits paper-simulation --config-json {params.config}"
        " --scale {wildcards.scale} --blocks {params.blocks} --out {output} > {log} 2>&1"


rule msl_compare_models:
    """The paper's analytic model and ours at every point of the authors' grid against simulation: errors, fits
    and the crossovers under each model and in the simulation."""
    input:
        MSL_PAPER_CELLS,
    output:
        MSL_COMPARISON,
    log:
        f"{LOGS}/microscaling_limits/paper_model/comparison.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:compare_models"),
        config=json_arg({"element": MSL_ELEMENT}),
    shell:
        "python -m papers.microscaling_limits compare-models --config-json {params.config} --cells {input}"
        " --out {output} > {log} 2>&1"


rule msl_tensors:
    """Every linear weight tensor of a model: fitted sigma, measured vs predicted block MSE, inversions."""
    input:
        checkpoint=msl_tensor_checkpoint,
    output:
        f"{MSL_DIR}/tensors/{{model}}.json",
    log:
        f"{LOGS}/microscaling_limits/tensors/{{model}}.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:tensors"),
        config=msl_part("tensors"),
        checkpoint=lambda w, input: f"--checkpoint {input.checkpoint}" if input.checkpoint else "",
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits tensors --config-json {params.config}"
        " --model {wildcards.model} {params.checkpoint} --out {output} > {log} 2>&1"


rule msl_ptq_cells:
    """Perplexity cells of one model (the reference and every scale variant x block size in FP4 on the weights and
    activations of every block Linear), per-window scores kept, in one job; each cell is its own file target
    (asking for one runs the model's cells)."""
    input:
        model=model_dir,
        split=f"data/corpora/{MSL_CORPUS}/{MSL['model']['split']}.jsonl",
    output:
        expand(f"{MSL_DIR}/ptq/{{{{model}}}}/{{cell}}.json", cell=MSL_MODEL_CELLS),
    log:
        f"{LOGS}/microscaling_limits/ptq/{{model}}.log",
    wildcard_constraints:
        model=r"[A-Za-z0-9_]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:ptq_cells"),
        config=MSL_CELL_PARTS[False],
        cells=" ".join(MSL_MODEL_CELLS),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits ptq-cells --config-json {params.config}"
        " --cells {params.cells} --model {input.model} --split {input.split} --name {wildcards.model}"
        " {params.compute} --out {output} > {log} 2>&1"


rule msl_ptq_sweep_cells:
    """Perplexity cells of one sweep point <model>-c<factor> (the reference; FP4 on the moved linears' weights, and
    weights and activations, per variant and block size), per-window scores kept, in one job; each cell is its own
    file target."""
    input:
        model=model_dir,
        split=f"data/corpora/{MSL_CORPUS}/{MSL['model']['split']}.jsonl",
    output:
        expand(f"{MSL_DIR}/ptq/{{{{model}}}}/{{cell}}.json", cell=MSL_SWEEP_CELLS),
    log:
        f"{LOGS}/microscaling_limits/ptq/{{model}}.log",
    wildcard_constraints:
        model=r"[A-Za-z0-9_]+-c[0-9][0-9.e+-]*",  # SWEEP_MODEL (common.smk)
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:ptq_cells"),
        config=MSL_CELL_PARTS[True],
        cells=" ".join(MSL_SWEEP_CELLS),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits ptq-cells --config-json {params.config}"
        " --cells {params.cells} --model {input.model} --split {input.split} --name {wildcards.model}"
        " {params.compute} --out {output} > {log} 2>&1"


rule msl_zero_shot_cell:
    """Zero-shot cell: cloze and choice accuracy (each example's correctness kept) of one variant and block size
    in FP4, weights (-weights) or weights and activations, of the block Linears (a sweep point: the moved ones)."""
    input:
        model=model_dir,
        cloze=f"{RESULTS}/tasks/{MSL_CORPUS}/cloze.jsonl",
        choice=f"{RESULTS}/tasks/{MSL_CORPUS}/choice.jsonl",
    output:
        f"{MSL_DIR}/zeroshot/{{model}}/{{cell}}.json",
    log:
        f"{LOGS}/microscaling_limits/zeroshot/{{model}}/{{cell}}.log",
    wildcard_constraints:
        cell="[a-z0-9]+-[a-z0-9]+-b[0-9]+(-weights)?",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:zero_shot_cell"),
        config=lambda w: MSL_CELL_PARTS[bool(SWEEP_MODEL.fullmatch(w.model))],
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits zero-shot-cell --config-json {params.config}"
        " --cell {wildcards.cell} --model {input.model} --cloze {input.cloze} --choice {input.choice}"
        " --name {wildcards.model} {params.compute} --out {output} > {log} 2>&1"


rule msl_preregister:
    """The theory's crossover sigma* of the claims' block pair n vs 2n (UE4M3, UE5M3) from the configuration
    alone: no model or data input, so it is fixed before any sweep point exists."""
    output:
        MSL_PREREGISTERED,
    log:
        f"{LOGS}/microscaling_limits/sweep/preregistered.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:preregister"),
        config=json_arg({"element": MSL_ELEMENT, "sweep": {"block_size": MSL_SWEEP["block_size"]}}),
    shell:
        "python -m papers.microscaling_limits preregister --config-json {params.config} --out {output} > {log} 2>&1"


rule msl_sweep_tensors:
    """A sweep point's moved weight tensors: fitted sigma, measured vs predicted MSE at blocks n and 2n."""
    input:
        checkpoint=model_dir,
    output:
        f"{MSL_DIR}/sweep/tensors/{{model}}.json",
    log:
        f"{LOGS}/microscaling_limits/sweep/tensors/{{model}}.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.microscaling_limits.__main__:tensors"),
        config=json_arg(
            {
                "element": MSL_ELEMENT,
                "scales": MSL_SWEEP["scales"],
                "tensors": {"block_sizes": MSL_SWEEP["tensor_blocks"]},
            }
        ),
        include=shlex.quote(MSL_SWEEP["include"]),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.microscaling_limits tensors --config-json {params.config}"
        " --model {wildcards.model} --checkpoint {input.checkpoint} --include {params.include} --out {output}"
        " > {log} 2>&1"


rule msl_sweep_summary:
    """The sweep's table and figure data: sigma per point, perplexity gaps, ppl(n)/ppl(2n) - 1 with intervals."""
    input:
        preregistered=MSL_PREREGISTERED,
        tensors=MSL_SWEEP_TENSORS,
        cells=MSL_SWEEP_PTQ,
        zero_shot=MSL_SWEEP_ZERO_SHOT,
    output:
        f"{MSL_DIR}/sweep/summary.json",
    log:
        f"{LOGS}/microscaling_limits/sweep/summary.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:sweep_summary"),
        config=json_arg({"element": MSL_ELEMENT, "points": MSL_SWEEP["points"]}),
        evidence=json_arg(CFG["evidence"]),
    shell:
        "python -m papers.microscaling_limits sweep-summary --config-json {params.config}"
        " --evidence-json {params.evidence} --preregistered {input.preregistered} --tensors {input.tensors}"
        " --cells {input.cells} --zero-shot {input.zero_shot} --out {output} > {log} 2>&1"


rule msl_gap_summary:
    """One model's perplexity gaps (cell minus unquantized)."""
    input:
        unquantized=f"{MSL_DIR}/ptq/{{model}}/unquantized.json",
        cells=msl_model_cells,
    output:
        f"{MSL_DIR}/ptq/{{model}}/summary.json",
    log:
        f"{LOGS}/microscaling_limits/ptq/{{model}}/summary.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:gap_summary"),
    shell:
        "python -m papers.microscaling_limits gap-summary --model {wildcards.model}"
        " --unquantized {input.unquantized} --cells {input.cells} --out {output} > {log} 2>&1"


rule msl_figures:
    """Every figure of the report, PNG and PDF, in one job (one process): each figure's kind, inputs and options from
    MSL_FIGURE_PLANS (helpers.smk); each figure is its own file target (asking for one draws them all)."""
    input:
        figure_inputs(MSL_FIGURE_PLANS),
    output:
        png=figure_pngs(MSL_FIGURE_PLANS, f"{MSL_DIR}/figures", "Is finer better?"),
        pdf=expand(f"{MSL_DIR}/figures/{{figure}}.pdf", figure=MSL_FIGURES),
    log:
        f"{LOGS}/microscaling_limits/figures.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:figures"),
        figures=lambda w: figure_arguments(MSL_FIGURE_PLANS, f"{MSL_DIR}/figures", "--inputs"),
    shell:
        "python -m papers.microscaling_limits figures {params.figures} > {log} 2>&1"


rule msl_claims:
    """The claims table: every row's estimate with its 95% interval and the verdict by the rule, and the
    implementation checks (a failed check fails this job)."""
    input:
        preregistered=MSL_PREREGISTERED,
        validation=MSL_VALIDATION,
        comparison=MSL_COMPARISON,
        theory=expand(
            f"{MSL_DIR}/theory/{MSL_ELEMENT}-{{scale}}-{{method}}.json", scale=MSL["scales"], method=MSL["rules"]
        ),
        tensors=MSL_SWEEP_TENSORS,
        cells=MSL_SWEEP_PTQ,
        zero_shot=MSL_SWEEP_ZERO_SHOT,
    output:
        report(f"{MSL_DIR}/claims.json", caption="report/claims.rst", category="Is finer better?"),
    log:
        f"{LOGS}/microscaling_limits/claims.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:claims"),
        config=json_arg(
            {
                "element": MSL_ELEMENT,
                "claims": MSL["claims"],
                "coverage": MSL["coverage"],
                "points": MSL_SWEEP["points"],
                "regime": MSL["regime"],
            }
        ),
        evidence=json_arg(CFG["evidence"]),
    shell:
        "python -m papers.microscaling_limits claims --config-json {params.config} --evidence-json {params.evidence}"
        " --preregistered {input.preregistered} --validation {input.validation} --comparison {input.comparison}"
        " --theory {input.theory}"
        " --tensors {input.tensors} --cells {input.cells} --zero-shot {input.zero_shot} --out {output} > {log} 2>&1"


rule msl_context:
    """The report context: figures, tables, claims, provenance, rerun commands and the cited artifacts."""
    input:
        validation=MSL_VALIDATION,
        comparison=MSL_COMPARISON,
        tensors=expand(f"{MSL_DIR}/tensors/{{model}}.json", model=MSL_TENSOR_MODELS),
        models=expand(f"{MSL_DIR}/ptq/{{model}}/summary.json", model=MSL_MODELS),
        sweep=f"{MSL_DIR}/sweep/summary.json",
        claims=f"{MSL_DIR}/claims.json",
        figures=expand(f"{MSL_DIR}/figures/{{figure}}.{{ext}}", figure=MSL_FIGURES, ext=("png", "pdf")),
        theory=expand(
            f"{MSL_DIR}/theory/{MSL_ELEMENT}-{{scale}}-{{method}}.json", scale=MSL["scales"], method=MSL["rules"]
        ),
        cells=MSL_SIM_CELLS,
        paper_cells=MSL_PAPER_CELLS,
        model_cells=expand(f"{MSL_DIR}/ptq/{{model}}/{{cell}}.json", model=MSL_MODELS, cell=MSL_MODEL_CELLS),
        sweep_cells=[MSL_PREREGISTERED, *MSL_SWEEP_TENSORS, *MSL_SWEEP_PTQ, *MSL_SWEEP_ZERO_SHOT],
    output:
        f"{MSL_DIR}/report/context.json",
    log:
        f"{LOGS}/microscaling_limits/context.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.microscaling_limits.__main__:context"),
        config=json_arg(MSL),
        profile=config["profile"],
        seed=CFG["seed"],
        pngs=lambda w, input: [f for f in input.figures if f.endswith(".png")],
        metadata=pretraining_metadata([*MSL_MODELS, *MSL_TENSOR_MODELS]),
        examples=[f"{MSL_DIR}/ptq/{MSL_MODELS[0]}/{MSL_PTQ_CELLS[0]}.json", MSL_SWEEP_PTQ[1], MSL_SIM_CELLS[0]],
    shell:
        "python -m papers.microscaling_limits context --config-json {params.config} --profile {params.profile}"
        " --seed {params.seed} --validation {input.validation} --comparison {input.comparison}"
        " --tensors {input.tensors} --models {input.models}"
        " --sweep-summary {input.sweep} --claims {input.claims} --figures {params.pngs}"
        " --cited {input.theory} {input.cells} {input.paper_cells} {input.model_cells} {input.sweep_cells}"
        " --base-model-metadata {params.metadata} --rerun-example {params.examples} --out {output} > {log} 2>&1"
