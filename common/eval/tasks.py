"""Zero-shot tasks built deterministically from held-out documents, stored as inspectable JSONL.

Sentences: a sentence ends at a run of ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by
whitespace or the end of the text; it starts at the first non-space character after the previous end. Text after
the last such end is not a sentence. (Abbreviations such as "Mr." end a sentence too; no language model of
sentences is attempted.) Every passage is a substring of its document, so contexts keep the original
whitespace.

Cloze (LAMBADA style), one example per line::

    {"id", "doc_id", "context", "target"}     passage = context + target, target = " " + word

The passage is the shortest run of whole sentences ending at sentence j whose context (everything before the
last word) has at least ``context_words`` whitespace-separated words; the last word of sentence j, its
terminal punctuation removed, must be ASCII-alphabetic and preceded by a single space. The terminal punctuation
is not part of the passage, as in LAMBADA.

Choice (HellaSwag style)::

    {"id", "doc_id", "context", "choices", "gold", "choice_doc_ids"}

context = ``context_sentences`` consecutive sentences, choices[gold] = the true next sentence, the others are
sentences drawn uniformly from the sentences of OTHER documents (distinct texts, none equal to the true
ending); ``choice_doc_ids`` names the document of every choice. The scorer reads " " + choice as the
continuation (lm-eval's default target delimiter), so the files are lm-eval ``dataset_path: json`` tasks as
they are (doc_to_text: context, doc_to_choice: choices, doc_to_target: gold).

Both builders draw with ``random.Random(seed)``: the examples are a uniform sample without replacement of all
candidate (document, sentence) positions, listed in document order (examples of one document may share
sentences); then (choice) the distractors and the gold position are drawn example by example.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from typing import Any

from common.data import Document
from common.io import read_jsonl, write_jsonl

_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
_TRAILING_PUNCT = ".!?\"')]"
_WORD = re.compile(r"[A-Za-z]+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) character spans of the sentences of ``text`` (see the module docstring)."""
    spans = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        begin = start
        while begin < match.start() and text[begin].isspace():
            begin += 1
        if begin < match.start():
            spans.append((begin, match.end()))
        start = match.end()
    return spans


def _check_docs(docs: Sequence[Document]) -> None:
    seen: set[str] = set()
    for i, doc in enumerate(docs):
        if not (isinstance(doc, Document) and isinstance(doc.id, str) and isinstance(doc.text, str)):
            raise ValueError(f"document {i} is not a Document(id: str, text: str): {str(doc)[:80]!r}")
        if doc.id in seen:
            raise ValueError(f"duplicate document id {doc.id!r}")
        seen.add(doc.id)


def _check_sizes(n_examples: int, **minimum_one: int) -> None:
    if n_examples < 1:
        raise ValueError(f"n_examples must be >= 1, got {n_examples}")
    for name, value in minimum_one.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def _sample(candidates: list[Any], n_examples: int, rng: random.Random, what: str) -> list[Any]:
    if len(candidates) < n_examples:
        raise ValueError(f"n_examples={n_examples} but the documents hold only {len(candidates)} {what} candidates")
    picked = sorted(rng.sample(range(len(candidates)), n_examples))
    return [candidates[i] for i in picked]


