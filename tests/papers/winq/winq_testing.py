"""The tiny WinQ training config (helpers of the tests here); the tiny corpus and ``smoke`` base model are
``paper_testing.build_tiny_setup``."""

import math
from pathlib import Path

from common.train import TrainConfig

CONFIG = Path(__file__).resolve().parents[3] / "papers" / "winq" / "config.yaml"

SEQ_LEN = 16
EVAL_SEQUENCES = 2
MICRO_BATCH = 2


def train_config(**changes) -> TrainConfig:
    """6 steps of 2 x 16 tokens, validation every 2 steps (after steps 1, 3, 5), a checkpoint after step 2."""
    return TrainConfig(**{"max_steps": 6, "seq_len": SEQ_LEN, "micro_batch_size": MICRO_BATCH, "lr": 1e-3,
                          "warmup_steps": 1, "weight_decay": 0.0, "eval_every": 2, "eval_sequences": EVAL_SEQUENCES,
                          "checkpoint_every": 3, "progress": False, **changes})


# --- a planted study: every input of papers.winq.study.study_summary ---------------------------------------------
SMOKE_SETTINGS = ("w2", "w4")
BASE_PERPLEXITY = 50.0
# per method: (validation curve after 4, 8, 12 steps, test perplexity); the baseline's final value is the target
PLANTED = {
    "baseline": ([120.0, 100.0, 90.0], 100.0),
    "winq": ([110.0, 88.0, 80.0], 92.0),
    "interpolation": ([115.0, 90.0, 85.0], 95.0),
    "noise": ([118.0, 99.0, 91.0], 98.0),
}
EXAMPLES = 64


def smoke_config():
    """The smoke profile of the real config (settings w2 and w4, every method, 12 steps, eval every 4)."""
    import yaml

    from papers.winq.settings import KEY, profile_config

    return profile_config(yaml.safe_load(CONFIG.read_text())[KEY], "smoke")


WINDOWS, WINDOW_TOKENS = 16, 63  # the planted test split: 16 windows of 63 scored tokens


def scored_evaluation(path, window_nll, cloze_correct, choice_correct, window_tokens=None):
    """A ``common.eval`` record (the parts the study and the claims read) whose metrics are those of its per-unit
    scores: the windows' NLL sums (``WINDOW_TOKENS`` tokens each unless given) and the examples' 0/1 correctness."""
    window_nll = [float(v) for v in window_nll]
    tokens = [WINDOW_TOKENS] * len(window_nll) if window_tokens is None else list(window_tokens)
    ppl = math.exp(math.fsum(window_nll) / sum(tokens))
    cloze_correct, choice_correct = [int(v) for v in cloze_correct], [int(v) for v in choice_correct]
    return {"model": {"path": path}, "metrics": {
        "perplexity": {"perplexity": ppl, "tokens": sum(tokens), "window_nll": window_nll, "window_tokens": tokens},
        "cloze": {"acc": sum(cloze_correct) / len(cloze_correct), "examples": len(cloze_correct),
                  "correct": sum(cloze_correct), "example_correct": cloze_correct},
        "choice": {"acc": sum(choice_correct) / len(choice_correct) / 2, "acc_norm": sum(choice_correct) / len(
            choice_correct), "examples": len(choice_correct), "correct_norm": sum(choice_correct),
            "example_correct": choice_correct, "example_correct_norm": choice_correct}}}


def evaluation(path, perplexity, cloze=0.5, choice=0.25, examples=EXAMPLES):
    """A record of :func:`scored_evaluation` with ``perplexity`` in every window (reported exactly as given) and
    the first ``cloze`` and ``choice`` fractions of the examples correct."""
    record = scored_evaluation(path, [WINDOW_TOKENS * math.log(perplexity)] * WINDOWS,
                               [i < round(cloze * examples) for i in range(examples)],
                               [i < round(choice * examples) for i in range(examples)])
    record["metrics"]["perplexity"]["perplexity"] = perplexity
    return record


