"""The regime card's quantities on planted tensors and schedules, with exact expected numbers: the level spacing of
every quantizer, bin widths per row, the weighted lower median, the summed learning rate per interpolation period
(ours and the paper's schedules to their stated precision), the quantized share (tied embeddings once; `tiny_tied`,
`tiny` and LLaMA-3.2-1B from their configs), the card from a config and a state dict, the paper's values of the
config as the stated estimate gives them, and the setup facts of a checkpoint folder."""

import math

import pytest
import torch
import yaml
from transformers import LlamaConfig, LlamaForCausalLM
from winq_testing import CONFIG, save_planted_model

from common.models import get_architecture
from common.quantizers.lowbit import lowbit_selection, lowbit_spec
from common.train import TrainConfig
from papers.winq import regime as wr
from papers.winq.settings import period_lr_sums, profile_config

RAW = yaml.safe_load(CONFIG.read_text())["winq"]
# two rows: mean|W| 1.5 and 0.5, max|W| 3 and 0.5
WEIGHT = torch.tensor([[1.0, -3.0, 2.0, 0.0], [0.5, 0.5, -0.5, 0.5]])
Q_PROJ = "model.layers.0.self_attn.q_proj.weight"


def meta_parameters(config):
    """``dict(model.named_parameters())`` of a Llama model of ``config`` on the meta device (tied weights once)."""
    with torch.device("meta"):
        return dict(LlamaForCausalLM(config).named_parameters())


@pytest.mark.parametrize(("bits", "spacing"), [(1, 2.0), (1.58, 1 / 1.5), (2, 0.5), (3, 1.0), (4, 1.0)])
def test_level_spacing(bits, spacing):
    assert wr.level_spacing(bits) == spacing


def test_level_spacing_of_an_unknown_width():
    with pytest.raises(ValueError, match="unknown weight bit width 5"):
        wr.level_spacing(5)


@pytest.mark.parametrize(("bits", "widths"), [
    (1, [3.0, 1.0]),                   # 2 mean|W|
    (1.58, [3 / 1.5, 0.5 / 1.5]),      # max|W| / 1.5
    (2, [1.5, 0.25]),                  # max|W| / 2
    (3, [1.0, 0.5 / 3]),               # max|W| / 3
    (4, [3 / 7, 0.5 / 7]),             # max|W| / 7
])
def test_row_bin_widths(bits, widths):
    rows = wr.row_bin_widths(WEIGHT, bits)
    assert rows.dtype == torch.float64
    assert rows.tolist() == pytest.approx(widths, rel=1e-15)


def test_row_bin_widths_clamp_a_zero_row_and_need_a_matrix():
    assert wr.row_bin_widths(torch.zeros(1, 4), 2).tolist() == [0.5 * 1e-5]  # alpha clamped at 1e-5, as the forward
    with pytest.raises(ValueError, match=r"2-D \(out x in\), got shape \(4,\)"):
        wr.row_bin_widths(torch.ones(4), 1)


def test_weighted_lower_median():
    values, counts = torch.tensor([3.0, 1.0, 8.0]), torch.tensor([4, 4, 10])
    assert wr.weighted_lower_median(values, counts) == 8.0  # 18 values: rank 8 is the first 8
    assert wr.weighted_lower_median(values, torch.tensor([4, 4, 8])) == 3.0  # 16: rank 7, the last 3
    assert wr.weighted_lower_median(torch.tensor([2.0, 1.0]), torch.tensor([1, 1])) == 1.0  # the lower of two
    generator = torch.Generator().manual_seed(0)
    values, counts = torch.rand(50, generator=generator), torch.randint(1, 9, (50,), generator=generator)
    assert wr.weighted_lower_median(values, counts) == float(torch.repeat_interleave(values, counts).median())
    with pytest.raises(ValueError, match="a median needs values with positive counts, got 0 values"):
        wr.weighted_lower_median(torch.tensor([]), torch.tensor([], dtype=torch.int64))


def test_median_bin_width_counts_every_weight():
    wide = torch.full((1, 10), 4.0)  # one row of 10 weights of 1-bit width 8
    assert wr.median_bin_width([WEIGHT, wide], 1) == 8.0  # 4 x 1.0, 4 x 3.0, 10 x 8.0: not the rows' median 3
    assert wr.median_bin_width([WEIGHT], 1) == 1.0
    with pytest.raises(ValueError, match="no quantized weight"):
        wr.median_bin_width([], 1)


def test_period_lr_sums_on_a_planted_schedule():
    train = TrainConfig(max_steps=4, lr=1.0, warmup_steps=2, min_lr_ratio=0.0)  # lr_t: 0.5, 1, 1, 0
    assert period_lr_sums(train, 2) == [1.5, 1.0]
    assert period_lr_sums(train, 3) == [2.5]  # the tail after the last interpolation is no period
    assert period_lr_sums(train, 1) == [0.5, 1.0, 1.0, 0.0]
    for every in (0, 5, True, 2.0):
        with pytest.raises(ValueError, match=r"integer in \[1, max_steps = 4\]"):
            period_lr_sums(train, every)


