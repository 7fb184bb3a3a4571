"""The tiny WinQ training config (helpers of the tests here); the tiny corpus and ``smoke`` base model are
``paper_testing.build_tiny_setup``."""

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


def evaluation(path, perplexity, cloze=0.5, choice=0.25, examples=EXAMPLES):
    """A ``common.eval`` record (the parts the study reads)."""
    return {"model": {"path": path}, "metrics": {
        "perplexity": {"perplexity": perplexity, "tokens": 4096},
        "cloze": {"acc": cloze, "examples": examples},
        "choice": {"acc": choice / 2, "acc_norm": choice, "examples": examples}}}


def hessian_cell(bits, method, *, near_zero, largest, activation_bits=None):
    """A Hessian cell (the fields the study reads): one probe with Ritz values -largest/2, 0, largest."""
    return {"bits": bits, "activation_bits": activation_bits, "method": method, "near_zero_mass": near_zero,
            "negative_mass": (1 - near_zero) / 2, "positive_mass": (1 - near_zero) / 2,
            "largest_abs_eigenvalue": largest, "near_zero_threshold": 0.01 * largest, "parameters": 1000,
            "probes": 1, "steps": 3, "nodes": [[-largest / 2, 0.0, largest]],
            "weights": [[(1 - near_zero) / 2, near_zero, (1 - near_zero) / 2]], "wall_time_s": 1.5}


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
        bits[name] = 2.25
    if hessians is None:
        hessians = {}
        for setting in config["study_settings"]:
            b = config["settings"][setting]["bits"]
            hessians[f"{setting}-baseline"] = hessian_cell(b, "baseline", near_zero=0.6 - 0.1 * b, largest=b)
            hessians[f"{setting}-winq"] = hessian_cell(b, "winq", near_zero=0.5 - 0.1 * b, largest=2 * b)
    return config, curves, evaluations, hessians, seconds, bits
