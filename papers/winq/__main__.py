"""``python -m papers.winq <step>``: the thin steps the Snakemake rules run (read inputs, call the package, write the
output atomically). ``--config-json`` is the profile's study config (``settings.profile_config``).

A training cell is one seed of a run, ``<run>/seed<k>`` (:func:`common.qat.seeds.seed_cell`), and every artifact of it
names the cell in its path, which the steps parse back (:func:`common.qat.seeds.parse_seed_cell`): a cell's logs in
``--run-dir`` ``.../runs/<run>/seed<k>/`` (``train_log.csv`` with the gradient norm per step, ``eval_log.csv``: the
validation-perplexity curve, ``train_summary.json``, ``qat.json``), its checkpoint in ``--out``
``.../trained/winq/<run>/seed<k>`` (latent weights, ``lowbit_metadata.json``, ``lowbit_scales.safetensors``), its
quantized checkpoint ``.../trained/winq/<run>/seed<k>`` (``size_report.json``, ``quantization_config.json``), its
evaluation ``.../eval/<run>/seed<k>.json`` (``base.json``: the full-precision base model) and Hessian cell
``.../hessian/<run>/seed<k>.json``; its run folder also holds the diagnostics of :mod:`.diagnostics`
(``mechanism.jsonl``, ``stagnation.jsonl``), which the summary reads. The claims read the summary, the cells'
evaluations (per-window and per-example scores), the ``quantization_config.json`` of each quantized checkpoint and
the base model (``--base-model``: the regime card, :mod:`papers.winq.regime`), and write ``claims.json``
(``common.report.claims_document``: rows, implementation checks and the card); the context reads the base model's
``config.json`` for the setup table.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from common.cli import (
    COMPUTE_FLAGS,
    CONTEXT_FLAGS,
    DEVICE_FLAG,
    FIGURE_ARGUMENTS,
    MANY,
    REQUIRED,
    compute_settings,
    device_setting,
    evidence_settings,
    require_paths,
    run_each,
    run_step,
    step_parser,
)
from common.config import json_object
from common.io import read_json, write_json
from common.qat.seeds import parse_seed_cell, seed_cell

from .settings import FIGURES


def cell_of_path(path: str | os.PathLike[str], depth: int = 0) -> str:
    """The cell ``<run>/seed<k>`` a path names (:func:`common.qat.seeds.parse_seed_cell`; a ``.json`` file's suffix
    dropped): ``depth`` 0 for ``.../<run>/seed<k>`` or ``.../<run>/seed<k>.json``, 1 for a file in the cell's
    folder."""
    path = Path(path)
    if depth == 0 and path.suffix == ".json":
        path = path.with_suffix("")
    return seed_cell(*parse_seed_cell(path, depth))


def evaluation_key(path: str | os.PathLike[str]) -> str:
    """``base`` for the base model's evaluation, else its cell."""
    return "base" if Path(path).name == "base.json" else cell_of_path(path)


def train_run(args: argparse.Namespace) -> None:
    from .method import WINQ_STRENGTH
    from .run import winq_run
    from .settings import run_settings, train_config

    config = json_object(args.config_json)
    settings = run_settings(config, args.run_name)
    interpolation = settings["interpolation"] or {}  # None for the methods that do not interpolate
    diagnostics = config["diagnostics"]
    winq_run(args.init, args.train, args.validation, train_config(config, args.run_name, args.seed), args.run_dir,
             args.out, bits=settings["bits"], activation_bits=settings["activation_bits"], method=settings["method"],
             every=interpolation.get("every"), strength=interpolation.get("strength", WINQ_STRENGTH),
             noise_sigma=settings["noise_sigma"], hadamard=settings["hadamard"],
             diagnostics_every=settings["diagnostics_every"],
             stagnation_batches=diagnostics["stagnation_batches"], stagnation_seed=diagnostics["stagnation_seed"],
             device=device_setting(args))


