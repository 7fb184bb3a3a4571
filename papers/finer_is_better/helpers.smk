# finer_is_better: the paper config (validated, profile merged) and the functions its rules call.
from papers.finer_is_better.settings import KEY as FIB_KEY
from papers.finer_is_better.settings import cells as fib_cells

FIB = paper_config(FIB_KEY)
FIB_DIR = f"results/{FIB_KEY}"
FIB_MODELS = [CFG["base_model"], *FIB["model"]["external"]]
FIB_CORPUS = FIB["model"]["corpus"] or CFG["data"]["pretrain"]
FIB_MSE_FIGURES = [f"mse-{scale}-{variant}" for scale, names in FIB["numerical"]["cells"].items() for variant in names]
FIB_FIGURES = [*FIB_MSE_FIGURES, "brute-force-ratio-ue4m3", *(f"gap-{m}" for m in FIB_MODELS)]


def fib_variant(variant):
    if variant not in FIB["variants"]:
        raise ValueError(
            f"unknown variant {variant!r}; defined in papers/{FIB_KEY}/config.yaml: {', '.join(FIB['variants'])}"
        )
    return FIB["variants"][variant]


def fib_mse_config(wildcards):
    """What one numerical cell depends on: its variant, the hierarchical target, the sigma grid and the draw."""
    study = {k: FIB["numerical"][k] for k in ("sigma", "samples", "seed")}
    return json_arg(
        {
            "element": FIB["element"],
            "hierarchical_target": FIB["hierarchical_target"],
            "variants": {wildcards.variant: fib_variant(wildcards.variant)},
            "numerical": study,
        }
    )


def fib_ptq_config(wildcards):
    """What one model cell depends on: its variant (none for the unquantized model) and the evaluation."""
    study = {k: FIB["model"][k] for k in ("window", "stride", "max_tokens", "batch_size", "include")}
    variant = getattr(wildcards, "variant", None)
    variants = {} if variant is None else {variant: fib_variant(variant)}
    return json_arg(
        {
            "element": FIB["element"],
            "hierarchical_target": FIB["hierarchical_target"],
            "variants": variants,
            "model": study,
        }
    )


def fib_model_cells(wildcards):
    return expand(f"{FIB_DIR}/ptq/{wildcards.model}/{{cell}}.json", cell=fib_cells(FIB, "model"))
