"""Zero-shot scoring: lm-eval tokenization, forced preferences through a model whose logits we set, log-likelihoods
against the full model by hand (with left truncation), argument errors."""

import math
from types import SimpleNamespace

import pytest
import torch

from common.eval import encode_pair, loglikelihoods, score_choice, score_cloze


class FixedLogits(torch.nn.Module):
    """The same logits at every position: log p(token | anything) = log_softmax(logits)[token]."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(logits)

    def forward(self, input_ids, **kwargs):
        return SimpleNamespace(logits=self.logits.expand(*input_ids.shape, -1))


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_encode_pair_splits_the_whole_encoding(tokenizer):
    for context, continuation in [("the cold", " river"), ("Reads walks over old", " red"), ("x", "ééé stone")]:
        ctx, cont = encode_pair(tokenizer, context, continuation)
        assert ctx == ids(tokenizer, context)
        assert cont == ids(tokenizer, context + continuation)[len(ctx) :]
    # trailing whitespace of the context moves to the continuation
    assert encode_pair(tokenizer, "the cold ", "river") == encode_pair(tokenizer, "the cold", " river")
    with pytest.raises(ValueError, match="empty context for continuation ' river'"):
        encode_pair(tokenizer, "", " river")


def test_cloze_forced_preference(tokenizer):
    river, stone = ids(tokenizer, " river"), ids(tokenizer, " stone")
    assert len(river) == len(stone) == 1
    logits = torch.zeros(len(tokenizer))
    logits[river[0]] = 6.0  # " river" is the argmax everywhere, " stone" is not
    lp = logits.double().log_softmax(-1)
    examples = [
        {"id": "r", "context": "the cold", "target": " river"},
        {"id": "s", "context": "a red", "target": " stone"},
    ]
    result = score_cloze(FixedLogits(logits), tokenizer, examples, max_length=64)
    expected_ll = float(lp[river[0]] + lp[stone[0]])
    assert (result["examples"], result["correct"], result["acc"], result["target_tokens"]) == (2, 1, 0.5, 2)
    assert result["loglikelihood_sum"] == pytest.approx(expected_ll, rel=1e-6)
    assert result["perplexity"] == pytest.approx(math.exp(-expected_ll / 2), rel=1e-6)
    assert result["token_perplexity"] == pytest.approx(math.exp(-expected_ll / 2), rel=1e-6)


def test_choice_acc_acc_norm_acc_bytes_forced(tokenizer):
    # choice 0 "é" (1 character, 2 bytes, 3 tokens) made likely; choice 1 "river" (5 characters and bytes, 1 token)
    e_accent, river = encode_pair(tokenizer, "the cold", " é")[1], encode_pair(tokenizer, "the cold", " river")[1]
    logits = torch.zeros(len(tokenizer))
    logits[e_accent] = 8.0
    lp = logits.double().log_softmax(-1)
    ll_e, ll_river = float(lp[e_accent].sum()), float(lp[river].sum())
    # by hand: the sum prefers "é", per character "river", per byte "é"
    assert ll_e > ll_river
    assert ll_e / 1 < ll_river / 5
    assert ll_e / 2 > ll_river / 5
    example = {"id": "x", "context": "the cold", "choices": ["é", "river"], "gold": 0}
    result = score_choice(FixedLogits(logits), tokenizer, [example], max_length=64)
    assert (result["acc"], result["acc_norm"], result["acc_bytes"]) == (1.0, 0.0, 1.0)
    assert (result["examples"], result["requests"], result["chance"]) == (1, 2, 0.5)
    result = score_choice(FixedLogits(logits), tokenizer, [{**example, "gold": 1}], max_length=64)
    assert (result["correct"], result["correct_norm"], result["correct_bytes"]) == (0, 1, 0)


def test_uniform_logits_tie_goes_to_the_first_choice(tokenizer):
    example = {"context": "the cold", "choices": ["river", "stone", "green"], "gold": 0}
    model = FixedLogits(torch.zeros(len(tokenizer)))
    assert score_choice(model, tokenizer, [example], max_length=64)["acc"] == 1.0
    assert score_choice(model, tokenizer, [{**example, "gold": 2}], max_length=64)["acc"] == 0.0


def test_loglikelihoods_match_the_model_by_hand_with_left_truncation(model, tokenizer, docs):
    long_context = docs[0].text  # far longer than the 64-token context
    requests = [("the cold", " river stone"), (long_context, " green light")]
    results, truncated = loglikelihoods(model, tokenizer, requests, batch_size=2)
    assert truncated == 1
    for (context, continuation), (ll, greedy, n) in zip(requests, results, strict=True):
        ctx, cont = encode_pair(tokenizer, context, continuation)
        inp = (ctx + cont)[-65:]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([inp[:-1]])).logits[0, -len(cont) :].double()
        assert n == len(cont)
        assert ll == pytest.approx(float(logits.log_softmax(-1)[range(len(cont)), cont].sum()), rel=1e-6)
        assert greedy == (logits.argmax(-1).tolist() == cont)


def test_scores_do_not_depend_on_batch_size(model, tokenizer, docs):
    from common.eval import build_choice_task

    examples = build_choice_task(docs, 6, seed=0)
    one, four = score_choice(model, tokenizer, examples), score_choice(model, tokenizer, examples, batch_size=4)
    assert {k: v for k, v in one.items() if k != "wall_time_s"} == {k: v for k, v in four.items() if k != "wall_time_s"}


@pytest.mark.parametrize(
    ("example", "message"),
    [
        ({"id": "e1", "context": "a", "choices": ["b"], "gold": 0}, "'e1' needs >= 2 non-empty string choices"),
        ({"id": "e2", "context": "a", "choices": ["b", "c"], "gold": 2}, "'e2': gold=2 is not an index into 2"),
        ({"id": "e3", "context": "a", "choices": ["b", ""], "gold": 0}, "'e3' needs >= 2 non-empty"),
        ({"id": "e4", "context": "a", "gold": 0}, "choice example 0 needs a string 'context' and a list 'choices'"),
    ],
)
def test_bad_choice_examples_name_the_example(tokenizer, example, message):
    with pytest.raises(ValueError, match=message):
        score_choice(FixedLogits(torch.zeros(len(tokenizer))), tokenizer, [example], max_length=64)


def test_bad_cloze_input(tokenizer, model):
    fixed = FixedLogits(torch.zeros(len(tokenizer)))
    with pytest.raises(ValueError, match="cloze example 0 needs string 'context' and 'target'"):
        score_cloze(fixed, tokenizer, [{"context": "a"}], max_length=64)
    with pytest.raises(ValueError, match="cloze example 'z' has an empty target ' '"):
        score_cloze(fixed, tokenizer, [{"id": "z", "context": "a", "target": " "}], max_length=64)
    with pytest.raises(ValueError, match="no cloze examples"):
        score_cloze(model, tokenizer, [])
    with pytest.raises(ValueError, match="FixedLogits has no context length in its config; pass max_length"):
        score_cloze(fixed, tokenizer, [{"context": "a", "target": " b"}])
    with pytest.raises(ValueError, match="has 3 tokens > max_length=2"):
        score_cloze(fixed, tokenizer, [{"context": "a", "target": " river stone green"}], max_length=2)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        score_cloze(model, tokenizer, [{"context": "a", "target": " b"}], batch_size=0)
