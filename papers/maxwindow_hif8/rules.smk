# Max-Window HiF8 W8A8 QAT: the continual-pretraining runs the claims compare (settings.STUDY_RUNS: BF16 at both
# learning rates, the recipe and its ablations, CTS and exp_smooth; settings.CONTROL_RUNS: the negative controls of
# the near-lossless bounds, e.g. max_window-lrlow-w40-coarse_scale), each with every seed, evaluated on both corpora
# in BF16 (as trained) and after the shared HiF8 checkpoint quantization; the study summary, the synthetic observer
# study, figures (one job, every figure in one process), claims and the report context that workflow/rules/report.smk
# renders to reports/maxwindow_hif8.html. Every cell <run>/seed<k> is a file target, e.g.
#   results/models/trained/maxwindow_hif8/max_window-lrlow-w40/seed1
#   results/maxwindow_hif8/eval/bf16/max_window-lrlow-w40/seed1/pretrain.json
include: "helpers.smk"


wildcard_constraints:
    mw_run=r"bf16-lr(high|low)|[a-z_]+-lr(high|low)-w[0-9]+(-[a-z_]+)?",
    seed=r"[0-9]+",


rule mw_train:
    """One training cell: continual pretraining of the base model on the shift corpus with one seed, BF16 or HiF8
    W8A8 QAT (resumable: rerunning after a kill continues from the cell's checkpoint.pt)."""
    input:
        init=MW_BASE_DIR,
        train=training_split(MW_CORPORA["shift"], "train", MW_BASE),
        validation=training_split(MW_CORPORA["shift"], "validation", MW_BASE),
    output:
        model=directory(f"{MW_TRAINED}/{{mw_run}}/seed{{seed}}"),
        log=f"{MW_DIR}/runs/{{mw_run}}/seed{{seed}}/train_log.csv",
        summary=f"{MW_DIR}/runs/{{mw_run}}/seed{{seed}}/train_summary.json",
        saturation=f"{MW_DIR}/runs/{{mw_run}}/seed{{seed}}/saturation.json",
        telemetry=f"{MW_DIR}/runs/{{mw_run}}/seed{{seed}}/telemetry.csv.gz",
    log:
        f"{MW_DIR}/runs/{{mw_run}}/seed{{seed}}/stderr.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.maxwindow_hif8.__main__:train_run"),
        config=mw_run_config,
        compute=compute_flags(training=True),
        launch=launcher,
    shell:
        "OMP_NUM_THREADS={threads} {params.launch} -m papers.maxwindow_hif8 train --config-json {params.config}"
        " --run {wildcards.mw_run} --seed {wildcards.seed} --init {input.init} --train {input.train}"
        " --validation {input.validation} --run-dir $(dirname {output.log}) {params.compute} --out {output.model}"
        " 2> {log}"


rule mw_evaluate:
    """One training cell <run>/seed<k> on the held-out test splits of both corpora (perplexity), plus the zero-shot
    tasks of the pretraining corpus, in both precisions in one job: bf16 = as trained (the paper's evaluation), hif8
    = after the shared checkpoint quantization."""
    input:
        bf16=f"{MW_TRAINED}/{{cell}}",
        hif8=f"{RESULTS}/models/quantized/{MW_QUANTIZATION}/trained/{MW_KEY}/{{cell}}",
        pretrain=f"data/corpora/{MW_CORPORA['pretrain']}/test.jsonl",
        shift=f"data/corpora/{MW_CORPORA['shift']}/test.jsonl",
        cloze=f"{RESULTS}/tasks/{MW_CORPORA['pretrain']}/cloze.jsonl",
        choice=f"{RESULTS}/tasks/{MW_CORPORA['pretrain']}/choice.jsonl",
    output:
        pretrain=[f"{MW_DIR}/eval/{p}/{{cell}}/pretrain.json" for p in ("bf16", "hif8")],
        shift=[f"{MW_DIR}/eval/{p}/{{cell}}/shift.json" for p in ("bf16", "hif8")],
    log:
        f"{LOGS}/maxwindow_hif8/eval/{{cell}}.log",
    wildcard_constraints:
        cell=r"(bf16-lr(high|low)|[a-z_]+-lr(high|low)-w[0-9]+(-[a-z_]+)?)/seed[0-9]+",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.maxwindow_hif8.__main__:evaluate"),
        eval=json_arg(MW["eval"]),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.maxwindow_hif8 evaluate --config-json {params.eval}"
        " --model {input.bf16} {input.hif8} --pretrain {input.pretrain} --shift {input.shift} --cloze {input.cloze}"
        " --choice {input.choice} {params.compute} --out-pretrain {output.pretrain} --out-shift {output.shift}"
        " > {log} 2>&1"


rule mw_evaluate_base:
    """The base model before continual pretraining, as mw_evaluate does (in BF16 only)."""
    input:
        model=MW_BASE_DIR,
        pretrain=f"data/corpora/{MW_CORPORA['pretrain']}/test.jsonl",
        shift=f"data/corpora/{MW_CORPORA['shift']}/test.jsonl",
        cloze=f"{RESULTS}/tasks/{MW_CORPORA['pretrain']}/cloze.jsonl",
        choice=f"{RESULTS}/tasks/{MW_CORPORA['pretrain']}/choice.jsonl",
    output:
        pretrain=f"{MW_DIR}/eval/bf16/base/pretrain.json",
        shift=f"{MW_DIR}/eval/bf16/base/shift.json",
    log:
        f"{LOGS}/maxwindow_hif8/eval/base.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.maxwindow_hif8.__main__:evaluate"),
        eval=json_arg(MW["eval"]),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.maxwindow_hif8 evaluate --config-json {params.eval}"
        " --model {input.model} --pretrain {input.pretrain} --shift {input.shift} --cloze {input.cloze}"
        " --choice {input.choice} {params.compute} --out-pretrain {output.pretrain} --out-shift {output.shift}"
        " > {log} 2>&1"