def test_period_lr_sums_of_ours_and_the_papers():
    ours = TrainConfig(max_steps=640, lr=3e-5, warmup_steps=32, min_lr_ratio=0.0)  # the default profile's 1-2 bits
    assert [round(s, 4) for s in period_lr_sums(ours, 160)] == [0.0042, 0.0035, 0.0016, 0.0003]
    paper = profile_config(RAW, "paper")
    train, every = wr.bit_schedule(paper, 1)
    assert (train.lr, train.max_steps, train.warmup_steps, every) == (2e-5, 240_000, 1000, 60_000)
    assert [round(s, 2) for s in period_lr_sums(train, every)] == [1.13, 0.83, 0.38, 0.06]
    train, every = wr.bit_schedule(paper, 3)
    assert (train.lr, train.max_steps, every) == (1e-5, 80_000, 40_000)
    assert [round(s, 4) for s in period_lr_sums(train, every)] == [0.3257, 0.0743]


def test_quantized_share_of_a_planted_state_dict():
    parameters = {Q_PROJ: torch.zeros(2, 3), "model.layers.0.mlp.down_proj.weight": torch.zeros(3, 2),
                  "model.layers.0.mlp.down_proj.bias": torch.zeros(3), "model.embed_tokens.weight": torch.zeros(10, 2),
                  "model.layers.0.self_attn.q_proj_extra.weight": torch.zeros(2, 2),
                  "model.norm.weight": torch.zeros(2)}
    assert list(wr.quantized_weights(parameters)) == [Q_PROJ, "model.layers.0.mlp.down_proj.weight"]
    assert wr.quantized_share(parameters) == (12 / 41, 12, 41)
    with pytest.raises(ValueError, match="no quantized linear"):
        wr.quantized_share({"model.embed_tokens.weight": torch.zeros(10, 2)})


def test_the_state_dict_selection_is_the_quantizers():
    config = get_architecture("tiny_tied").config(8192)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    assert list(wr.quantized_weights(dict(model.named_parameters()))) == [f"{n}.weight"
                                                                          for n in lowbit_selection(model)]


def test_tiny_tied_is_mostly_quantized():
    """4 blocks of q, o 128 x 128, k, v 64 x 128, gate, up 1024 x 128, down 128 x 1024; the tied 8192 x 128 embedding
    once; 9 norms of 128."""
    blocks = 4 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 1024 * 128)
    total = blocks + 8192 * 128 + 9 * 128
    share, quantized, parameters = wr.quantized_share(meta_parameters(get_architecture("tiny_tied").config(8192)))
    assert (quantized, parameters) == (blocks, total) == (1_769_472, 2_819_200)
    assert share == blocks / total
    assert share >= RAW["regime"]["quantized_share"]["bounds"][0]
    untied = wr.quantized_share(meta_parameters(get_architecture("tiny").config(8192)))  # the earlier base
    assert untied == (983_040 / 3_081_344, 983_040, 3_081_344)
    assert untied[0] < RAW["regime"]["quantized_share"]["bounds"][0]


def test_the_papers_quantized_share_from_its_architecture():
    llama = LlamaConfig(vocab_size=128_256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                        num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True)
    share, quantized, total = wr.quantized_share(meta_parameters(llama))
    assert (quantized, total) == (973_078_528, 1_235_814_400)
    assert RAW["regime"]["quantized_share"]["paper"] == round(share, 3)


# the estimate the config states for LLaMA-3.2-1B: mean|W| and row max|W| ranges
MEAN_ABS, ROW_MAX = (0.01, 0.04), (0.06, 0.4)


def test_the_papers_values_follow_from_the_stated_estimate():
    """Each paper range of the card is the paper's schedule over the bin widths of the stated estimate (alpha:
    mean|W| at 1 bit, row max|W| / (1 or 2^(b-1) - 1) else), to the 3 significant digits written."""
    low = (TrainConfig(max_steps=240_000, lr=2e-5, warmup_steps=1000, min_lr_ratio=0.0), 60_000)
    high = (TrainConfig(max_steps=80_000, lr=1e-5, warmup_steps=1000, min_lr_ratio=0.0), 40_000)
    for suffix, bits in wr.CARD_BITS.items():
        spec = lowbit_spec(bits)
        alpha = MEAN_ABS if spec.family == "binary" else tuple(m / spec.grad_qp for m in ROW_MAX)
        narrow, wide = (wr.level_spacing(bits) * a for a in alpha)
        train, every = low if bits <= 2 else high
        summed = period_lr_sums(train, every)[0]
        for kind, value in (("travel", summed), ("step", train.lr)):
            expected = [float(f"{value / wide:.3g}"), float(f"{value / narrow:.3g}")]
            assert RAW["regime"][f"{kind}_{suffix}"]["paper"] == expected, f"{kind}_{suffix}"


