# finer_is_better: the paper config (validated, profile merged) and the functions its rules call.
from papers.finer_is_better.authors import RESULTS as FIB_AUTHORS_RESULTS
from papers.finer_is_better.authors import source_path as fib_source_path
from papers.finer_is_better.settings import KEY as FIB_KEY
from papers.finer_is_better.settings import cells as fib_cells

FIB = paper_config(FIB_KEY)
FIB_DIR = f"{RESULTS}/{FIB_KEY}"
FIB_MODELS = [*([CFG["base_model"]] if FIB["model"]["base"] else []), *FIB["model"]["external"]]
if not FIB_MODELS:
    raise ValueError(f"{FIB_KEY}.model: base is false and external is empty, so there is no model to evaluate")
FIB_SWEEP = [point for model in FIB_MODELS for point in sweep_models(model, FIB["model"]["factors"])]  # its models
FIB_CORPUS = FIB["model"]["corpus"] or CFG["data"]["pretrain"]
FIB_PAPER_RESULTS = f"papers/{FIB_KEY}/data/{FIB_AUTHORS_RESULTS.name}"  # the authors' published gaps (authors.py)
FIB_PAPER_SOURCE = str(fib_source_path(FIB_PAPER_RESULTS))
FIB_NUMERICAL = f"{FIB_DIR}/mse/summary.json"  # the numerical study's summary


def fib_sweep_figure(model, operands):
    """The sweep figure of source ``model``: the numerical summary first, then its sweep points' summaries."""
    points = expand(f"{FIB_DIR}/ptq/{{point}}/summary.json", point=sweep_models(model, FIB["model"]["factors"]))
    options = f"--models {' '.join(points)} --operands {operands} --evidence-json {json_arg(CFG['evidence'])}"
    return figure_step("sweep", [FIB_NUMERICAL, *points], options)


# Every figure of the report, in its order: id (<kind>-<detail>, papers.finer_is_better.figures) -> what the figure
# rule runs (figure_step; the step reads the numerical summary, its first input, with --summary)
FIB_FIGURE_PLANS = {
    **{
        f"mse-{scale}-{variant}": figure_step("mse", [FIB_NUMERICAL], f"--scale {scale} --variant {variant}")
        for scale, names in FIB["numerical"]["cells"].items()
        for variant in names
    },
    "brute-force-ratio-ue4m3": figure_step("brute-force-ratio", [FIB_NUMERICAL], "--scale ue4m3"),
    **{
        f"sweep-{model}-{operands}": fib_sweep_figure(model, operands)
        for model in FIB_MODELS
        for operands in FIB["model"]["operands"]
    },
}
FIB_FIGURES = list(FIB_FIGURE_PLANS)


def fib_variant(variant):
    if variant not in FIB["variants"]:
        raise ValueError(
            f"unknown variant {variant!r}; defined in papers/{FIB_KEY}/config.yaml: {', '.join(FIB['variants'])}"
        )
    return FIB["variants"][variant]


def fib_mse_config(wildcards):
    """What the numerical cells of one (scale, variant) depend on: the variant, the hierarchical target, the sigma
    grid and the draw."""
    study = {k: FIB["numerical"][k] for k in ("sigma", "samples", "seed")}
    return json_arg(
        {
            "element": FIB["element"],
            "hierarchical_target": FIB["hierarchical_target"],
            "variants": {wildcards.variant: fib_variant(wildcards.variant)},
            "numerical": study,
        }
    )


def fib_ptq_config(quantized):
    """What the model cells depend on: their variants and numerics (none for the unquantized model) and the
    evaluation."""
    study = {k: FIB["model"][k] for k in ("window", "stride", "max_tokens", "batch_size", "include", "sigma_include")}
    names = {variant for variants in FIB["model"]["cells"].values() for variant in variants} if quantized else ()
    return json_arg(
        {
            "element": FIB["element"],
            "hierarchical_target": FIB["hierarchical_target"],
            "variants": {name: fib_variant(name) for name in sorted(names)},
            **({"numerics": FIB["numerics"]} if quantized else {}),
            "model": study,
        }
    )


def fib_model_cells(wildcards):
    """Every cell record of one sweep point, every operand set."""
    return expand(
        f"{FIB_DIR}/ptq/{wildcards.model}/{{operands}}/{{cell}}.json",
        operands=FIB["model"]["operands"],
        cell=fib_cells(FIB, "model"),
    )
