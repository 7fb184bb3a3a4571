# WinQ: low-bit QAT of the base model on its pretraining corpus, every study setting (weight bits, activation bits)
# x method (baseline ParetoQ QAT, WinQ, interpolation only, noise only); each trained model checkpoint-quantized by
# the shared rule (packed codes + learned scales) and evaluated; Hessian spectra by stochastic Lanczos quadrature;
# the study summary, figures (one job), claims and the report context that workflow/rules/report.smk renders to
# reports/winq.html. Every training cell (one seed of a run) is a file target, e.g.
#   results/models/trained/winq/w2-winq/seed1
#   results/winq/eval/w2-winq/seed1.json
#   results/winq/hessian/w2-baseline/seed1.json
include: "helpers.smk"


wildcard_constraints:
    wq_run=r"[a-z0-9.]+-(baseline|winq|interpolation|noise)",
    wq_seed=r"0|[1-9][0-9]*",
    wq_candidate=r"[a-z0-9._-]+",


# one training cell's command (wq_train, wq_pilot_train: each rule's own run config)
WQ_TRAIN = (
    "OMP_NUM_THREADS={threads} {params.launch} -m papers.winq train --config-json {params.config}"
    " --run {wildcards.wq_run} --seed {wildcards.wq_seed} --init {input.init} --train {input.train}"
    " --validation {input.validation} --run-dir $(dirname {output.log}) {params.compute} --out {output.model}"
    " 2> {log}"
)


rule wq_train:
    """One training cell: low-bit QAT of the base model on one seed (data order, initialisation, noise; resumable:
    rerunning after a kill continues from its checkpoint.pt), with its diagnostics: the mechanism at the
    interpolation boundaries and the authors' stagnation statistic at every evaluation."""
    input:
        init=WQ_BASE_DIR,
        train=training_split(WQ_CORPUS, "train", WQ_BASE),
        validation=training_split(WQ_CORPUS, "validation", WQ_BASE),
    output:
        model=directory(f"{WQ_TRAINED}/{{wq_run}}/seed{{wq_seed}}"),
        curve=f"{WQ_DIR}/runs/{{wq_run}}/seed{{wq_seed}}/eval_log.csv",
        log=f"{WQ_DIR}/runs/{{wq_run}}/seed{{wq_seed}}/train_log.csv",
        summary=f"{WQ_DIR}/runs/{{wq_run}}/seed{{wq_seed}}/train_summary.json",
        mechanism=f"{WQ_DIR}/runs/{{wq_run}}/seed{{wq_seed}}/mechanism.jsonl",
        stagnation=f"{WQ_DIR}/runs/{{wq_run}}/seed{{wq_seed}}/stagnation.jsonl",
    log:
        f"{WQ_DIR}/runs/{{wq_run}}/seed{{wq_seed}}/stderr.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.winq.__main__:train_run"),
        config=wq_run_config,
        compute=compute_flags(training=True),
        launch=launcher,
    shell:
        WQ_TRAIN


rule wq_evaluate:
    """One model on the held-out test split: perplexity and the zero-shot tasks. A training cell is evaluated after
    the shared checkpoint quantization; base = the full-precision base model."""
    input:
        model=wq_eval_model,
        split=f"data/corpora/{WQ_CORPUS}/test.jsonl",
        cloze=f"{RESULTS}/tasks/{WQ_CORPUS}/cloze.jsonl",
        choice=f"{RESULTS}/tasks/{WQ_CORPUS}/choice.jsonl",
    output:
        f"{WQ_DIR}/eval/{{wq_model}}.json",
    log:
        f"{LOGS}/winq/eval/{{wq_model}}.log",
    wildcard_constraints:
        wq_model=r"base|[a-z0-9.]+-(baseline|winq|interpolation|noise)/seed(0|[1-9][0-9]*)",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.winq.__main__:evaluate"),
        eval=json_arg(WQ["eval"]),
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.winq evaluate --config-json {params.eval} --model {input.model}"
        " --split {input.split} --cloze {input.cloze} --choice {input.choice} {params.compute} --out {output}"
        " > {log} 2>&1"


