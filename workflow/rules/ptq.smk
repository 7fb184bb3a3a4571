# Checkpoint quantization: any model under results/models/ (base, external, trained/<paper>/<run>/seed<k>) -> a quantized
# checkpoint (codes + scales + recipe)
# that every evaluation of a quantized model reads. Recipes and module selections are named in the config
# (`quantization:`); papers add their own entries.
wildcard_constraints:
    source=r"(base|external)/[A-Za-z0-9_]+|trained/[A-Za-z0-9_]+/[A-Za-z0-9_.+-]+/seed[0-9]+",
    qname=r"[A-Za-z0-9_.+-]+",


rule quantize_checkpoint:
    """Quantized checkpoint of a base or external model with a named quantization from the config."""
    input:
        f"{RESULTS}/models/{{source}}",
    output:
        directory(f"{RESULTS}/models/quantized/{{qname}}/{{source}}"),
    log:
        f"{LOGS}/quantize_checkpoint/{{qname}}/{{source}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.ptq.cli:checkpoint_command,build_parser"),
        args=lambda w: quantization_args(w.qname),
    shell:
        "python -m common.ptq checkpoint --model {input} {params.args} --out {output} > {log} 2>&1"
