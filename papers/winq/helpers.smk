# winq: the paper config (validated, profile merged), its training cells, its base model, its checkpoint quantization
# entry and the functions its rules call.
from papers.winq.claims import claims_config
from papers.winq.settings import FIGURES as WQ_FIGURES
from papers.winq.settings import KEY as WQ_KEY
from papers.winq.premise import pilot_runs, pilot_study
from papers.winq.settings import hessian_cells, run_config, training_cells

WQ = paper_config(WQ_KEY)
WQ_DIR = f"{RESULTS}/{WQ_KEY}"
WQ_TRAINED = f"{RESULTS}/models/trained/{WQ_KEY}"
WQ_BASE = study_base_model(WQ, WQ_KEY)  # the study's base model: its own `base_model`, else the workflow's
WQ_BASE_DIR = model_path(WQ_BASE)
WQ_CELLS = training_cells(WQ)  # <run>/seed<k>, every seed of every run
WQ_HESSIAN_CELLS = hessian_cells(WQ)
WQ_CORPUS = WQ["corpus"] or CFG["data"]["pretrain"]  # default: the base model's own pretraining corpus
# Every trained model is checkpoint-quantized (workflow/rules/ptq.smk) with its own learned quantizer: packed integer
# codes and the learned per-row scales (`python -m common.ptq checkpoint --recipe learned`).
WQ_QUANTIZATION = "paretoq_learned"
CFG.setdefault("quantization", {})[WQ_QUANTIZATION] = {"recipe": "learned"}
WQ_QUANTIZED = expand(f"{RESULTS}/models/quantized/{WQ_QUANTIZATION}/trained/{WQ_KEY}/{{cell}}", cell=WQ_CELLS)
WQ_EVALUATIONS = [*expand(f"{WQ_DIR}/eval/{{cell}}.json", cell=WQ_CELLS), f"{WQ_DIR}/eval/base.json"]
WQ_HESSIANS = expand(f"{WQ_DIR}/hessian/{{cell}}.json", cell=WQ_HESSIAN_CELLS)
# what one spectrum depends on (the absolute thresholds and the methods list are the summary's)
WQ_HESSIAN_CELL = {k: WQ["hessian"][k] for k in ("probes", "steps", "sigma", "grid", "near_zero", "batch_sequences")}
# the baseline-only pilot (papers.winq.premise): <candidate>/<setting>-baseline/seed<k>, on demand (results/winq/pilot.json)
WQ_PILOT_SUMMARIES = [f"{WQ_DIR}/pilot/{name}/runs/{cell}/train_summary.json" for name, cell in pilot_runs(WQ)]
WQ_EXAMPLE = next((c for c in WQ_CELLS if c.partition("-winq/")[1]), WQ_CELLS[0])  # a WinQ cell to rerun
# Every figure of the report (settings.FIGURES, each its own kind) from the study summary (figure_step)
WQ_FIGURE_PLANS = {figure: figure_step(figure, [f"{WQ_DIR}/summary.json"]) for figure in WQ_FIGURES}


def wq_eval_model(wildcards):
    """The model an evaluation reads: the full-precision base model, or a cell's checkpoint quantization."""
    if wildcards.wq_model == "base":
        return WQ_BASE_DIR
    return f"{RESULTS}/models/quantized/{WQ_QUANTIZATION}/trained/{WQ_KEY}/{wildcards.wq_model}"


def wq_run_config(wildcards):
    """What one run depends on, alone (a changed threshold or another run's setting reruns no training, a changed
    diagnostics setting reruns every cell; the seed is the cell's wildcard)."""
    return json_arg(run_config(WQ, wildcards.wq_run))


def wq_run_files(name):
    return expand(f"{WQ_DIR}/runs/{{cell}}/{name}", cell=WQ_CELLS)


def wq_pilot_run_config(wildcards):
    """What one pilot cell depends on: its run's part of the candidate's pilot study (as :func:`wq_run_config`)."""
    return json_arg(run_config(pilot_study(WQ, wildcards.wq_candidate), wildcards.wq_run))