rule wq_hessian:
    """The Hessian spectrum of one trained cell (stochastic Lanczos quadrature over the quantized layers' latent
    weights, on the first sequences of the training split; the same probes for every cell)."""
    input:
        model=f"{WQ_TRAINED}/{{wq_run}}/seed{{wq_seed}}",
        split=f"data/corpora/{WQ_CORPUS}/train.jsonl",
    output:
        f"{WQ_DIR}/hessian/{{wq_run}}/seed{{wq_seed}}.json",
    log:
        f"{LOGS}/winq/hessian/{{wq_run}}/seed{{wq_seed}}.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.winq.__main__:hessian"),
        config=json_arg({"hessian": WQ_HESSIAN_CELL, "train": {"seq_len": WQ["train"]["seq_len"]}}),
        seed=CFG["seed"],
        compute=compute_flags(),
    shell:
        "OMP_NUM_THREADS={threads} python -m papers.winq hessian --config-json {params.config} --model {input.model}"
        " --split {input.split} --seed {params.seed} {params.compute} --out {output} > {log} 2>&1"


rule wq_summary:
    """The study's summary: per cell and as seed means, curves, gradient norms, speedups, final quality at equal
    budget, Hessian spectra, the mechanism per period and the stagnation statistic."""
    input:
        curves=wq_run_files("eval_log.csv"),
        logs=wq_run_files("train_log.csv"),
        summaries=wq_run_files("train_summary.json"),
        mechanism=wq_run_files("mechanism.jsonl"),
        stagnation=wq_run_files("stagnation.jsonl"),
        evaluations=WQ_EVALUATIONS,
        hessians=WQ_HESSIANS,
        trained=expand(f"{WQ_TRAINED}/{{cell}}", cell=WQ_CELLS),
        quantized=WQ_QUANTIZED,
    output:
        f"{WQ_DIR}/summary.json",
    log:
        f"{LOGS}/winq/summary.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.winq.__main__:summary"),
        config=json_arg({k: v for k, v in WQ.items() if k not in ("claims", "regime", "paper_setup")}),
    shell:
        "python -m papers.winq summary --config-json {params.config} --curves {input.curves} --logs {input.logs}"
        " --evaluations {input.evaluations} --hessians {input.hessians} --trained {input.trained}"
        " --quantized {input.quantized} --mechanism {input.mechanism} --stagnation {input.stagnation} --out {output}"
        " > {log} 2>&1"


rule wq_figures:
    """Every figure of the report from the study summary, PNG and PDF, in one job (one process); each figure is its
    own file target (asking for one draws them all)."""
    input:
        figure_inputs(WQ_FIGURE_PLANS),
    output:
        png=figure_pngs(WQ_FIGURE_PLANS, f"{WQ_DIR}/figures", "WinQ"),
        pdf=expand(f"{WQ_DIR}/figures/{{figure}}.pdf", figure=WQ_FIGURES),
    log:
        f"{LOGS}/winq/figures.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.winq.__main__:figures"),
        figures=lambda w: figure_arguments(WQ_FIGURE_PLANS, f"{WQ_DIR}/figures", "--summary"),
    shell:
        "python -m papers.winq figures {params.figures} > {log} 2>&1"


rule wq_claims:
    """The claims table: each prediction of the config's claims judged on its estimate and 95% interval (over seeds,
    paired by seed, widened by the bootstraps over the test windows, the zero-shot examples or the SLQ probes the
    seeds share), and the implementation checks."""
    input:
        summary=f"{WQ_DIR}/summary.json",
        evaluations=expand(f"{WQ_DIR}/eval/{{cell}}.json", cell=WQ_CELLS),
        quantized=WQ_QUANTIZED,
        base=WQ_BASE_DIR,
    output:
        report(f"{WQ_DIR}/claims.json", caption="report/claims.rst", category="WinQ"),
    log:
        f"{LOGS}/winq/claims.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.winq.__main__:claims"),
        config=json_arg(claims_config(WQ)),
        evidence=json_arg(CFG["evidence"]),
    shell:
        "python -m papers.winq claims --config-json {params.config} --evidence-json {params.evidence}"
        " --summary {input.summary} --evaluations {input.evaluations} --quantized {input.quantized}"
        " --base-model {input.base} --out {output} > {log} 2>&1"


