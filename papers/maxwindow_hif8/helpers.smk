# maxwindow_hif8: the paper config (validated, profile merged), its runs, its checkpoint quantization entry and
# the functions its rules call.
from common.ptq.select import DEFAULT_INCLUDE as MW_MLP_LINEARS
from common.qat.w8a8 import PAPER_SKIP_PROPORTION
from papers.maxwindow_hif8.settings import FIGURES as MW_FIGURES
from papers.maxwindow_hif8.settings import KEY as MW_KEY
from papers.maxwindow_hif8.settings import run_names, run_settings

MW = paper_config(MW_KEY)
MW_DIR = f"results/{MW_KEY}"
MW_TRAINED = f"results/models/trained/{MW_KEY}"
MW_RUNS = run_names(MW)
MW_BASELINES = [run for run in MW_RUNS if run_settings(MW, run)["observer"] is None]
MW_RECIPE = f"max_window-lrlow-w{MW['bf16_warmup_steps']}"
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
    {k: MW[k] for k in ("observers", "observer_options", "learning_rates", "bf16_warmup_steps", "train")}
)
MW_EVALUATIONS = [
    *(f"{MW_DIR}/eval/hif8/{run}/{role}.json" for run in MW_RUNS for role in MW_CORPORA),
    *(f"{MW_DIR}/eval/bf16/{run}/{role}.json" for run in [*MW_BASELINES, "base"] for role in MW_CORPORA),
]


def mw_eval_model(wildcards):
    """The model an evaluation reads: the base model, a trained run, or its HiF8 checkpoint quantization."""
    if wildcards.run == "base":
        source = f"base/{CFG['base_model']}"
        trained = f"results/models/{source}"
    else:
        source = f"trained/{MW_KEY}/{wildcards.run}"
        trained = f"{MW_TRAINED}/{wildcards.run}"
    return trained if wildcards.precision == "bf16" else f"results/models/quantized/{MW_QUANTIZATION}/{source}"


def mw_run_config(wildcards):
    """What one run depends on, alone (a changed threshold or another run's setting reruns no training)."""
    settings = run_settings(MW, wildcards.mw_run)
    options = {settings["observer"]: settings["observer_options"]} if settings["observer"] else {}
    return json_arg(
        {
            "format": MW["format"],
            "max_val": MW["max_val"],
            "train": MW["train"],
            "learning_rates": {settings["rate"]: settings["lr"]},
            "observer_options": options,
        }
    )


def mw_run_files(name):
    return expand(f"{MW_DIR}/runs/{{run}}/{name}", run=MW_RUNS)
