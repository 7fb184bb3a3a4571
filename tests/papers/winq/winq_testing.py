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
BASE_PERPLEXITY = 50.0
# per method: (validation curve after 2, 4, ..., 12 steps, test perplexity); the baseline's final value is the target
PLANTED = {
    "baseline": ([130.0, 120.0, 100.0, 95.0, 91.0, 90.0], 100.0),
    "winq": ([125.0, 110.0, 88.0, 84.0, 81.0, 80.0], 92.0),  # at or below 90 after 6 steps: 2x
    "interpolation": ([128.0, 115.0, 92.0, 90.0, 87.0, 85.0], 95.0),  # after 8 steps: 1.5x
    "noise": ([129.0, 119.0, 99.0, 94.0, 91.0, 91.0], 98.0),  # never
}
# per method: the gradient norm of each of the 12 steps (the baseline's last quarter is a quarter of its second)
GRAD_NORMS = {"baseline": [1.0] * 3 + [0.8] * 3 + [0.4] * 3 + [0.2] * 3}
GRAD_NORMS |= {"winq": GRAD_NORMS["baseline"], "interpolation": GRAD_NORMS["baseline"],
               "noise": [1.5 * g for g in GRAD_NORMS["baseline"]]}
EXAMPLES = 64
# the diagnostics of the smoke study (12 steps, K = 3: boundaries after 3, 6, 9, 12 steps; evaluations every 2). Per
# method: codes changed, near a boundary before / after, clipped before / after, one value per boundary (the near
# shares None at the last, which has no next period); the noise runs have no records (a run recorded without a period)
MECHANISM = {
    "baseline": ([0.125] * 4, [0.5, 0.5, 0.5, None], [0.5, 0.5, 0.5, None], [0.25] * 4, [0.25] * 4),
    "interpolation": ([0.125, 0.0625, 0.0625, 0.0625], [0.5, 0.375, 0.375, None], [0.25, 0.25, 0.25, None],
                      [0.25] * 4, [0.125] * 4),
}
MECHANISM["winq"] = MECHANISM["interpolation"]
STAGNATION = [0.5, 0.25, 0.25, 0.125, 0.0625, 0.0625]  # relative gradient norm after 2, 4, ..., 12 steps: 1/4 decay


def smoke_config():
    """The smoke profile of the real config (seeds 0 and 1, 12 steps, eval every 2) with a second setting for the
    pooled and per-setting rows: W1 x every method and W2 x {baseline, winq} (the profile itself trains W1 only)."""
    import copy

    import yaml

    from papers.winq.settings import KEY, profile_config

    raw = yaml.safe_load(CONFIG.read_text())[KEY]
    smoke = copy.deepcopy(raw["profiles"]["smoke"])
    smoke.update(study_settings=["w1", "w2"], compared={"w2": ["baseline", "winq"]})
    return profile_config({**raw, "profiles": {**raw["profiles"], "smoke": smoke}}, "smoke")


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