def hessian_cell(bits, method, *, near_zero, largest, activation_bits=None, probes=2, jitter=0.0):
    """A Hessian cell (the fields the study reads): ``probes`` probes with Ritz values -largest/2, 0 and
    ``largest (1 + jitter_p)`` and weights ``(1 - m_p) / 2, m_p, (1 - m_p) / 2`` with ``m_p = near_zero (1 +
    jitter_p)``, ``jitter_p`` alternating ``+-jitter`` (identical probes by default); the cell's statistics are
    those of its probes."""
    signs = [(-1) ** p for p in range(probes)]
    masses = [near_zero * (1 + jitter * s) for s in signs]
    nodes = [[-largest / 2, 0.0, largest * (1 + jitter * s)] for s in signs]
    weights = [[(1 - m) / 2, m, (1 - m) / 2] for m in masses]
    near = sum(masses) / probes
    return {"bits": bits, "activation_bits": activation_bits, "method": method, "near_zero_mass": near,
            "negative_mass": (1 - near) / 2, "positive_mass": (1 - near) / 2,
            "largest_abs_eigenvalue": max(abs(v) for theta in nodes for v in theta),
            "near_zero_threshold": 0.01 * largest, "parameters": 1000, "probes": probes, "steps": 3, "seed": 0,
            "nodes": nodes, "weights": weights, "wall_time_s": 1.5}


IN_FEATURES = 128  # the planted checkpoints: one 64 x 128 layer, codes packed by the bit width's field


def quantization_config(bits):
    """The parts of a checkpoint's ``quantization_config.json`` the bits-per-weight check reads: one 64 x 128 layer
    of ``bits``-bit codes (2 bits per code at 1.58 bits, 4 at 3) and float32 scales per row."""
    field = {1: 1, 1.58: 2, 2: 2, 3: 4, 4: 4}[bits]
    return {"recipe": {"weights": {"block_size": "row", "global_scale": None}}, "scale_storage": "float32",
            "packing": {"codes_per_byte": 8 // field}, "weights": {"layer": {"shape": [64, IN_FEATURES]}}}


def planted_bits_per_weight(bits):
    """The bits per weight of :func:`quantization_config`: the code field + 32 / in_features."""
    return 8 / quantization_config(bits)["packing"]["codes_per_byte"] + 32 / IN_FEATURES


def build_study(directory, config=None, planted=None, hessians=None):
    """``(config, curves, evaluations, hessians, seconds, bits_per_weight)`` for ``study_summary``: every run of the
    smoke config with the ``planted`` curve and test perplexity of its method (the same in every setting), eval
    logs written under ``directory``; ``hessians`` default: baseline and WinQ of each setting, lower bits flatter."""
    from papers.winq.settings import run_names, run_settings

    config = smoke_config() if config is None else config
    planted = PLANTED if planted is None else planted
    curves, evaluations, seconds, bits = {}, {"base": evaluation("base", BASE_PERPLEXITY)}, {}, {}
    for name in run_names(config):
        method = run_settings(config, name)["method"]
        values, test = planted[method]
        path = Path(directory) / name / "eval_log.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [f"{4 * (i + 1) - 1},{v / 100},{v},256" for i, v in enumerate(values)]
        path.write_text("step,val_loss,val_perplexity,val_tokens\n" + "\n".join(rows) + "\n")
        curves[name] = path
        evaluations[name] = evaluation(name, test)
        seconds[name] = 2.0
        bits[name] = planted_bits_per_weight(run_settings(config, name)["bits"])
    if hessians is None:
        hessians = {}
        for setting in config["study_settings"]:
            b = config["settings"][setting]["bits"]
            hessians[f"{setting}-baseline"] = hessian_cell(b, "baseline", near_zero=0.6 - 0.1 * b, largest=b)
            hessians[f"{setting}-winq"] = hessian_cell(b, "winq", near_zero=0.5 - 0.1 * b, largest=2 * b)
    return config, curves, evaluations, hessians, seconds, bits
