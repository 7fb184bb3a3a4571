# maxwindow_hif8: the paper config (validated, profile merged), its runs, its checkpoint quantization entry and
# the functions its rules call.
from common.select import DEFAULT_INCLUDE as MW_MLP_LINEARS
from common.quantizers.w8a8 import PAPER_SKIP_PROPORTION
from papers.maxwindow_hif8.settings import FIGURES as MW_FIGURES
from papers.maxwindow_hif8.settings import KEY as MW_KEY
from papers.maxwindow_hif8.settings import recipe, run_names, run_settings

MW = paper_config(MW_KEY)
MW_DIR = f"{RESULTS}/{MW_KEY}"
MW_TRAINED = f"{RESULTS}/models/trained/{MW_KEY}"
MW_BASE = study_base_model(MW, MW_KEY)  # its own `base_model`, else the workflow's
MW_BASE_DIR = model_path(MW_BASE)
MW_RUNS = run_names(MW)
MW_CELLS = seed_cells(MW_RUNS, MW["seeds"])  # <run>/seed<k>: every training cell
MW_RECIPE = seed_cell(recipe(MW), MW["seeds"][0])
MW_CORPORA = {"pretrain": CFG["data"]["pretrain"], "shift": CFG["data"]["shift"]}
# Every trained model is checkpoint-quantized (workflow/rules/ptq.smk) with this entry, the paper's HiF8 W8A8 recipe on
# the layers QAT trained (MLP gate/up/down, the paper's first/last block proportions left alone).
MW_QUANTIZATION = "hif8_w8a8"
CFG.setdefault("quantization", {})[MW_QUANTIZATION] = {
    "recipe": MW["checkpoint_quantization"],
    "include": MW_MLP_LINEARS,
    "skip_proportion": list(PAPER_SKIP_PROPORTION),
}
MW_GRID = json_arg(
    {
        k: MW[k]
        for k in ("observers", "observer_options", "learning_rates", "bf16_warmup_steps", "train", "seeds", "variants")
    }
)
# Every trained cell in both precisions (BF16 inference = the paper's evaluation; HiF8 = deployed), and the base model
MW_EVALUATIONS = [
    *(
        f"{MW_DIR}/eval/{precision}/{cell}/{role}.json"
        for precision in ("bf16", "hif8")
        for cell in MW_CELLS
        for role in MW_CORPORA
    ),
    *(f"{MW_DIR}/eval/bf16/base/{role}.json" for role in MW_CORPORA),
]


def mw_run_config(wildcards):
    """What one run depends on, alone (a changed threshold or another run's setting reruns no training)."""
    settings = run_settings(MW, wildcards.mw_run)
    options = {settings["observer"]: settings["observer_options"]} if settings["observer"] else {}
    variant = settings["variant"]  # a control's own variant only (another variant's change reruns nothing here)
    return json_arg(
        {
            "format": MW["format"],
            "max_val": MW["max_val"],
            "variants": {variant: MW["variants"][variant]} if variant else {},
            "history_unit": MW["history_unit"],
            "amax_reduction": MW["amax_reduction"],
            "train": MW["train"],
            "learning_rates": {settings["rate"]: settings["lr"]},
            "observer_options": options,
        }
    )


def mw_run_files(name):
    """The file ``name`` of every training cell's run folder ``runs/<run>/seed<k>``."""
    return expand(f"{MW_DIR}/runs/{{cell}}/{name}", cell=MW_CELLS)


# Every figure of the report: id (settings.FIGURES, each its own kind) -> what the figure rule runs (figure_step)
MW_SUMMARY = f"{MW_DIR}/summary.json"
MW_OBSERVER_STUDY = f"{MW_DIR}/observer_study.json"
MW_FIGURE_PLANS = {
    "loss-curves": figure_step("loss-curves", [MW_SUMMARY]),
    "saturation": figure_step(
        "saturation",
        expand(
            f"{MW_DIR}/runs/{{observer}}-lrlow-w{MW['bf16_warmup_steps']}/seed{MW['seeds'][0]}/telemetry.csv.gz",
            observer=MW["observers"],
        ),
        f"--warmup {MW['bf16_warmup_steps']}",
    ),
    "downstream": figure_step("downstream", [MW_SUMMARY]),
    "forgetting": figure_step("forgetting", [MW_SUMMARY]),
    "observer-study": figure_step("observer-study", [MW_OBSERVER_STUDY]),
}
if set(MW_FIGURE_PLANS) != set(MW_FIGURES):
    raise ValueError(
        f"{MW_KEY}: MW_FIGURE_PLANS names {sorted(MW_FIGURE_PLANS)}, settings.FIGURES {sorted(MW_FIGURES)}"
    )
