# Evaluation: strided perplexity on a split plus the zero-shot tasks built from the corpus's held-out test split.
# Any model under results/models/ (base, external, trained/<paper>/<run>, quantized/<name>/...) can be evaluated:
#   results/eval/<model path under results/models>/<corpus>-<split>.json
# and scored by lm-eval-harness on the standard tasks (config `lm_eval`; a network or a warm HF cache):
#   results/lm_eval/<model path under results/models>.json


wildcard_constraints:
    model_path=r"((quantized/[A-Za-z0-9_.+-]+/)?(base|external)/[A-Za-z0-9_]+)"
    r"|((quantized/[A-Za-z0-9_.+-]+/)?trained/[A-Za-z0-9_]+/[A-Za-z0-9_.+-]+)",
    split="train|validation|test",
    lm_model=r"(quantized/[A-Za-z0-9_.+-]+/)?((base|external)/[A-Za-z0-9_]+"
    r"|trained/[A-Za-z0-9_]+/[A-Za-z0-9_.+-]+(/seed[0-9]+)?)",


rule build_zero_shot_tasks:
    """Cloze (LAMBADA-style) and 4-way continuation (HellaSwag-style) tasks from held-out test documents."""
    input:
        "data/corpora/{corpus}/test.jsonl",
    output:
        cloze=f"{RESULTS}/tasks/{{corpus}}/cloze.jsonl",
        choice=f"{RESULTS}/tasks/{{corpus}}/choice.jsonl",
    log:
        f"{LOGS}/build_zero_shot_tasks/{{corpus}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.eval.cli:_build_tasks,_build_parser"),
        n=CFG["eval"]["zero_shot_examples"],
        seed=CFG["seed"],
    shell:
        "python -m common.eval build-tasks --split {input} --out-dir $(dirname {output.cloze})"
        " --n {params.n} --seed {params.seed} > {log} 2>&1"


rule evaluate_model:
    """Perplexity on <corpus>/<split> and zero-shot accuracy on <corpus>'s tasks, one JSON per evaluation."""
    input:
        model=f"{RESULTS}/models/{{model_path}}",
        split="data/corpora/{corpus}/{split}.jsonl",
        cloze=f"{RESULTS}/tasks/{{corpus}}/cloze.jsonl",
        choice=f"{RESULTS}/tasks/{{corpus}}/choice.jsonl",
    output:
        f"{RESULTS}/eval/{{model_path}}/{{corpus}}-{{split}}.json",
    log:
        f"{LOGS}/evaluate_model/{{model_path}}/{{corpus}}-{{split}}.log",
    conda:
        CONDA_ENV
    threads: 2
    params:
        code=step_code("common.eval.cli:_evaluate,_evaluate_parser"),
        window=CFG["eval"]["window"],
        stride=CFG["eval"]["stride"],
        max_tokens=f"--max-tokens {CFG['eval']['max_tokens']}" if CFG["eval"].get("max_tokens") else "",
        compute=compute_flags(),
    shell:
        "python -m common.eval --model {input.model} --tokenizer {input.model} --split {input.split}"
        " --cloze {input.cloze} --choice {input.choice} --window {params.window} --stride {params.stride}"
        " --batch-size 8 {params.max_tokens} {params.compute} --out {output} > {log} 2>&1"


rule lm_eval_model:
    """lm-eval-harness on a model as loaded (common.eval lm-eval): the tasks of config `lm_eval`. Offline without
    the HF cache a standard task's data is out of reach: the job stops, prints that in one line and writes
    nothing (exit status 3)."""
    input:
        f"{RESULTS}/models/{{lm_model}}",
    output:
        f"{RESULTS}/lm_eval/{{lm_model}}.json",
    log:
        f"{LOGS}/lm_eval_model/{{lm_model}}.log",
    conda:
        CONDA_ENV
    threads: 2
    params:
        code=step_code("common.eval.cli:_lm_eval,_lm_eval_parser"),
        tasks=",".join(CFG["lm_eval"]["tasks"]),
        options=lm_eval_options(),
    shell:
        "python -m common.eval lm-eval --model {input} --tasks {params.tasks} {params.options} --out {output}"
        " > {log} 2>&1 || {{ status=$?; tail -n 1 {log} >&2; exit $status; }}"


rule lm_eval_requested:
    """The lm-eval evaluations the active profile asks for: `lm_eval.models`, paths under results/models/."""
    input:
        expand(f"{RESULTS}/lm_eval/{{model}}.json", model=CFG["lm_eval"]["models"]),


rule shared_stages:
    """The shared stages of the active profile: corpus statistics, the base model, its evaluation, its MXFP4
    checkpoint quantization evaluated the same way, and the external models the profile evaluates."""
    input:
        expand(f"{RESULTS}/data/{{corpus}}.stats.json", corpus=(CFG["data"]["pretrain"], CFG["data"]["shift"])),
        f"{RESULTS}/eval/base/{CFG['base_model']}/{CFG['data']['pretrain']}-validation.json",
        f"{RESULTS}/eval/quantized/mxfp4_mlp/base/{CFG['base_model']}/{CFG['data']['pretrain']}-validation.json",
        expand(
            f"{RESULTS}/eval/external/{{name}}/{{corpus}}-validation.json",
            name=CFG.get("evaluate_external", []),
            corpus=CFG["data"]["pretrain"],
        ),
