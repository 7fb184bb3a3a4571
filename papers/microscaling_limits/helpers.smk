# microscaling_limits: the paper config (validated, profile merged) and the functions its rules call.
from papers.microscaling_limits.settings import KEY as MSL_KEY

MSL = paper_config(MSL_KEY)
MSL_DIR = f"{RESULTS}/{MSL_KEY}"
MSL_MODELS = [*([CFG["base_model"]] if MSL["model"]["base"] else []), *MSL["model"]["external"]]
if not MSL_MODELS:
    raise ValueError(f"{MSL_KEY}.model: base is false and external is empty, so there is no model to evaluate")
MSL_TENSOR_MODELS = [CFG["base_model"] if m == "base" else m for m in MSL["tensors"]["models"]]
MSL_CORPUS = MSL["model"]["corpus"] or CFG["data"]["pretrain"]
MSL_ELEMENT = MSL["element"]
MSL_SIM_CELLS = expand(
    f"{MSL_DIR}/simulation/{MSL_ELEMENT}-{{scale}}-b{{block}}-{{method}}.json",
    scale=MSL["scales"],
    block=MSL["simulation"]["block_sizes"],
    method=MSL["rules"],
)
MSL_PAPER_CELLS = expand(
    f"{MSL_DIR}/paper_model/simulation/{MSL_ELEMENT}-{{scale}}-b{{block}}-absmax.json",
    scale=MSL["paper_model"]["scales"],
    block=MSL["paper_model"]["block_sizes"],
)
MSL_COMPARISON = f"{MSL_DIR}/paper_model/comparison.json"
MSL_PTQ_CELLS = [
    f"{MSL_ELEMENT}-{variant}-b{block}" for variant in MSL["model"]["variants"] for block in MSL["model"]["block_sizes"]
]
MSL_VALIDATION = f"{MSL_DIR}/validation.json"
MSL_PARTS_BLOCK = min(MSL["theory"]["block_sizes"])
MSL_PAPER_MODEL_BLOCKS = " ".join(str(n) for n in MSL["paper_model"]["figure_blocks"])


def msl_theory_cell(scale):
    return f"{MSL_DIR}/theory/{MSL_ELEMENT}-{scale}-absmax.json"


# Every figure of the report, in its order: id (<kind> or <kind>-<detail>, papers.microscaling_limits.figures) -> what
# the figure rule runs (figure_step)
MSL_FIGURE_PLANS = {
    **{
        f"theory-vs-simulation-{scale}": figure_step("theory-vs-simulation", [msl_theory_cell(scale), MSL_VALIDATION])
        for scale in MSL["scales"]
    },
    **{
        f"parts-{scale}-b{MSL_PARTS_BLOCK}": figure_step(
            "parts", [msl_theory_cell(scale)], f"--block {MSL_PARTS_BLOCK}"
        )
        for scale in MSL["scales"]
    },
    "fit": figure_step("fit", [MSL_VALIDATION]),
    "crossovers": figure_step(
        "crossovers", [MSL_VALIDATION, *(f"{MSL_DIR}/tensors/{m}.json" for m in MSL_TENSOR_MODELS)]
    ),
    **{
        f"paper-model-{scale}": figure_step(
            "paper-model", [MSL_COMPARISON], f"--scale {scale} --blocks {MSL_PAPER_MODEL_BLOCKS}"
        )
        for scale in MSL["paper_model"]["scales"]
    },
    **{f"tensors-{m}": figure_step("tensors", [f"{MSL_DIR}/tensors/{m}.json"]) for m in MSL_TENSOR_MODELS},
    **{f"gap-{m}": figure_step("gap", [f"{MSL_DIR}/ptq/{m}/summary.json"]) for m in MSL_MODELS},
    "sweep": figure_step("sweep", [f"{MSL_DIR}/sweep/summary.json"]),
}
MSL_FIGURES = list(MSL_FIGURE_PLANS)


def msl_part(*keys):
    """The config a step depends on: the element and scales plus the named sections."""
    return json_arg({"element": MSL_ELEMENT, "scales": MSL["scales"], **{k: MSL[k] for k in keys}})


def msl_tensor_checkpoint(wildcards):
    return [] if wildcards.model == "minilm" else model_dir(wildcards)


def msl_model_cells(wildcards):
    return expand(f"{MSL_DIR}/ptq/{wildcards.model}/{{cell}}.json", cell=MSL_PTQ_CELLS)
