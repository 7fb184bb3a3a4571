"""Task building: sentence spans, hand-made cloze passages, seeded determinism, distractors from other documents,
JSONL round trips and argument errors."""

import re

import pytest

from common.data import Document
from common.eval import build_choice_task, build_cloze_task, read_task, sentence_spans, write_task


def test_sentence_spans():
    text = 'He said "Go!" Then he left.  It was 3.5 m. away\nEnd'
    assert [text[s:e] for s, e in sentence_spans(text)] == ['He said "Go!"', "Then he left.", "It was 3.5 m."]


def test_cloze_hand_made_passages():
    docs = [Document("a", "One two three. Four five six seven. Eight nine ten.")]
    # sentence 0 has 2 context words and nothing before it: no example; 1 and 2 reach 4 words with one more sentence
    assert build_cloze_task(docs, 2, seed=0, context_words=4) == [
        {"id": "a/s1", "doc_id": "a", "context": "One two three. Four five six", "target": " seven"},
        {"id": "a/s2", "doc_id": "a", "context": "Four five six seven. Eight nine", "target": " ten"},
    ]


@pytest.mark.parametrize("last", ["it costs 35.", "in the U.S.", "see  twice.", "a well-known.", "line\nbreak."])
def test_cloze_rejects_non_alphabetic_or_badly_spaced_last_words(last):
    docs = [Document("a", f"One two three four 5. Then {last}")]  # sentence 0 ends in a number
    with pytest.raises(ValueError, match="hold only 0 cloze candidates"):
        build_cloze_task(docs, 1, seed=0, context_words=2)
    docs = [Document("a", f"One two three four 5. Then {last} Here it ends!")]
    assert build_cloze_task(docs, 1, seed=0, context_words=2)[0]["target"] == " ends"


def test_cloze_examples_are_passages_of_their_documents(docs):
    examples = build_cloze_task(docs, 30, seed=0, context_words=20)
    texts = {doc.id: doc.text for doc in docs}
    assert len({ex["id"] for ex in examples}) == 30
    for ex in examples:
        assert re.fullmatch(r" [A-Za-z]+", ex["target"])
        assert ex["context"] + ex["target"] in texts[ex["doc_id"]]
        assert len(ex["context"].split()) >= 20


@pytest.mark.parametrize("build", [build_cloze_task, build_choice_task])
def test_building_is_deterministic_per_seed(docs, build):
    kwargs = {"context_words": 20} if build is build_cloze_task else {}
    first = build(docs, 20, 7, **kwargs)
    assert build(docs, 20, 7, **kwargs) == first
    assert build(docs, 20, 8, **kwargs) != first


def test_choice_distractors_come_from_other_documents(docs):
    examples = build_choice_task(docs, 40, seed=0, n_choices=4, context_sentences=3)
    texts = {doc.id: doc.text for doc in docs}
    for ex in examples:
        gold = ex["gold"]
        assert len(ex["choices"]) == len(set(ex["choices"])) == 4
        assert ex["choice_doc_ids"][gold] == ex["doc_id"]
        assert ex["context"] + " " + ex["choices"][gold] in texts[ex["doc_id"]]
        assert len(sentence_spans(ex["context"])) == 3
        for i, (choice, doc_id) in enumerate(zip(ex["choices"], ex["choice_doc_ids"], strict=True)):
            assert choice in texts[doc_id]
            assert (doc_id == ex["doc_id"]) == (i == gold)
    assert len({ex["gold"] for ex in examples}) == 4  # the gold position is shuffled


def test_write_read_round_trip_is_byte_stable(tmp_path, docs):
    examples = build_choice_task(docs, 5, seed=0)
    write_task(tmp_path / "a.jsonl", examples)
    write_task(tmp_path / "b.jsonl", read_task(tmp_path / "a.jsonl"))
    assert read_task(tmp_path / "a.jsonl") == examples
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 5


def test_read_task_names_the_bad_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"context": "a", "target": " b"}\n{oops\n')
    with pytest.raises(ValueError, match=r"t.jsonl:2: not valid JSON"):
        read_task(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=r"t.jsonl:1: expected a JSON object, got list"):
        read_task(path)
    path.write_text("\n")
    with pytest.raises(ValueError, match="no examples"):
        read_task(path)


def test_bad_arguments_name_the_value(docs):
    with pytest.raises(ValueError, match="n_examples must be >= 1, got 0"):
        build_cloze_task(docs, 0, seed=0)
    with pytest.raises(ValueError, match="context_words must be >= 1, got 0"):
        build_cloze_task(docs, 1, seed=0, context_words=0)
    with pytest.raises(ValueError, match="n_examples=100000 but the documents hold only"):
        build_choice_task(docs, 100000, seed=0)
    with pytest.raises(ValueError, match="n_choices must be >= 2, got 1"):
        build_choice_task(docs, 1, seed=0, n_choices=1)
    with pytest.raises(ValueError, match="context_sentences must be >= 1, got 0"):
        build_choice_task(docs, 1, seed=0, context_sentences=0)
    with pytest.raises(ValueError, match="duplicate document id 'doc-00'"):
        build_choice_task([*docs, docs[0]], 1, seed=0)
    with pytest.raises(ValueError, match="document 1 is not"):
        build_cloze_task([docs[0], {"id": "b", "text": "x"}], 1, seed=0)


def test_choice_needs_sentences_outside_the_document(docs):
    with pytest.raises(ValueError, match="the other documents hold 0"):
        build_choice_task(docs[:1], 1, seed=0)
