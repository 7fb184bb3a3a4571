"""``python -m common.ptq checkpoint``: quantize a local HF checkpoint folder into a quantized checkpoint.

    python -m common.ptq checkpoint --model DIR --recipe NVFP4 [--activations] [--include REGEX] [--exclude REGEX]
        [--skip-first K --skip-last M] --out DIR
    python -m common.ptq checkpoint --model QAT_DIR --recipe learned --out DIR
    python -m common.ptq export --model Q_DIR --format compressed-tensors [--weights-only] --out DIR

``--recipe`` is what :func:`common.recipes.resolve_recipe` reads (the name of a block recipe of
:data:`common.recipes.RECIPES`: ``--activations`` then quantizes the layer inputs with the same spec; a JSON object;
the path of a ``.json`` file, both in :func:`common.recipes.recipe_to_dict` form) and must be a block recipe
(:class:`common.recipes.QuantRecipe`). The model is loaded in float32 from local files only; the tokenizer is saved
too when the folder has one.

``--recipe learned`` stores a low-bit QAT checkpoint (ParetoQ quantizers with learned per-row scales, written by
``papers.winq.run.winq_run``: :mod:`common.qat.lowbit_io`) as it was trained: the model is loaded with its
quantizers by the one loader (:func:`common.models.load_checkpoint`, kind ``lowbit_qat``), each trained layer's
effective weight ``Q(W) = lowbit_quantize(W, alpha, bits)`` is split into integer codes and per-row float32 scales
(the handle's ``learned_codes``: binary, ternary, midrise2, int3_tc or int4_tc codes) and materialized into the
weights (:func:`common.quantization.convert`), and the checkpoint holds the packed codes and the learned scales with
the recipe ``QuantRecipe(name="paretoq-w<bits>[a8]", weights=QuantSpec(<codes format>, "fp32", "row", rule=None),
activations=common.recipes.INT8_PER_TOKEN if the run had 8-bit activations)``, so
:func:`common.ptq.load_quantized_checkpoint` rebuilds ``Q(W)`` bit for bit and re-attaches ParetoQ's A8 per-token
int8 quantization. The selected modules are the run's trained layers (its ``qat`` record's ``layers``), so
``--include``, ``--exclude``, ``--skip-*`` and ``--activations`` are refused with it; so is a folder that is not a
low-bit QAT checkpoint, and a run trained with a Hadamard rotation (its effective weight ``Q(W H) H^T`` has no
integer codes of the unrotated weight with per-row scales).

``export`` rewrites a quantized checkpoint of NVFP4 (4/6, brute-force and other scale rules included) or MXFP4
weights in compressed-tensors' layout, which transformers and vLLM load (:mod:`common.ptq.export`; the other formats
stay in ours).

On success one JSON line is printed (output folder, recipe, module count and :func:`size_report`), and also saved
as ``size_report.json`` in the output folder; bad input exits with status 2 and a message naming the value,
before anything is written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import transformers

from common.data.tokenizer import TOKENIZER_FILES
from common.io import write_json
from common.models import checkpoint_record, load_checkpoint, load_float_model
from common.qat import lowbit_io
from common.quantization import convert
from common.recipes import RECIPES, QuantRecipe, resolve_recipe
from common.scaling import BlockScales
from common.select import DEFAULT_INCLUDE, select_linears

from .checkpoint import checkpoint_size_bytes, save_quantized_checkpoint, size_report
from .export import FORMATS, export_compressed_tensors

LEARNED = "learned"
LEARNED_KIND = lowbit_io.LOWBIT_KIND.name  # the checkpoint kind of low-bit QAT runs, registered by its writer
SELECTION_FLAGS = {"include": "--include", "exclude": "--exclude", "skip_first": "--skip-first",
                   "skip_last": "--skip-last", "skip_proportion": "--skip-proportion", "activations": "--activations"}


def block_recipe(text: str, activations: bool) -> QuantRecipe:
    """The block recipe ``--recipe text`` stands for (:func:`common.recipes.resolve_recipe`); ValueError naming the
    value for anything else (a QAT recipe is trained, not applied to a checkpoint)."""
    recipe = resolve_recipe(text, activations=activations)
    if not isinstance(recipe, QuantRecipe):
        raise ValueError(f"--recipe {text!r} is a {type(recipe).__name__}: a quantized checkpoint stores a block "
                         f"recipe (QuantRecipe), or give '{LEARNED}' for a low-bit QAT checkpoint")
    return recipe


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m common.ptq", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    checkpoint = commands.add_parser("checkpoint", help="write a quantized checkpoint of a local HF model")
    checkpoint.add_argument("--model", required=True, help="HF checkpoint folder (local files only)")
    checkpoint.add_argument("--recipe", required=True,
                            help=f"a block recipe: a name ({', '.join(RECIPES)}), a JSON object or a .json file; or "
                                 f"'{LEARNED}' (a low-bit QAT checkpoint stored with its learned scales)")
    checkpoint.add_argument("--activations", action="store_true", help="also quantize the inputs of the layers")
    checkpoint.add_argument("--include", default=None,
                            help=f"regex of the Linear module names to quantize (default {DEFAULT_INCLUDE!r})")
    checkpoint.add_argument("--exclude", default=None, help="regex of module names to leave alone")
    checkpoint.add_argument("--skip-first", type=int, default=None, help="leave the first K blocks alone")
    checkpoint.add_argument("--skip-last", type=int, default=None, help="leave the last M blocks alone")
    checkpoint.add_argument("--skip-proportion", type=float, nargs=2, metavar=("FIRST", "LAST"), default=None,
                            help="leave the first and last fractions of the blocks alone, rounded to the nearest "
                                 "block (instead of --skip-first/--skip-last), e.g. 0.1154 0.0769 = 3 and 2 of 26")
    checkpoint.add_argument("--out", required=True, help="output folder (replaced atomically)")
    export = commands.add_parser("export", help="rewrite a quantized checkpoint in a standard layout")
    export.add_argument("--model", required=True, help="quantized checkpoint folder (python -m common.ptq checkpoint)")
    export.add_argument("--format", required=True, choices=FORMATS, help="the layout to write")
    export.add_argument("--weights-only", action="store_true",
                        help="export the weights of a recipe that also quantizes activations (the inputs are then "
                             "left in full precision)")
    export.add_argument("--out", required=True, help="output folder (replaced atomically)")
    return parser


def export_command(args: argparse.Namespace) -> dict[str, object]:
    """Export; returns the JSON summary. ValueError for bad input, before anything is written."""
    if Path(args.out).resolve() == Path(args.model).resolve():
        raise ValueError(f"--out {args.out!r} is the --model folder: it would be replaced")
    out = export_compressed_tensors(args.model, args.out, weights_only=args.weights_only)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))["quantization_config"]
    return {"out": str(out), "source": args.model, "format": args.format, "layout": config["format"],
            "checkpoint_bytes": checkpoint_size_bytes(out)}


def checkpoint_command(args: argparse.Namespace) -> dict[str, object]:
    """Load, select, save; returns the JSON summary. ValueError for bad input, before anything is written."""
    learned = args.recipe == LEARNED
    if learned:
        given = [flag for field, flag in SELECTION_FLAGS.items()
                 if getattr(args, field) is not None and getattr(args, field) is not False]
        if given:
            raise ValueError(f"{given[0]} does not apply to --recipe {LEARNED}: the stored layers and their "
                             "activation quantization are the QAT run's own")
        recipe = None
    else:
        recipe = block_recipe(args.recipe, args.activations)
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"--model {args.model!r} is not a Hugging Face checkpoint folder (no config.json)")
    if Path(args.out).resolve() == model_dir.resolve():
        raise ValueError(f"--out {args.out!r} is the --model folder: it would be replaced")
    if learned:
        model, tokenizer, recipe, names, weight_scales = load_learned(model_dir)
    else:
        model = load_float_model(model_dir)  # the weights as stored (common.models' float loader)
        tokenizer = None
        if any((model_dir / name).is_file() for name in TOKENIZER_FILES):
            tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        names = select_linears(model, include=DEFAULT_INCLUDE if args.include is None else args.include,
                               exclude=args.exclude, skip_first=args.skip_first or 0, skip_last=args.skip_last or 0,
                               skip_proportion=args.skip_proportion)
        weight_scales = None
    out = save_quantized_checkpoint(model, tokenizer, recipe, names, args.out, weight_scales=weight_scales)
    summary = {"out": str(out), "source": str(model_dir), "recipe": recipe.to_dict(), "modules": len(names),
               **size_report(model, out)}
    write_json(out / "size_report.json", summary)  # the size on disk next to the original's, kept as an artifact
    return summary


def load_learned(model_dir: Path) -> tuple[torch.nn.Module, Any, QuantRecipe, list[str], dict[str, BlockScales]]:
    """``(model, tokenizer, recipe, names, weight_scales)`` of the low-bit QAT checkpoint ``model_dir`` (module
    docstring, ``--recipe learned``): the model holds the effective weights ``Q(W)`` of the trained layers
    ``names``, whose codes and learned per-row scales are ``weight_scales``. ValueError naming the folder when it is
    not a low-bit QAT checkpoint or was trained with a Hadamard rotation (both before the model is loaded)."""
    try:
        qat = checkpoint_record(model_dir, LEARNED_KIND)
    except ValueError as err:
        raise ValueError(f"--recipe {LEARNED}: {err}") from None
    if qat.get("hadamard"):
        raise ValueError(f"--recipe {LEARNED}: {str(model_dir)!r} was trained with a Hadamard rotation (hadamard: "
                         "true): its effective weights Q(W H) H^T cannot be stored as codes of the unrotated weight "
                         "with per-row scales")
    loaded = load_checkpoint(model_dir, kind=LEARNED_KIND)
    recipe, weight_scales = loaded.handle.learned_codes()
    convert(loaded.model)  # plain Linear layers holding Q(W), bit for bit
    return loaded.model, loaded.tokenizer(), recipe, list(loaded.handle.names), weight_scales


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (argparse exits 2 itself on malformed arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        summary = (checkpoint_command if args.command == "checkpoint" else export_command)(args)
    except ValueError as err:
        parser.exit(2, f"{parser.prog} {args.command}: error: {err}\n")
    print(json.dumps(summary, sort_keys=True))
    return 0