PLANTED_CONFIG = {"learning_rates": {"low_bit": 1.0, "a8": 2.0, "high_bit": 0.5},
                  "train": {"max_steps": 4, "seq_len": 2, "micro_batch_size": 1, "warmup_steps": 2,
                            "min_lr_ratio": 0.0},
                  "interpolation": {"strength": 0.8, "fraction": {"low_bit": 0.5, "a8": 0.5, "high_bit": 0.75}},
                  "train_steps": {}}
# 1-2 bits: lr 1, K = 2: 0.5 + 1 = 1.5 over the first period; 3-4 bits: lr 0.5, K = 3: 0.25 + 0.5 + 0.5 = 1.25.
# WEIGHT's 8 weights: the lower median is the narrower row's width (1, 1/3, 1/4, 1/6, 1/14)
EXPECTED = {"travel_w1": 1.5, "travel_w1_58": 4.5, "travel_w2": 6.0, "travel_w3": 7.5, "travel_w4": 17.5,
            "step_w1": 1.0, "step_w1_58": 3.0, "step_w2": 4.0, "step_w3": 3.0, "step_w4": 7.0, "quantized_share": 0.5}


def test_regime_values_on_a_planted_model_and_schedule():
    parameters = {Q_PROJ: WEIGHT, "model.embed_tokens.weight": torch.ones(2, 4)}
    measured, notes = wr.regime_values(PLANTED_CONFIG, parameters)
    assert list(measured) == wr.card_ids()  # no premise row in this config, so none measured
    assert measured == pytest.approx(EXPECTED, rel=1e-12)
    with_card = {**PLANTED_CONFIG, "regime": RAW["regime"]}
    measured, notes = wr.regime_values(with_card, parameters)  # the card's premise rows: no summary, not measured
    assert list(measured) == list(RAW["regime"]) == [*wr.card_ids(), "stall_w1", "stall_w2", "stall_w3"]
    assert [measured[f"stall_{s}"] for s in ("w1", "w2", "w3")] == [None] * 3
    assert notes["stall_w2"] == "measured on a build's baselines"
    assert notes["travel_w2"] == ("lr 1 summed over the first K = 2 of 4 steps (warmup 2, cosine to 0 lr): 1.5; "
                                  "median 2-bit bin width 0.25")
    assert notes["step_w4"] == "lr 0.5 / median 4-bit bin width 0.0714"
    assert notes["quantized_share"] == ("8 of 16 parameters in 1 quantized linear; the rest (embeddings, norms) in "
                                        "full precision")


def test_the_card_of_a_planted_model():
    config = {**PLANTED_CONFIG, "regime": RAW["regime"]}
    rows = wr.regime_card(config, {Q_PROJ: WEIGHT, "model.embed_tokens.weight": torch.ones(2, 4)})
    assert [r.spec.id for r in rows] == list(RAW["regime"])
    assert {r.spec.id: r.ours for r in rows if not r.spec.id.startswith("stall_")} == pytest.approx(EXPECTED,
                                                                                                     rel=1e-12)
    # travel 1.5-17.5 bins: inside [1, inf); one step 1-7 bins: outside <= 0.04; the share 0.5 < 0.6; no premise
    assert [r.spec.id for r in rows if r.inside] == [f"travel_{s}" for s in wr.CARD_BITS]
    fewer = {**config, "regime": {k: v for k, v in RAW["regime"].items() if k != "step_w4"}}
    with pytest.raises(ValueError, match=r"missing nothing, unknown \['step_w4'\]"):
        wr.regime_card(fewer, {Q_PROJ: WEIGHT})


def test_the_base_model_is_read_with_its_tied_embedding_once(tmp_path):
    save_planted_model(tmp_path / "planted")
    from common.models import load_causal_lm

    parameters = dict(load_causal_lm(tmp_path / "planted").named_parameters())
    blocks = 2 * (2 * 16 * 16 + 2 * 8 * 16 + 3 * 32 * 16)  # 4608
    assert wr.quantized_share(parameters) == (blocks / (blocks + 40 * 16 + 5 * 16), blocks, 5328)


def test_model_facts_from_the_config_alone(tmp_path):
    folder = tmp_path / "tiny_tied"
    get_architecture("tiny_tied").config(8192).save_pretrained(folder)  # config.json only: no weights
    facts = wr.model_facts(folder)
    assert facts == {"name": "tiny_tied", "parameters": 2_819_200, "quantized": 1_769_472,
                     "share": 1_769_472 / 2_819_200, "layers": 28, "blocks": 4, "hidden": 128, "vocabulary": 8192,
                     "tied": True}
    assert math.isclose(facts["share"], 0.6277, abs_tol=5e-5)
