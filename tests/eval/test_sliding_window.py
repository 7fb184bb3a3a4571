"""Strided perplexity against an explicit loop over every target token; windows; eval mode; argument errors."""

import math

import pytest
import torch

from common.eval import perplexity, window_spans


def stream(n, vocab, seed=0):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed))


def reference_nll(model, tokens, context_start):
    """sum_t -log p(tokens[t] | tokens[context_start[t] : t]), one model call per target token."""
    total = 0.0
    with torch.no_grad():
        for t, begin in context_start.items():
            logits = model(input_ids=tokens[begin:t].unsqueeze(0)).logits[0, -1]
            total -= float(logits.double().log_softmax(-1)[tokens[t]])
    return total


def check(result, model, tokens, context_start, windows):
    nll = reference_nll(model, tokens, context_start)
    assert result["tokens"] == len(context_start)
    assert result["windows"] == windows
    assert result["nll_sum"] == pytest.approx(nll, rel=1e-6)
    assert result["mean_nll"] == pytest.approx(nll / len(context_start), rel=1e-6)
    assert result["perplexity"] == pytest.approx(math.exp(nll / len(context_start)), rel=1e-6)


def test_one_window_is_the_whole_stream(model):
    tokens = stream(40, model.config.vocab_size)
    result = perplexity(model, tokens, window=40, stride=40)
    check(result, model, tokens, {t: 0 for t in range(1, 40)}, windows=1)
    assert (result["window"], result["stride"]) == (40, 40)


def test_strided_windows_match_hand_table(model):
    # N=20, window 8, stride 4: [0,8) scores 1..7, [4,12) 8..11, [8,16) 12..15, [12,20) 16..19
    assert window_spans(20, 8, 4) == [(0, 8, 1), (4, 12, 8), (8, 16, 12), (12, 20, 16)]
    starts = {t: 0 for t in range(1, 8)} | {t: 4 for t in range(8, 12)}
    starts |= {t: 8 for t in range(12, 16)} | {t: 12 for t in range(16, 20)}
    tokens = stream(20, model.config.vocab_size, seed=1)
    check(perplexity(model, tokens, window=8, stride=4), model, tokens, starts, windows=4)


def test_stride_equal_to_window_skips_each_window_first_token(model):
    # [0,8) scores 1..7, [8,16) 9..15, [16,20) 17..19: tokens 8 and 16 have no context in their window
    assert window_spans(20, 8, 8) == [(0, 8, 1), (8, 16, 9), (16, 20, 17)]
    starts = {t: 0 for t in range(1, 8)} | {t: 8 for t in range(9, 16)} | {t: 16 for t in range(17, 20)}
    tokens = stream(20, model.config.vocab_size, seed=2)
    check(perplexity(model, tokens, window=8, stride=8), model, tokens, starts, windows=3)


def test_batch_size_does_not_change_the_result(model):
    tokens = stream(150, model.config.vocab_size, seed=3)
    one = perplexity(model, tokens, window=32, stride=12)
    three = perplexity(model, tokens, window=32, stride=12, batch_size=3)
    assert three["tokens"] == one["tokens"] == 149
    assert three["nll_sum"] == pytest.approx(one["nll_sum"], rel=1e-6)


def test_runs_in_eval_mode_without_grad_and_restores_the_mode(model):
    seen = []
    hook = model.register_forward_pre_hook(lambda m, args: seen.append((m.training, torch.is_grad_enabled())))
    model.train()
    try:
        perplexity(model, stream(20, model.config.vocab_size), window=10, stride=5)
        assert model.training
    finally:
        hook.remove()
        model.eval()
    assert seen
    assert all(state == (False, False) for state in seen)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 1, "stride": 1}, "window must be >= 2, got 1"),
        ({"window": 8, "stride": 9}, r"stride must be in \[1, window=8\], got 9"),
        ({"window": 8, "stride": 0}, "got 0"),
        ({"window": 8, "stride": 4, "batch_size": 0}, "batch_size must be >= 1, got 0"),
        ({"window": 65, "stride": 4}, "window=65 exceeds the model's context length 64"),
        ({"window": 40, "stride": 4}, "token stream of 30 tokens is shorter than window=40"),
    ],
)
def test_bad_arguments_name_the_value(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        perplexity(model, stream(30, model.config.vocab_size), **kwargs)


def test_token_ids_must_be_1d_integers(model):
    with pytest.raises(ValueError, match=r"1-D integer tensor, got torch.int64 of shape \(2, 15\)"):
        perplexity(model, stream(30, 10).reshape(2, 15), window=8, stride=4)
    with pytest.raises(ValueError, match=r"got torch\.float32"):
        perplexity(model, torch.zeros(30), window=8, stride=4)


@pytest.mark.parametrize(("window", "stride"), [(16, 5), (16, 16), (10, 7)])
def test_matches_the_hf_guide_loop(model, window, stride):
    """The loop of the HF "perplexity of fixed-length models" guide (labels = -100 outside the targets, the model's
    mean loss times the number of tokens it predicted, counted after the label shift)."""
    tokens = stream(57, model.config.vocab_size, seed=4).unsqueeze(0)
    nll_sum, n_tokens, prev_end = 0.0, 0, 0
    with torch.no_grad():
        for begin in range(0, tokens.size(1), stride):
            end = min(begin + window, tokens.size(1))
            trg_len = end - prev_end
            input_ids = tokens[:, begin:end]
            target_ids = input_ids.clone()
            target_ids[:, :-trg_len] = -100
            loss = model(input_ids, labels=target_ids).loss
            n_valid = int((target_ids[:, 1:] != -100).sum())
            nll_sum += float(loss) * n_valid
            n_tokens += n_valid
            prev_end = end
            if end == tokens.size(1):
                break
    result = perplexity(model, tokens[0], window=window, stride=stride, batch_size=2)
    assert result["tokens"] == n_tokens
    assert result["nll_sum"] == pytest.approx(nll_sum, rel=1e-5)
