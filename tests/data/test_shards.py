"""Token shards: the memory-mapped stream equals the in-memory one id for id, slices across shard boundaries, the
same training batches and weights, and every bad folder named (size, checksum, tokenizer, format)."""

import json

import numpy as np
import pytest
import torch

from common.data import (
    Document,
    TokenShards,
    load_tokens,
    shard_split,
    token_stream,
    train_tokenizer,
    write_token_shards,
)
from common.data.__main__ import main
from common.data.documents import write_jsonl
from common.data.shards import shard_dtype
from common.models import build_model
from common.train import SequenceSampler, TrainConfig, train

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(0)
    docs = [Document(f"d{i:03d}", " ".join(rng.choice(WORDS, size=int(rng.integers(3, 60)))))
            for i in range(700)]  # > ENCODE_BATCH documents: several tokenizer calls feed one shard
    return train_tokenizer((d.text for d in docs), 320), docs


def test_shards_hold_the_in_memory_stream_exactly(corpus, tmp_path):
    tokenizer, docs = corpus
    stream = token_stream(tokenizer, docs)
    manifest = write_token_shards(tokenizer, docs, tmp_path / "shards", shard_tokens=1000)
    shards = TokenShards(tmp_path / "shards")
    assert shards.numel() == len(shards) == stream.numel() == manifest["tokens"]
    assert manifest["dtype"] == "uint16" and manifest["documents"] == len(docs)
    assert [s["tokens"] for s in manifest["shards"]] == [1000] * (stream.numel() // 1000) + (
        [stream.numel() % 1000] if stream.numel() % 1000 else [])
    assert (tmp_path / "shards" / "shard-00000.bin").stat().st_size == 2000
    whole = shards.tensor()
    assert whole.dtype == torch.long and torch.equal(whole, stream)
    shards.verify()


def test_slices_across_shard_boundaries_match_the_tensor(corpus, tmp_path):
    tokenizer, docs = corpus
    stream = token_stream(tokenizer, docs[:40])
    write_token_shards(tokenizer, docs[:40], tmp_path / "shards", shard_tokens=7)
    shards = TokenShards(tmp_path / "shards")
    n = stream.numel()
    for start in range(0, 30):
        for stop in (start, start + 1, start + 6, start + 7, start + 8, start + 23):
            assert torch.equal(shards[start:stop], stream[start:stop]), (start, stop)
    assert torch.equal(shards[n - 5 :], stream[n - 5 :])
    assert torch.equal(shards[-9:-2], stream[-9:-2])
    assert shards[n : n + 3].numel() == 0
    with pytest.raises(ValueError, match="step 1, got step 2"):
        shards[0:10:2]
    with pytest.raises(TypeError, match="got index 3"):
        shards[3]


def test_sampler_and_training_see_the_same_batches(corpus, tmp_path):
    tokenizer, docs = corpus
    stream = token_stream(tokenizer, docs[:200])
    write_token_shards(tokenizer, docs[:200], tmp_path / "shards", shard_tokens=333)
    shards = TokenShards(tmp_path / "shards")
    on_disk, in_memory = SequenceSampler(shards, 16, seed=3), SequenceSampler(stream, 16, seed=3)
    for first in (0, 5, in_memory.sequences - 2, 3 * in_memory.sequences + 1):  # across epochs too
        assert torch.equal(on_disk.batch(first, 4), in_memory.batch(first, 4))
    config = TrainConfig(max_steps=6, seq_len=16, micro_batch_size=2, lr=3e-3, warmup_steps=1, progress=False)
    from_shards, from_tensor = build_model("smoke", tokenizer, seed=0), build_model("smoke", tokenizer, seed=0)
    train(from_shards, shards, config, tmp_path / "run_shards")
    train(from_tensor, stream, config, tmp_path / "run_tensor")
    for name, value in from_tensor.state_dict().items():
        assert torch.equal(value, from_shards.state_dict()[name]), name


def test_load_tokens_reads_both_and_refuses_another_tokenizer(corpus, tmp_path):
    tokenizer, docs = corpus
    write_jsonl(tmp_path / "train.jsonl", docs[:50])
    manifest = shard_split(tokenizer, tmp_path / "train.jsonl", tmp_path / "shards", shard_tokens=100)
    assert manifest["source"] == {"split": str(tmp_path / "train.jsonl"),
                                  "bytes": (tmp_path / "train.jsonl").stat().st_size}
    from_jsonl = load_tokens(tokenizer, tmp_path / "train.jsonl")
    assert isinstance(load_tokens(tokenizer, tmp_path / "shards"), TokenShards)
    assert torch.equal(load_tokens(tokenizer, tmp_path / "shards", in_memory=True), from_jsonl)
    other = train_tokenizer((d.text for d in docs[:5]), 300)
    with pytest.raises(ValueError, match=r"shards .*shards' were made by tokenizer [0-9a-f]{64}, not by this run's"):
        load_tokens(other, tmp_path / "shards")
    with pytest.raises(ValueError, match="no split file or token shards at .*missing"):
        load_tokens(tokenizer, tmp_path / "missing")


