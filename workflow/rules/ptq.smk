# Checkpoint quantization: any model under results/models/ -> a quantized checkpoint (codes + scales + recipe)
# that every evaluation of a quantized model reads. Recipes and module selections are named in the config
# (`quantization:`); papers add their own entries.
import json
import shlex


def quantization_args(name):
    settings = CFG.get("quantization", {})
    if name not in settings:
        raise ValueError(f"unknown quantization {name!r}; configured: {', '.join(settings)}")
    entry = settings[name]
    recipe = entry["recipe"]
    args = [f"--recipe {shlex.quote(recipe if isinstance(recipe, str) else json.dumps(recipe, sort_keys=True))}"]
    if entry.get("activations"):
        args.append("--activations")
    for key in ("include", "exclude"):
        if entry.get(key):
            args.append(f"--{key} {shlex.quote(entry[key])}")
    for key in ("skip_first", "skip_last"):
        if entry.get(key):
            args.append(f"--{key.replace('_', '-')} {int(entry[key])}")
    return " ".join(args)


wildcard_constraints:
    source=r"(base|external)/[A-Za-z0-9_]+",
    qname=r"[A-Za-z0-9_.+-]+",


rule quantize_checkpoint:
    """Quantized checkpoint of a base or external model with a named quantization from the config."""
    input:
        "results/models/{source}",
    output:
        directory("results/models/quantized/{qname}/{source}"),
    params:
        args=lambda w: quantization_args(w.qname),
    shell:
        "{PYTHON} -m common.ptq quantize --model {input} {params.args} --out {output}"