def evaluate(args: argparse.Namespace) -> None:
    from common.eval import evaluate_checkpoint, write_evaluation

    settings = json_object(args.config_json)
    options = {k: settings[k] for k in ("window", "stride", "max_tokens", "batch_size")}
    write_evaluation(args.out, evaluate_checkpoint(args.model, args.split, cloze=args.cloze, choice=args.choice,
                                                   compute=compute_settings(args), **options))


def summary(args: argparse.Namespace) -> None:
    from common.qat.lowbit_io import METADATA_FILE

    from .study import study_summary

    curves = {cell_of_path(p, 1): p for p in args.curves}
    logs = {cell_of_path(p, 1): p for p in args.logs}
    seconds = {cell: read_json(Path(p).with_name("train_summary.json"))["seconds"] for cell, p in curves.items()}
    evaluations = {evaluation_key(p): read_json(p) for p in args.evaluations}
    hessians = {cell_of_path(p): read_json(p) for p in args.hessians}
    records = {cell_of_path(p): read_json(Path(p) / METADATA_FILE) for p in args.trained}
    bits = {cell_of_path(p): read_json(Path(p) / "size_report.json")["bits_per_weight"] for p in args.quantized}
    write_json(args.out, study_summary(json_object(args.config_json), curves, logs, evaluations, hessians,
                                       {cell: {"qat": r["qat"], "training": r["training"]}
                                        for cell, r in records.items()}, seconds, bits,
                                       mechanism={cell_of_path(p, 1): p for p in args.mechanism},
                                       stagnation={cell_of_path(p, 1): p for p in args.stagnation}))


def figure(args: argparse.Namespace) -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")  # files only: never open a window
    from common.report.figures import save_figure

    from .figures import PLOTS

    save_figure(PLOTS[args.kind](read_json(args.summary)), args.png, args.pdf)


def figures(args: argparse.Namespace) -> None:
    """Every figure of ``--figure`` (each the arguments of one ``figure`` step) in this one process: the figure rule's
    one job for the whole report (:func:`common.cli.run_each`)."""
    run_each(build_parser(), "figure", args.figure)


def claims(args: argparse.Namespace) -> None:
    from common.models import load_causal_lm
    from common.ptq.checkpoint import QUANT_CONFIG_FILE
    from common.report import write_claims

    from . import claims as paper
    from .regime import regime_card

    require_paths({"--base-model": args.base_model})
    config = json_object(args.config_json)
    evaluations = {evaluation_key(p): p for p in args.evaluations}
    study = paper.Study(summary=read_json(args.summary),
                        evaluations={c: read_json(p) for c, p in evaluations.items()},
                        quantized={cell_of_path(p): read_json(Path(p) / QUANT_CONFIG_FILE) for p in args.quantized},
                        summary_path=args.summary, evaluation_paths=evaluations,
                        configured_settings=config["settings"])
    card = regime_card(config, dict(load_causal_lm(args.base_model).named_parameters()), study.summary)
    write_claims(args.out, paper.claims, config, study, evidence_settings(args), card, "winq")


def context(args: argparse.Namespace) -> None:
    from common.report import figure_entries, training_seconds

    from .context import build_context
    from .figures import caption
    from .regime import model_facts

    config = json_object(args.config_json)
    study = read_json(args.summary)
    stages = {f"QAT, {r['run']} ({len(r['seeds'])} seed{'s' * (len(r['seeds']) > 1)})": r["train_seconds"]
              for r in study["runs"]}
    spectra: dict[str, float] = {}
    for h in study["hessian"]:
        spectra[h["run"]] = spectra.get(h["run"], 0.0) + h["wall_time_s"]
    stages |= {f"Hessian spectra, {run}": seconds for run, seconds in spectra.items()}
    stages |= training_seconds(args.base_model_metadata)
    write_json(args.out, build_context(
        config=config, profile=args.profile, summary=study, claims=read_json(args.claims),
        model=model_facts(args.base_model), corpus=args.corpus,
        figures=figure_entries(args.figures, caption), artifacts=[*args.cited, args.summary, args.claims],
        rerun_examples=args.rerun_example,
        seeds={"training cells of compared runs (data order, initialisation, noise)": _seeds(config["seeds"]),
               "training cells of figure-only runs": _seeds(config["figure_seeds"]), "Hessian probes": args.seed,
               "workflow": args.seed}, stage_seconds=stages))