def build_cloze_task(
    docs: Sequence[Document], n_examples: int, seed: int, context_words: int = 50
) -> list[dict[str, Any]]:
    """LAMBADA-style last-word cloze examples (see the module docstring)."""
    _check_docs(docs)
    _check_sizes(n_examples, context_words=context_words)
    candidates = []
    for doc in docs:
        text = doc.text
        spans = sentence_spans(text)
        for j, (start_j, end_j) in enumerate(spans):
            core_end = len(text[start_j:end_j].rstrip(_TRAILING_PUNCT)) + start_j
            word_start = text.rfind(" ", start_j, core_end) + 1
            if word_start == 0 or not _WORD.fullmatch(text[word_start:core_end]):
                continue
            if text[word_start - 2].isspace():
                continue  # the word must follow exactly one space
            count = len(text[start_j:word_start].split())
            i = j
            while count < context_words and i > 0:
                i -= 1
                count += len(text[spans[i][0] : spans[i][1]].split())
            if count >= context_words:
                candidates.append((doc.id, j, text[spans[i][0] : word_start - 1], " " + text[word_start:core_end]))
    chosen = _sample(candidates, n_examples, random.Random(seed), "cloze")
    return [
        {"id": f"{doc_id}/s{j}", "doc_id": doc_id, "context": context, "target": target}
        for doc_id, j, context, target in chosen
    ]


def build_choice_task(
    docs: Sequence[Document], n_examples: int, seed: int, n_choices: int = 4, context_sentences: int = 3,
    max_sentence_chars: int = 300,
) -> list[dict[str, Any]]:
    """HellaSwag-style next-sentence examples with distractors from other documents (see the module docstring).

    Endings and distractors are sentences of at most ``max_sentence_chars`` characters (tables and run-on
    "sentences" would exceed a small model's context); contexts are left-truncated by the scorer instead.
    """
    _check_docs(docs)
    _check_sizes(n_examples, context_sentences=context_sentences)
    if n_choices < 2:
        raise ValueError(f"n_choices must be >= 2, got {n_choices}")
    pool: list[tuple[int, str]] = []  # (document index, sentence) over the whole split
    candidates = []  # (document index, ending sentence index, sentence spans)
    for d, doc in enumerate(docs):
        spans = sentence_spans(doc.text)
        pool.extend((d, doc.text[s:e]) for s, e in spans if e - s <= max_sentence_chars)
        candidates.extend((d, j, spans) for j in range(context_sentences, len(spans))
                          if spans[j][1] - spans[j][0] <= max_sentence_chars)
    per_doc = [0] * len(docs)
    for d, _ in pool:
        per_doc[d] += 1

    rng = random.Random(seed)
    examples = []
    for d, j, spans in _sample(candidates, n_examples, rng, "choice"):
        text = docs[d].text
        if len(pool) - per_doc[d] < n_choices - 1:
            raise ValueError(
                f"n_choices={n_choices} needs {n_choices - 1} distractor sentences outside document "
                f"{docs[d].id!r}, the other documents hold {len(pool) - per_doc[d]}"
            )
        ending = text[spans[j][0] : spans[j][1]]
        picked: list[tuple[int, str]] = []
        for _ in range(100 * len(pool)):
            other, sentence = pool[rng.randrange(len(pool))]
            if other != d and sentence != ending and all(sentence != s for _, s in picked):
                picked.append((other, sentence))
                if len(picked) == n_choices - 1:
                    break
        else:
            raise ValueError(f"could not draw {n_choices - 1} distinct distractors for document {docs[d].id!r}")
        gold = rng.randrange(n_choices)
        picked.insert(gold, (d, ending))
        examples.append(
            {
                "id": f"{docs[d].id}/s{j}",
                "doc_id": docs[d].id,
                "context": text[spans[j - context_sentences][0] : spans[j - 1][1]],
                "choices": [sentence for _, sentence in picked],
                "gold": gold,
                "choice_doc_ids": [docs[other].id for other, _ in picked],
            }
        )
    return examples


def write_task(path: str | os.PathLike[str], examples: Sequence[dict[str, Any]]) -> None:
    """Atomically write examples as JSONL (keys sorted, UTF-8: identical examples give identical bytes)."""
    if not examples:
        raise ValueError(f"no examples to write to {path}")
    write_jsonl(path, examples)


def read_task(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSONL task written by ``write_task`` (one JSON object a line; at least one example)."""
    examples = [example for _, example in read_jsonl(path)]
    if not examples:
        raise ValueError(f"{path}: no examples")
    return examples
