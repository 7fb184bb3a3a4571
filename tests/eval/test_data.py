"""Reading a split and building its evaluation token stream."""

import json

import pytest
import torch

from common.eval import read_split, token_stream


def test_read_split_round_trip(tmp_path, docs):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in docs[:3]) + "\n")
    assert read_split(path) == docs[:3]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "a", "text": "x"}\n{"id": "a"\n', r"s.jsonl:2: not valid JSON"),
        ('{"id": "a", "text": 3}\n', r's.jsonl:1: expected \{"id": str, "text": str\}'),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "s.jsonl:2: duplicate document id 'a'"),
        ("\n", "s.jsonl: no documents"),
    ],
)
def test_read_split_names_the_bad_line(tmp_path, content, message):
    (tmp_path / "s.jsonl").write_text(content)
    with pytest.raises(ValueError, match=message):
        read_split(tmp_path / "s.jsonl")


def test_token_stream_is_documents_then_eos(tokenizer, docs):
    ids = token_stream(tokenizer, docs[:3])
    expected = []
    for doc in docs[:3]:
        expected += tokenizer(doc["text"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert ids.dtype == torch.long
    assert ids.tolist() == expected