def _seeds(seeds: Sequence[int]) -> str:
    return ", ".join(str(s) for s in sorted(seeds))


def hessian(args: argparse.Namespace) -> None:
    from .hessian import spectrum_cell

    config = json_object(args.config_json)
    require_paths({"--model": args.model, "--split": args.split})
    write_json(args.out, spectrum_cell(args.model, args.split, config["hessian"], config["train"]["seq_len"],
                                       args.seed, compute_settings(args)))


def pilot(args: argparse.Namespace) -> None:
    from common.models import load_causal_lm

    from .premise import pilot_table

    require_paths({"--base-model": args.base_model})
    parameters = dict(load_causal_lm(args.base_model).named_parameters())
    write_json(args.out, pilot_table(json_object(args.config_json), [Path(p).parent for p in args.runs], parameters))


def build_parser() -> argparse.ArgumentParser:
    req = REQUIRED
    return step_parser("python -m papers.winq", __doc__, [
        ("train", train_run, "one training cell: a low-bit QAT run (baseline, winq, interpolation or noise) on one "
         "seed (--seed: data order, initialisation and noise)",
         [("--config-json", req), ("--run", {"dest": "run_name", "required": True}),
          ("--seed", {"type": int, "required": True}), ("--init", req), ("--train", req), ("--validation", req),
          ("--run-dir", req), ("--out", req), DEVICE_FLAG]),
        ("hessian", hessian, "the Hessian spectrum of one trained low-bit model on a fixed batch of a split "
         "(sequences of train.seq_len tokens; --seed: the probes)",
         [("--config-json", req), ("--model", req), ("--split", req), ("--seed", {"type": int, "default": 0}),
          ("--out", req), *COMPUTE_FLAGS]),
        ("evaluate", evaluate, "one model on the held-out split: perplexity and the zero-shot tasks",
         [("--config-json", req), ("--model", req), ("--split", req), ("--cloze", req), ("--choice", req),
          ("--out", req), *COMPUTE_FLAGS]),
        ("summary", summary, "the study's summary over every run",
         [("--config-json", req), ("--curves", MANY), ("--logs", MANY), ("--evaluations", MANY),
          ("--hessians", {"nargs": "*", "default": []}), ("--trained", MANY), ("--quantized", MANY),
          ("--mechanism", MANY), ("--stagnation", MANY), ("--out", req)]),
        ("figure", figure, "one figure as PNG and PDF",
         [("kind", {"choices": list(FIGURES)}), ("--summary", req), ("--png", req), ("--pdf", req)]),
        ("figures", figures, "several figures as PNG and PDF, one process (the figure rule's job)",
         [FIGURE_ARGUMENTS]),
        ("claims", claims, "the claims table: estimates, intervals and verdicts of the config's predictions "
         "(--config-json: papers.winq.claims.claims_config), the implementation checks and the regime card "
         "(measured on --base-model, the checkpoint the study trains from)",
         [("--config-json", req), ("--evidence-json", req), ("--summary", req), ("--evaluations", MANY),
          ("--quantized", MANY), ("--base-model", req), ("--out", req)]),
        ("pilot", pilot, "the baseline-only pilot's table (papers.winq.premise) from its cells' training summaries "
         "(--runs: each cell's train_summary.json, beside its other logs; --base-model: the card's rows)",
         [("--config-json", req), ("--runs", MANY), ("--base-model", req), ("--out", req)]),
        ("context", context, "the report context (--base-model: the checkpoint the study trains from, --corpus: "
         "the name of its QAT corpus, for the setup table)",
         [("--summary", req), ("--base-model", req), ("--corpus", req), *CONTEXT_FLAGS]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