rule mw_summary:
    """The study's summary: loss APE, downstream metrics and drops vs BF16, saturation per run."""
    input:
        logs=mw_run_files("train_log.csv"),
        summaries=mw_run_files("train_summary.json"),
        saturation=mw_run_files("saturation.json"),
        evaluations=MW_EVALUATIONS,
    output:
        MW_SUMMARY,
    log:
        f"{LOGS}/maxwindow_hif8/summary.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.maxwindow_hif8.__main__:summary"),
        config=MW_GRID,
    shell:
        "python -m papers.maxwindow_hif8 summary --config-json {params.config} --logs {input.logs}"
        " --evaluations {input.evaluations} --out {output} > {log} 2>&1"


rule mw_observer_study:
    """The synthetic observer study: amax traces with spikes, drift and oscillation through every observer."""
    output:
        MW_OBSERVER_STUDY,
    log:
        f"{LOGS}/maxwindow_hif8/observer_study.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.maxwindow_hif8.__main__:observer_study"),
        config=json_arg({k: MW[k] for k in ("observers", "observer_options", "observer_study")}),
    shell:
        "python -m papers.maxwindow_hif8 observer-study --config-json {params.config} --out {output} > {log} 2>&1"


rule mw_figures:
    """Every figure of the report, PNG and PDF, in one job (one process): each figure's inputs and options from
    MW_FIGURE_PLANS (helpers.smk); each figure is its own file target (asking for one draws them all)."""
    input:
        figure_inputs(MW_FIGURE_PLANS),
    output:
        png=figure_pngs(MW_FIGURE_PLANS, f"{MW_DIR}/figures", "Max-Window HiF8"),
        pdf=expand(f"{MW_DIR}/figures/{{figure}}.pdf", figure=MW_FIGURES),
    log:
        f"{LOGS}/maxwindow_hif8/figures.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.maxwindow_hif8.__main__:figures"),
        figures=lambda w: figure_arguments(MW_FIGURE_PLANS, f"{MW_DIR}/figures", "--inputs"),
    shell:
        "python -m papers.maxwindow_hif8 figures {params.figures} > {log} 2>&1"


rule mw_claims:
    """The claims table: every row's estimate and interval from the evaluations (paired bootstrap over windows and
    examples), the training logs and the telemetry (block bootstrap over steps), its verdict by the shared rule,
    and the implementation checks (a failed one stops the build)."""
    input:
        evaluations=MW_EVALUATIONS,
        logs=mw_run_files("train_log.csv"),
        telemetry=mw_run_files("telemetry.csv.gz"),
        saturation=mw_run_files("saturation.json"),
        observers=MW_OBSERVER_STUDY,
    output:
        report(f"{MW_DIR}/claims.json", caption="report/claims.rst", category="Max-Window HiF8"),
    log:
        f"{LOGS}/maxwindow_hif8/claims.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.maxwindow_hif8.__main__:claims"),
        config=json_arg(
            {
                k: MW[k]
                for k in (
                    "observers",
                    "observer_options",
                    "learning_rates",
                    "bf16_warmup_steps",
                    "train",
                    "seeds",
                    "claims",
                    "coverage",
                    "history_unit",
                    "regime",
                    "variants",
                )
            }
        ),
        evidence=json_arg(CFG["evidence"]),
    shell:
        "python -m papers.maxwindow_hif8 claims --config-json {params.config} --evidence-json {params.evidence}"
        " --evaluations {input.evaluations} --logs {input.logs} --telemetry {input.telemetry}"
        " --observer-study {input.observers} --out {output} > {log} 2>&1"


rule mw_context:
    """The report context: figures, tables, claims, provenance, rerun commands and the cited artifacts."""
    input:
        summary=MW_SUMMARY,
        observers=MW_OBSERVER_STUDY,
        claims=f"{MW_DIR}/claims.json",
        figures=expand(f"{MW_DIR}/figures/{{figure}}.{{ext}}", figure=MW_FIGURES, ext=("png", "pdf")),
        evaluations=MW_EVALUATIONS,
        logs=mw_run_files("train_log.csv"),
        saturation=mw_run_files("saturation.json"),
        telemetry=mw_run_files("telemetry.csv.gz"),
    output:
        f"{MW_DIR}/report/context.json",
    log:
        f"{LOGS}/maxwindow_hif8/context.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.maxwindow_hif8.__main__:context"),
        config=json_arg(MW),
        profile=config["profile"],
        seed=CFG["seed"],
        pngs=lambda w, input: [f for f in input.figures if f.endswith(".png")],
        metadata=pretraining_metadata([MW_BASE]),
        examples=[f"{MW_TRAINED}/{MW_RECIPE}", f"{MW_DIR}/eval/hif8/{MW_RECIPE}/pretrain.json"],
    shell:
        "python -m papers.maxwindow_hif8 context --config-json {params.config} --profile {params.profile}"
        " --seed {params.seed} --summary {input.summary} --observer-study {input.observers} --claims {input.claims}"
        " --figures {params.pngs} --cited {input.evaluations} {input.logs} {input.saturation} {input.telemetry}"
        " --base-model-metadata {params.metadata} --rerun-example {params.examples} --out {output} > {log} 2>&1"