def hessian_cell(bits, method, *, near_zero, largest, activation_bits=None, probes=2, jitter=0.0, negative=0.5):
    """A Hessian cell (the fields the study reads): ``probes`` probes with Ritz values -largest/2, 0 and
    ``largest (1 + jitter_p)`` and weights ``(1 - m_p) negative, m_p, (1 - m_p) (1 - negative)`` with
    ``m_p = near_zero (1 + jitter_p)``, ``jitter_p`` alternating ``+-jitter`` (identical probes by default); the
    cell's statistics are those of its probes (the 0 node is near zero at every threshold)."""
    signs = [(-1) ** p for p in range(probes)]
    masses = [near_zero * (1 + jitter * s) for s in signs]
    nodes = [[-largest / 2, 0.0, largest * (1 + jitter * s)] for s in signs]
    weights = [[(1 - m) * negative, m, (1 - m) * (1 - negative)] for m in masses]
    near = sum(masses) / probes
    return {"bits": bits, "activation_bits": activation_bits, "method": method, "near_zero_mass": near,
            "negative_mass": (1 - near) * negative, "positive_mass": (1 - near) * (1 - negative),
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


def write_csv(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "\n" + "\n".join(",".join(str(v) for v in row) for row in rows) + "\n")


def _of_seed(value, seed):
    """A planted value, or per seed ``{seed: value}``."""
    return value[seed] if isinstance(value, dict) else value


def mechanism_records(series, factor=1.0, every=3):
    """The ``mechanism.jsonl`` records of one cell from planted ``series`` (a :data:`MECHANISM` entry; None: no
    records), every share scaled by ``factor``, the boundaries after ``every``, ``2 every``, ... steps."""
    if series is None:
        return []
    codes, before, after, clipped_before, clipped_after = series
    scale = lambda v: None if v is None else v * factor  # noqa: E731
    last = len(codes) - 1
    return [{"period": i + 1, "step": every * (i + 1) - 1, "steps_taken": every * (i + 1),
             "interpolated": after != before, "travel": 0.0 if i == last else 1e-4, "weights": 64,
             "codes_changed": scale(codes[i]), "codes_changed_by_interpolation": 0.0,
             "near_boundary_before": scale(before[i]), "near_boundary_after": scale(after[i]),
             "clipped_before": scale(clipped_before[i]), "clipped_after": scale(clipped_after[i])}
            for i in range(len(codes))]


def stagnation_records(values, factor=1.0, every=2):
    """The ``stagnation.jsonl`` records of one cell: the relative gradient norm ``values`` (scaled by ``factor``)
    after ``every``, ``2 every``, ... steps."""
    return [{"step": every * (i + 1) - 1, "steps_taken": every * (i + 1), "relative_grad_norm": v * factor,
             "batches": 20, "sequences_per_batch": 4} for i, v in enumerate(values)]


def build_study(directory, config=None, planted=None, hessians=None, grad_norms=None, seed_factor=0.0,
                mechanism=None, stagnation=None):
    """``(config, curves, logs, evaluations, hessians, records, seconds, bits_per_weight, mechanism, stagnation)``
    for ``study_summary``: every cell of the smoke config with the ``planted`` curve and test perplexity of its
    method (the same in every setting; seed ``k`` scales them by ``1 + seed_factor k``), its ``grad_norms``, its
    ``mechanism`` series (default :data:`MECHANISM`, shares scaled as the curve) and ``stagnation`` curve (default
    :data:`STAGNATION` for every method, scaled alike) (a method's entry may be ``{seed: ...}``), logs and
    diagnostics written under ``directory``; ``hessians`` default: every Hessian cell of the config, lower bits
    flatter, interpolation steeper, noise with more negative mass."""
    from common.io import write_jsonl
    from papers.winq.settings import hessian_cells, run_settings, training_cells

    config = smoke_config() if config is None else config
    planted = PLANTED if planted is None else planted
    grad_norms = GRAD_NORMS if grad_norms is None else grad_norms
    mechanism = MECHANISM if mechanism is None else mechanism
    stagnation = dict.fromkeys(config["methods"], STAGNATION) if stagnation is None else stagnation
    curves, logs, records, seconds, bits, mechanism_paths, stagnation_paths = {}, {}, {}, {}, {}, {}, {}
    evaluations = {"base": evaluation("base", BASE_PERPLEXITY)}
    for cell in training_cells(config):
        run, _, seed = cell.rpartition("/seed")
        settings = run_settings(config, run)
        factor = 1 + seed_factor * int(seed)
        values, test = _of_seed(planted[settings["method"]], int(seed))
        every = config["train"]["eval_every"]
        write_csv(Path(directory) / cell / "eval_log.csv", "step,val_loss,val_perplexity,val_tokens",
                  [(every * (i + 1) - 1, math.log(v * factor), v * factor, 256) for i, v in enumerate(values)])
        write_csv(Path(directory) / cell / "train_log.csv", "step,loss,lr,grad_norm,tokens,seconds",
                  [(i, 1.0, 1e-3, g, 256 * (i + 1), i)
                   for i, g in enumerate(_of_seed(grad_norms[settings["method"]], int(seed)))])
        curves[cell] = Path(directory) / cell / "eval_log.csv"
        logs[cell] = Path(directory) / cell / "train_log.csv"
        evaluations[cell] = evaluation(cell, test * factor)
        interpolation = settings["interpolation"]
        records[cell] = {"qat": {"method": settings["method"], "noise_seed": int(seed), "interpolations":
                                 config["train"]["max_steps"] // interpolation["every"] if interpolation else 0},
                         "training": {"config": {"seed": int(seed)}}}
        seconds[cell] = 2.0
        bits[cell] = planted_bits_per_weight(settings["bits"])
        mechanism_paths[cell] = Path(directory) / cell / "mechanism.jsonl"
        stagnation_paths[cell] = Path(directory) / cell / "stagnation.jsonl"
        series = mechanism.get(settings["method"])
        write_jsonl(mechanism_paths[cell], mechanism_records(None if series is None else _of_seed(series, int(seed)),
                                                             factor, settings["diagnostics_every"]))
        write_jsonl(stagnation_paths[cell], stagnation_records(_of_seed(stagnation[settings["method"]], int(seed)),
                                                               factor, every))
    if hessians is None:
        hessians = {}
        for cell in hessian_cells(config):
            settings = run_settings(config, cell.split("/")[0])
            b, method = settings["bits"], settings["method"]
            fields = {"near_zero": 0.6 - 0.1 * b, "largest": b}
            if method in ("interpolation", "winq"):
                fields = {"near_zero": 0.4 - 0.1 * b, "largest": 2 * b}
            hessians[cell] = hessian_cell(b, method, **fields, negative=0.6 if method == "noise" else 0.5)
    return config, curves, logs, evaluations, hessians, records, seconds, bits, mechanism_paths, stagnation_paths


# --- the regime card and the base model --------------------------------------------------------------------------
INSIDE = {"travel": 10.0, "step": 1e-3, "quantized_share": 0.7, "stall": 0.2}  # inside every bound of the card


def planted_card(**values):
    """The rows of the config's regime card with every quantity inside its bounds (:data:`INSIDE`: by its kind,
    ``travel_*``, ``step_*``, ``stall_*`` or ``quantized_share``), ``values`` (id -> ours) replacing some."""
    import yaml

    from common.report import regime_rows, regime_specs

    specs = regime_specs(yaml.safe_load(CONFIG.read_text())["winq"]["regime"])
    kind = {rid: rid if rid in INSIDE else rid.partition("_")[0] for rid in specs}
    measured = {rid: values.get(rid, INSIDE[kind[rid]]) for rid in specs}
    return regime_rows(specs, measured)


def save_planted_model(folder, *, tied=True):
    """A 2-block Llama checkpoint (hidden 16, MLP 32, vocabulary 40) saved to ``folder``, seeded; its config."""
    import torch
    from transformers import LlamaForCausalLM

    from common.models import Architecture

    config = Architecture("planted", 16, 32, 2, 2, 1, 32, tie_word_embeddings=tied).config(40)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return config
