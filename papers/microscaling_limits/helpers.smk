# microscaling_limits: the paper config (validated, profile merged) and the functions its rules call.
import json
import shlex

from papers.microscaling_limits.settings import profile_config


configfile: "papers/microscaling_limits/config.yaml"


validate(config["microscaling_limits"], "config.schema.yaml")
MSL = profile_config(config["microscaling_limits"], config["profile"])
validate(MSL, "config.schema.yaml")
MSL_DIR = "results/microscaling_limits"
MSL_MODELS = [CFG["base_model"], *MSL["model"]["external"]]
MSL_TENSOR_MODELS = [CFG["base_model"] if m == "base" else m for m in MSL["tensors"]["models"]]
MSL_CORPUS = MSL["model"]["corpus"] or CFG["data"]["pretrain"]
MSL_ELEMENT = MSL["element"]
MSL_SIM_CELLS = expand(
    f"{MSL_DIR}/simulation/{MSL_ELEMENT}-{{scale}}-b{{block}}-{{method}}.json",
    scale=MSL["scales"],
    block=MSL["simulation"]["block_sizes"],
    method=MSL["rules"],
)
MSL_PTQ_CELLS = [
    f"{MSL_ELEMENT}-{variant}-b{block}" for variant in MSL["model"]["variants"] for block in MSL["model"]["block_sizes"]
]
MSL_FIGURES = [
    *(f"theory-vs-simulation-{scale}" for scale in MSL["scales"]),
    *(f"parts-{scale}-b{min(MSL['theory']['block_sizes'])}" for scale in MSL["scales"]),
    "fit",
    "crossovers",
    *(f"tensors-{m}" for m in MSL_TENSOR_MODELS),
    *(f"gap-{m}" for m in MSL_MODELS),
]


def msl_json(value):
    return shlex.quote(json.dumps(value, sort_keys=True))


def msl_part(*keys):
    """The config a step depends on: the element and scales plus the named sections."""
    return msl_json({"element": MSL_ELEMENT, "scales": MSL["scales"], **{k: MSL[k] for k in keys}})


def msl_model_dir(wildcards):
    kind = "base" if wildcards.model in CFG["base_models"] else "external"
    if kind == "external" and wildcards.model not in CFG["external_models"]:
        raise ValueError(
            f"unknown model {wildcards.model!r}: neither a base model ({', '.join(CFG['base_models'])})"
            f" nor an external model ({', '.join(CFG['external_models'])})"
        )
    return f"results/models/{kind}/{wildcards.model}"


def msl_tensor_checkpoint(wildcards):
    return [] if wildcards.model == "minilm" else msl_model_dir(wildcards)


def msl_model_cells(wildcards):
    return expand(f"{MSL_DIR}/ptq/{wildcards.model}/{{cell}}.json", cell=MSL_PTQ_CELLS)