def test_bad_folders_are_named(corpus, tmp_path):
    tokenizer, docs = corpus
    folder = tmp_path / "shards"
    write_token_shards(tokenizer, docs[:30], folder, shard_tokens=50)
    with pytest.raises(ValueError, match="no token shards at .*elsewhere' \\(no manifest.json\\)"):
        TokenShards(tmp_path / "elsewhere")
    first = folder / "shard-00001.bin"
    data = bytearray(first.read_bytes())
    data[3] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="shard .*shard-00001.bin: sha256 [0-9a-f]{64}, the manifest says"):
        TokenShards(folder).verify()
    first.write_bytes(bytes(data[:-2]))
    with pytest.raises(ValueError, match=r"shard .*shard-00001.bin has 98 bytes, the manifest says 100 \(50 tokens"):
        TokenShards(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "version": 9}))
    with pytest.raises(ValueError, match="version 9, expected 'lowbit-token-shards' version 1"):
        TokenShards(folder)


class ShrunkTokenizer:
    """A tokenizer that claims a vocabulary of ``size`` ids while it encodes as ``inner`` does."""

    def __init__(self, inner, size: int):
        self.inner, self.size, self.eos_token_id = inner, size, inner.eos_token_id

    def __len__(self) -> int:
        return self.size

    def __call__(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


def test_ids_outside_the_vocabulary_are_named_with_their_documents(corpus, tmp_path):
    tokenizer, docs = corpus
    ids = token_stream(tokenizer, docs[:3])
    size = int(ids.max())  # the largest id of these documents is one past the claimed vocabulary
    first = next(int(i) for i in ids if i >= size)
    count, low = int((ids >= size).sum()), int(ids[ids >= size].min())
    with pytest.raises(ValueError, match=rf"^token id {first} outside the vocabulary of {size} \(ids 0 to "
                                         rf"{size - 1}; {count} such ids, {low} to {size}, in documents 'd000' to "
                                         r"'d002'\)$"):
        write_token_shards(ShrunkTokenizer(tokenizer, size), docs[:3], tmp_path / "shards")
    assert not (tmp_path / "shards").exists()


def test_a_failed_write_leaves_nothing(corpus, tmp_path):
    tokenizer, docs = corpus

    def broken():
        yield from docs[:600]
        raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        write_token_shards(tokenizer, broken(), tmp_path / "shards", shard_tokens=64)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="no tokens to shard into .*shards' \\(0 documents\\)"):
        write_token_shards(tokenizer, [], tmp_path / "shards")
    with pytest.raises(ValueError, match="shard_tokens must be >= 1, got 0"):
        write_token_shards(tokenizer, docs, tmp_path / "shards", shard_tokens=0)


def test_dtype_is_the_narrowest_that_holds_every_id():
    assert shard_dtype(320) == np.dtype("<u2") and shard_dtype(1 << 16) == np.dtype("<u2")
    assert shard_dtype((1 << 16) + 1) == np.dtype("<u4") and shard_dtype(128256) == np.dtype("<u4")
    with pytest.raises(ValueError, match="vocab_size must be >= 1, got 0"):
        shard_dtype(0)


def test_cli_shards_a_split(corpus, tmp_path, capsys):
    tokenizer, docs = corpus
    tokenizer.save_pretrained(tmp_path / "tok")
    write_jsonl(tmp_path / "train.jsonl", docs[:20])
    assert main(["shards", "--tokenizer", str(tmp_path / "tok"), "--split", str(tmp_path / "train.jsonl"),
                 "--shard-tokens", "64", "--out", str(tmp_path / "shards")]) == 0
    assert torch.equal(TokenShards(tmp_path / "shards").tensor(), token_stream(tokenizer, docs[:20]))
    assert main(["shards", "--tokenizer", str(tmp_path / "tok"), "--split", str(tmp_path / "nope.jsonl"),
                 "--out", str(tmp_path / "other")]) == 2
    assert "error: no split file at" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
