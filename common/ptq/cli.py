"""``python -m common.ptq quantize``: quantize a local HF checkpoint folder into a quantized checkpoint.

    python -m common.ptq quantize --model DIR --recipe NVFP4 [--activations] [--include REGEX] [--exclude REGEX]
        [--skip-first K --skip-last M] --out DIR

``--recipe`` is a name from :data:`common.scaling.RECIPES` (``--activations`` then quantizes the layer inputs
with the same recipe), a JSON object, or the path of a ``.json`` file, both in :meth:`QuantRecipe.to_dict` form.
The model is loaded in float32 from local files only; the tokenizer is saved too when the folder has one. On
success one JSON line is printed (output folder, recipe, module count and :func:`size_report`), and also saved
as ``size_report.json`` in the output folder; bad input exits with status 2 and a message naming the value,
before anything is written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch
import transformers

from common.io import write_json
from common.scaling import RECIPES

from .checkpoint import save_quantized_checkpoint, size_report
from .recipe import QuantRecipe
from .select import DEFAULT_INCLUDE, select_linears

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


def parse_recipe(text: str, activations: bool) -> QuantRecipe:
    """A recipe from a name in RECIPES, a JSON object or a ``.json`` file; ValueError naming the value."""
    if text in RECIPES:
        return QuantRecipe.from_name(text, activations=activations)
    if text.lstrip().startswith("{"):
        source, data = "JSON recipe", text
    elif text.endswith(".json") and Path(text).is_file():
        source, data = f"recipe file {text!r}", Path(text).read_text(encoding="utf-8")
    else:
        raise ValueError(f"unknown recipe {text!r}; valid: a name ({', '.join(RECIPES)}), a JSON object or a "
                         ".json file")
    if activations:
        raise ValueError("--activations applies to named recipes; give a JSON recipe its 'activations' entry")
    try:
        return QuantRecipe.from_dict(json.loads(data))
    except json.JSONDecodeError as err:
        raise ValueError(f"{source} is not valid JSON: {err}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m common.ptq", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    quantize = commands.add_parser("quantize", help="write a quantized checkpoint of a local HF model")
    quantize.add_argument("--model", required=True, help="HF checkpoint folder (local files only)")
    quantize.add_argument("--recipe", required=True, help=f"{', '.join(RECIPES)}, a JSON object or a .json file")
    quantize.add_argument("--activations", action="store_true", help="also quantize the inputs of the layers")
    quantize.add_argument("--include", default=DEFAULT_INCLUDE, help="regex of the Linear module names to quantize")
    quantize.add_argument("--exclude", default=None, help="regex of module names to leave alone")
    quantize.add_argument("--skip-first", type=int, default=0, help="leave the first K blocks alone")
    quantize.add_argument("--skip-last", type=int, default=0, help="leave the last M blocks alone")
    quantize.add_argument("--skip-proportion", type=float, nargs=2, metavar=("FIRST", "LAST"), default=None,
                          help="leave the first and last fractions of the blocks alone, rounded to the nearest "
                               "block (instead of --skip-first/--skip-last), e.g. 0.1154 0.0769 = 3 and 2 of 26")
    quantize.add_argument("--out", required=True, help="output folder (replaced atomically)")
    return parser


def quantize_command(args: argparse.Namespace) -> dict[str, object]:
    """Load, select, save; returns the JSON summary. ValueError for bad input, before anything is written."""
    recipe = parse_recipe(args.recipe, args.activations)
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        raise ValueError(f"--model {args.model!r} is not a Hugging Face checkpoint folder (no config.json)")
    if Path(args.out).resolve() == model_dir.resolve():
        raise ValueError(f"--out {args.out!r} is the --model folder: it would be replaced")
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32)
    tokenizer = None
    if any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    names = select_linears(model, include=args.include, exclude=args.exclude, skip_first=args.skip_first,
                           skip_last=args.skip_last, skip_proportion=args.skip_proportion)
    out = save_quantized_checkpoint(model, tokenizer, recipe, names, args.out)
    summary = {"out": str(out), "source": str(model_dir), "recipe": recipe.to_dict(), "modules": len(names),
               **size_report(model, out)}
    write_json(out / "size_report.json", summary)  # the size on disk next to the original's, kept as an artifact
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (argparse exits 2 itself on malformed arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        summary = quantize_command(args)
    except ValueError as err:
        parser.exit(2, f"{parser.prog} {args.command}: error: {err}\n")
    print(json.dumps(summary, sort_keys=True))
    return 0
