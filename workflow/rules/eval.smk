# Evaluation: strided perplexity on a split plus the zero-shot tasks built from the corpus's held-out test split.
# Any model under results/models/ (base, external, trained/<paper>/<run>, quantized/<name>/...) can be evaluated:
#   results/eval/<model path under results/models>/<corpus>-<split>.json


wildcard_constraints:
    model_path=r"((quantized/[A-Za-z0-9_.+-]+/)?(base|external)/[A-Za-z0-9_]+)"
    r"|((quantized/[A-Za-z0-9_.+-]+/)?trained/[A-Za-z0-9_]+/[A-Za-z0-9_.+-]+)",
    split="train|validation|test",


rule build_zero_shot_tasks:
    """Cloze (LAMBADA-style) and 4-way continuation (HellaSwag-style) tasks from held-out test documents."""
    input:
        "data/corpora/{corpus}/test.jsonl",
    output:
        cloze="results/tasks/{corpus}/cloze.jsonl",
        choice="results/tasks/{corpus}/choice.jsonl",
    log:
        "logs/build_zero_shot_tasks/{corpus}.log",
    conda:
        CONDA_ENV
    params:
        n=CFG["eval"]["zero_shot_examples"],
        seed=CFG["seed"],
    shell:
        "python -m common.eval build-tasks --split {input} --out-dir results/tasks/{wildcards.corpus}"
        " --n {params.n} --seed {params.seed} > {log} 2>&1"


rule evaluate_model:
    """Perplexity on <corpus>/<split> and zero-shot accuracy on <corpus>'s tasks, one JSON per evaluation."""
    input:
        model="results/models/{model_path}",
        split="data/corpora/{corpus}/{split}.jsonl",
        cloze="results/tasks/{corpus}/cloze.jsonl",
        choice="results/tasks/{corpus}/choice.jsonl",
    output:
        "results/eval/{model_path}/{corpus}-{split}.json",
    log:
        "logs/evaluate_model/{model_path}/{corpus}-{split}.log",
    conda:
        CONDA_ENV
    threads: 2
    params:
        window=CFG["eval"]["window"],
        stride=CFG["eval"]["stride"],
        max_tokens=f"--max-tokens {CFG['eval']['max_tokens']}" if CFG["eval"].get("max_tokens") else "",
    shell:
        "python -m common.eval --model {input.model} --tokenizer {input.model} --split {input.split}"
        " --cloze {input.cloze} --choice {input.choice} --window {params.window} --stride {params.stride}"
        " --batch-size 8 {params.max_tokens} --out {output} > {log} 2>&1"


rule shared_stages:
    """The shared stages of the active profile: corpus statistics, the base model, its evaluation, its MXFP4
    checkpoint quantization evaluated the same way, and the external models the profile evaluates."""
    input:
        expand("results/data/{corpus}.stats.json", corpus=(CFG["data"]["pretrain"], CFG["data"]["shift"])),
        f"results/eval/base/{CFG['base_model']}/{CFG['data']['pretrain']}-validation.json",
        f"results/eval/quantized/mxfp4_mlp/base/{CFG['base_model']}/{CFG['data']['pretrain']}-validation.json",
        expand(
            "results/eval/external/{name}/{corpus}-validation.json",
            name=CFG.get("evaluate_external", []),
            corpus=CFG["data"]["pretrain"],
        ),