rule wq_context:
    """The report context: figures, tables, claims, provenance, rerun commands and the cited artifacts."""
    input:
        summary=f"{WQ_DIR}/summary.json",
        claims=f"{WQ_DIR}/claims.json",
        figures=expand(f"{WQ_DIR}/figures/{{figure}}.{{ext}}", figure=WQ_FIGURES, ext=("png", "pdf")),
        evaluations=WQ_EVALUATIONS,
        curves=wq_run_files("eval_log.csv"),
        logs=wq_run_files("train_log.csv"),
        mechanism=wq_run_files("mechanism.jsonl"),
        stagnation=wq_run_files("stagnation.jsonl"),
        hessians=WQ_HESSIANS,
        base=WQ_BASE_DIR,
    output:
        f"{WQ_DIR}/report/context.json",
    log:
        f"{LOGS}/winq/context.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.winq.__main__:context"),
        config=json_arg(WQ),
        profile=config["profile"],
        seed=CFG["seed"],
        pngs=lambda w, input: [f for f in input.figures if f.endswith(".png")],
        metadata=pretraining_metadata([WQ_BASE]),
        examples=[f"{WQ_TRAINED}/{WQ_EXAMPLE}", f"{WQ_DIR}/eval/{WQ_EXAMPLE}.json"],
        corpus=WQ_CORPUS,
    shell:
        "python -m papers.winq context --config-json {params.config} --profile {params.profile}"
        " --seed {params.seed} --summary {input.summary} --claims {input.claims} --figures {params.pngs}"
        " --cited {input.evaluations} {input.curves} {input.logs} {input.mechanism} {input.stagnation}"
        " {input.hessians}"
        " --base-model-metadata {params.metadata} --rerun-example {params.examples} --base-model {input.base}"
        " --corpus {params.corpus} --out {output} > {log} 2>&1"


rule wq_pilot_train:
    """One cell of the baseline-only pilot (papers.winq.premise): the baseline of a pilot setting under a candidate's
    regime, on the pilot's seed, with the diagnostics the premise reads; as wq_train, with the candidate's run
    config."""
    input:
        init=WQ_BASE_DIR,
        train=training_split(WQ_CORPUS, "train", WQ_BASE),
        validation=training_split(WQ_CORPUS, "validation", WQ_BASE),
    output:
        model=directory(f"{WQ_TRAINED}/pilot/{{wq_candidate}}/{{wq_run}}/seed{{wq_seed}}"),
        curve=f"{WQ_DIR}/pilot/{{wq_candidate}}/runs/{{wq_run}}/seed{{wq_seed}}/eval_log.csv",
        log=f"{WQ_DIR}/pilot/{{wq_candidate}}/runs/{{wq_run}}/seed{{wq_seed}}/train_log.csv",
        summary=f"{WQ_DIR}/pilot/{{wq_candidate}}/runs/{{wq_run}}/seed{{wq_seed}}/train_summary.json",
        mechanism=f"{WQ_DIR}/pilot/{{wq_candidate}}/runs/{{wq_run}}/seed{{wq_seed}}/mechanism.jsonl",
        stagnation=f"{WQ_DIR}/pilot/{{wq_candidate}}/runs/{{wq_run}}/seed{{wq_seed}}/stagnation.jsonl",
    log:
        f"{WQ_DIR}/pilot/{{wq_candidate}}/runs/{{wq_run}}/seed{{wq_seed}}/stderr.log",
    conda:
        CONDA_ENV
    threads: 1
    params:
        code=step_code("papers.winq.__main__:train_run"),
        config=wq_pilot_run_config,
        compute=compute_flags(training=True),
        launch=launcher,
    shell:
        WQ_TRAIN


rule wq_pilot:
    """The pilot's table (papers.winq.premise): per candidate the premise and its context per pilot setting, the
    regime card's rows under its schedule, the seconds per step and the default profile's estimated wall time, and
    the candidate the config's rule chooses. On demand: snakemake results/winq/pilot.json."""
    input:
        base=WQ_BASE_DIR,
        runs=WQ_PILOT_SUMMARIES,
    output:
        f"{WQ_DIR}/pilot.json",
    log:
        f"{LOGS}/winq/pilot.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("papers.winq.__main__:pilot"),
        config=json_arg({k: v for k, v in WQ.items() if k not in ("claims", "coverage", "paper_setup")}),
    shell:
        "python -m papers.winq pilot --config-json {params.config} --runs {input.runs} --base-model {input.base}"
        " --out {output} > {log} 2>&1"
