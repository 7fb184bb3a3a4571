# winq: the paper config (validated, profile merged), its runs, its checkpoint quantization entry and the functions
# its rules call.
from papers.winq.settings import FIGURES as WQ_FIGURES
from papers.winq.settings import KEY as WQ_KEY
from papers.winq.settings import hessian_runs, run_config, run_names

WQ = paper_config(WQ_KEY)
WQ_DIR = f"results/{WQ_KEY}"
WQ_TRAINED = f"results/models/trained/{WQ_KEY}"
WQ_RUNS = run_names(WQ)
WQ_HESSIAN_RUNS = hessian_runs(WQ)
WQ_CORPUS = CFG["data"]["pretrain"]  # QAT on the base model's own pretraining corpus, as the paper
# Every trained model is checkpoint-quantized (workflow/rules/ptq.smk) with its own learned quantizer: packed integer
# codes and the learned per-row scales (`python -m common.ptq quantize --recipe learned`).
WQ_QUANTIZATION = "paretoq_learned"
CFG.setdefault("quantization", {})[WQ_QUANTIZATION] = {"recipe": "learned"}
WQ_EVALUATIONS = expand(f"{WQ_DIR}/eval/{{run}}.json", run=[*WQ_RUNS, "base"])
WQ_EXAMPLE = f"{WQ_RUNS[0].rpartition('-')[0]}-winq" if "winq" in WQ["methods"] else WQ_RUNS[0]


def wq_eval_model(wildcards):
    """The model an evaluation reads: the full-precision base model, or a run's checkpoint quantization."""
    if wildcards.wq_model == "base":
        return f"results/models/base/{CFG['base_model']}"
    return f"results/models/quantized/{WQ_QUANTIZATION}/trained/{WQ_KEY}/{wildcards.wq_model}"


def wq_run_config(wildcards):
    """What one run depends on, alone (a changed threshold or another run's setting reruns no training)."""
    return json_arg(run_config(WQ, wildcards.wq_run))


def wq_run_files(name):
    return expand(f"{WQ_DIR}/runs/{{run}}/{name}", run=WQ_RUNS)
