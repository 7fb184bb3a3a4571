"""The regime card: each quantity on planted configs and records (exact), the paper's values against the sources the
config states, the card of the planted study, and a claim that requires a quantity made not testable exactly when
the quantity is outside its bounds, below and above, its estimate kept."""

import copy
import dataclasses

import pytest
from mw_testing import PAPER_LIKE, build_study, raw_config, study_artifacts

from common.report import claim_specs, claims_document
from common.uncertainty import Evidence
from papers.maxwindow_hif8.claims import Artifact, claim_rows
from papers.maxwindow_hif8.regime import (
    entries_per_step,
    lr_ratio,
    quantized_share,
    regime_card,
    regime_values,
    warmup_share,
    window_steps,
)
from papers.maxwindow_hif8.settings import profile_config

SPECS = claim_specs(raw_config()["claims"])
SETTINGS = Evidence(0.95, 1000, 0)
IDS = ["lr_ratio", "warmup_share", "window_steps", "quantized_share"]


def planted(**changes):
    """A config of the regime's keys: rates 2^-10 / 2^-13, warmup 4 of 16 steps, 8 micro-batches a step, one history
    entry per call, max_window of 64; ``changes`` replace top-level keys."""
    return {"learning_rates": {"high": 2**-10, "low": 2**-13}, "bf16_warmup_steps": 4,
            "train": {"max_steps": 16, "grad_accum": 8}, "history_unit": "call",
            "observer_options": {"max_window": {"window": 64}}, **changes}


# --- each quantity --------------------------------------------------------------------------------------------


def test_the_ratio_and_the_warmup_share():
    assert lr_ratio(planted()) == 8.0
    assert warmup_share(planted()) == 0.25


@pytest.mark.parametrize(("unit", "train", "options", "per_step", "steps"), [
    ("call", {"grad_accum": 8}, {"max_window": {"window": 64}}, 8, 8.0),   # the paper's: 64 calls, 8 a step
    ("call", {"grad_accum": 2}, {"max_window": {"window": 64}}, 2, 32.0),  # the smoke profile's
    ("call", {}, {"max_window": {"window": 64}}, 1, 64.0),                  # grad_accum defaults to 1
    ("call", {"grad_accum": 8}, {}, 8, 8.0),                                # the observer's default window, 64
    ("call", {"grad_accum": 128}, {"max_window": {"window": 64}}, 128, 0.5),
    ("step", {"grad_accum": 8}, {"max_window": {"window": 64}}, 1, 64.0),  # one entry a step, whatever grad_accum
    ("step", {"grad_accum": 8}, {"max_window": {"window": 16}}, 1, 16.0),
])
def test_the_window_in_optimizer_steps(unit, train, options, per_step, steps):
    config = planted(history_unit=unit, train={"max_steps": 16, **train}, observer_options=options)
    assert entries_per_step(config) == per_step
    assert window_steps(config) == steps


LAYERS = ["model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj", "model.layers.2.mlp.down_proj"]
SHAPES = {"weights": {LAYERS[0]: {"shape": [8, 4]}, LAYERS[1]: {"shape": [8, 4]}, LAYERS[2]: {"shape": [4, 8]},
                      "model.layers.0.self_attn.q_proj": {"shape": [4, 4]}}, "tied": {}}


def test_the_quantized_share_counts_the_qat_layers_only():
    share, how = quantized_share(LAYERS, SHAPES, 384)
    assert share == 0.25  # 3 x 32 of 384; the record's fourth weight is no QAT layer
    assert how == ("3 linears (gate_proj, up_proj, down_proj) in blocks 1–2 hold 96 of the model's 384 parameters; "
                   "no tied weights")
    tied = {**SHAPES, "tied": {"lm_head.weight": "model.embed_tokens.weight"}}
    assert quantized_share(LAYERS[:1], tied, 64)[1] == ("1 linear (gate_proj) in block 1 holds 32 of the model's "
                                                         "64 parameters; tied weights counted once")
    apart = ["model.layers.1.mlp.up_proj", "model.layers.3.mlp.up_proj"]
    assert "in blocks 1, 3 hold" in quantized_share(apart, {"weights": {k: {"shape": [2, 2]} for k in apart}},
                                                     16)[1]
    assert quantized_share(["l0"], {"weights": {"l0": {"shape": [2, 3]}}}, 12) == (
        0.5, "1 linear (l0) holds 6 of the model's 12 parameters; no tied weights")  # no block index: none named


def test_the_quantized_share_names_what_it_lacks():
    with pytest.raises(ValueError, match=r"no weight shape of the QAT layers \['model.layers.9.mlp.up_proj'\]"):
        quantized_share([*LAYERS, "model.layers.9.mlp.up_proj"], SHAPES, 384)
    with pytest.raises(ValueError, match=r"QAT layers none \(it records no weight\)"):
        quantized_share([], {}, 384)
    with pytest.raises(ValueError, match=r"parameter count must be a positive integer, got None"):
        quantized_share(LAYERS, SHAPES, None)


# --- the paper's values and the profiles ----------------------------------------------------------------------


def test_the_papers_values_follow_from_the_sources_the_config_states():
    regime = raw_config()["regime"]
    assert regime["lr_ratio"]["paper"] == pytest.approx(1e-4 / 1e-5)
    assert regime["warmup_share"]["paper"] == 500 / 10_000
    assert regime["window_steps"]["paper"] == 64 / (1024 // (16 * 8))
    # OpenPangu-Embedded-1B: 26 blocks, hidden 1536, MLP 6144, 12 heads of 128 and 6 KV heads, q/k/v/o biases,
    # vocabulary 153,376, tied embeddings; MLP gate/up/down of 21 blocks quantized
    hidden, mlp, heads, kv, head, vocab = 1536, 6144, 12, 6, 128, 153_376
    attention = 2 * hidden * heads * head + 2 * hidden * kv * head + 2 * heads * head + 2 * kv * head
    block = attention + 3 * hidden * mlp + 2 * hidden
    total = 26 * block + vocab * hidden + hidden
    assert (total, 21 * 3 * hidden * mlp) == (1_155_912_192, 594_542_592)
    assert regime["quantized_share"]["paper"] == round(21 * 3 * hidden * mlp / total, 4)
    assert round(21 * 3 * hidden * mlp / (total + vocab * hidden), 3) == 0.427  # untied, as the source states
    assert regime["quantized_share"]["bounds"][0] == round(regime["quantized_share"]["paper"] / 2, 3)


@pytest.mark.parametrize(("profile", "values"), [
    ("paper", {"lr_ratio": 10.0, "warmup_share": 0.05, "window_steps": 8.0}),
    ("default", {"lr_ratio": 10.0, "warmup_share": 0.25, "window_steps": 8.0}),
    ("smoke", {"lr_ratio": 10.0, "warmup_share": 1 / 3, "window_steps": 32.0}),
])
def test_the_profiles_regime(profile, values):
    config = profile_config(raw_config(), profile)
    assert {"lr_ratio": lr_ratio(config), "warmup_share": warmup_share(config),
            "window_steps": window_steps(config)} == pytest.approx(values, rel=1e-12)


# --- the card of a study --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """The paper-like study of the smoke profile with every observer, seeds 0 and 1."""
    return study_artifacts(build_study(tmp_path_factory.mktemp("paper"), **PAPER_LIKE))


def test_regime_values_of_the_planted_study(paper):
    measured, notes = regime_values(paper)
    assert measured == pytest.approx({"lr_ratio": 10.0, "warmup_share": 4 / 12, "window_steps": 32.0,
                                      "quantized_share": 0.5}, rel=1e-12)
    assert notes == {"lr_ratio": "0.00015 / 1.5e-05", "warmup_share": "4 of 12 steps",
                     "window_steps": "64 entries, 2 per optimizer step (one per call, grad_accum 2)",
                     "quantized_share": "6 linears (l0, l1, l2, l3, l4, l5) hold 768 of the model's 1,536 "
                                        "parameters; no tied weights (max_window-lrlow-w4, seed 0)"}
    rows = regime_card(paper)
    assert [row.spec.id for row in rows] == IDS
    assert all(row.inside for row in rows)
    assert rows[3].ratio_text() == f"{0.5 / 0.5143:.3g}"


def test_regime_values_name_a_missing_config_key(paper):
    config = {k: v for k, v in paper.config.items() if k != "history_unit"}
    with pytest.raises(ValueError, match=r"needs the config keys \['history_unit'\] \(pass them to the claims step\)"):
        regime_values(dataclasses.replace(paper, config=config))


# --- a claim that requires a quantity ---------------------------------------------------------------------------


def test_which_claims_require_which_quantity():
    recipe = ["quantized_share", "warmup_share"]
    assert {cid: sorted(spec.requires) for cid, spec in SPECS.items() if spec.requires} == {
        "saturating_loss_ape": ["quantized_share"],
        **{f"max_window_saturates_less_{role}": ["window_steps"] for role in ("input", "weight", "grad_output")},
        **{cid: recipe for cid in SPECS if cid.startswith("recipe_") and not cid.startswith("recipe_saturates")},
        "recipe_saturates_rarely_input": ["window_steps"],  # the weight drift's row requires none
        **{cid: ["lr_ratio"] for cid in SPECS if cid.startswith("forgets_")}, "forgetting_hidden_in_loss": ["lr_ratio"],
        "ablation_high_lr": ["lr_ratio"], "ablation_most_recent": ["window_steps"],
        "ablation_no_warmup": ["warmup_share"], "exp_smooth_saturates": ["window_steps"]}
    assert {q for spec in SPECS.values() for q in spec.requires} == set(IDS) == set(raw_config()["regime"])



def with_parameters(study, parameters):
    """``study`` with the recipe's BF16 record of seed 0 counting ``parameters`` parameters."""
    key = "bf16/max_window-lrlow-w4/seed0/pretrain"
    record = copy.deepcopy(study.evaluations[key].data)
    record["model"]["parameters"] = parameters
    return dataclasses.replace(study, evaluations={**study.evaluations, key: Artifact("planted", record)})


def with_config(study, **changes):
    return dataclasses.replace(study, config={**study.config, **changes})


CASES = {  # quantity: (the claim that requires it, another that does not, [(change, ours, inside)])
    "lr_ratio": ("forgets_bf16", "cts_hurts", [
        (lambda s: with_config(s, learning_rates={"high": 3.0, "low": 1.0}), 3.0, False),
        (lambda s: with_config(s, learning_rates={"high": 3.16, "low": 1.0}), 3.16, True),  # the bound
        (lambda s: s, 10.0, True),
        (lambda s: with_config(s, learning_rates={"high": 40.0, "low": 1.0}), 40.0, False)]),
    "window_steps": ("max_window_saturates_less_input", "most_recent_saturates", [
        (lambda s: with_config(s, train={**s.config["train"], "grad_accum": 128}), 0.5, False),
        (lambda s: s, 32.0, True),
        (lambda s: with_config(s, history_unit="step"), 64.0, True),  # the bound
        (lambda s: with_config(s, history_unit="step", observer_options={"max_window": {"window": 128}}), 128.0,
         False)]),
    "warmup_share": ("ablation_no_warmup", "ablation_high_lr", [
        (lambda s: with_config(s, train={**s.config["train"], "max_steps": 200}), 0.02, False),
        (lambda s: s, 4 / 12, True),
        (lambda s: with_config(s, train={**s.config["train"], "max_steps": 6}), 4 / 6, False)]),
    "quantized_share": ("recipe_pretrain_perplexity", "forgets_bf16", [
        (lambda s: with_parameters(s, 4096), 768 / 4096, False),
        (lambda s: s, 0.5, True),
        (lambda s: with_parameters(s, 768), 1.0, True),  # the bound: every parameter quantized
        (lambda s: with_parameters(s, 512), 1.5, False)]),
}


@pytest.fixture(scope="module")
def rows(paper):
    """Each claim's row computed once (the regime card does not change an estimate)."""
    rows = claim_rows(paper.config)
    ids = {cid for required, other, _ in CASES.values() for cid in (required, other)}
    return {cid: rows[cid](SPECS[cid], paper, SETTINGS) for cid in ids}


@pytest.mark.parametrize(("quantity", "case"), [(q, i) for q, (*_, cases) in CASES.items() for i in range(len(cases))])
def test_a_claim_is_not_testable_exactly_when_its_quantity_is_outside(paper, rows, quantity, case):
    required, other, cases = CASES[quantity]
    change, ours, inside = cases[case]
    assert quantity in SPECS[required].requires
    assert quantity not in SPECS[other].requires
    card = regime_card(change(paper))
    row = next(r for r in card if r.spec.id == quantity)
    assert row.ours == pytest.approx(ours, rel=1e-12)
    assert row.inside is inside
    # without their negative controls (the regime alone decides here; tests/report covers the controls)
    document = claims_document([dataclasses.replace(rows[cid], control="") for cid in (required, other)], [], card)
    judged = {c["id"]: c for c in document["claims"]}
    for cid in (required, other):
        assert judged[cid]["estimate"] == rows[cid].estimate.to_dict()  # kept either way
    assert judged[other]["verdict"] == rows[other].verdict != "not testable at this scale"
    assert judged[other]["outside_regime"] == ""
    if inside:
        assert judged[required]["verdict"] == rows[required].verdict != "not testable at this scale"
        assert judged[required]["outside_regime"] == ""
    else:
        assert judged[required]["verdict"] == "not testable at this scale"
        assert judged[required]["outside_regime"] == f"{row.outside()}: {SPECS[required].requires[quantity]}"
        assert row.outside().startswith(f"{row.spec.quantity} is {ours:.3g}, outside {row.spec.bounds_text()}")
    assert document["outside_regime"] == (0 if inside else 1)


def test_the_outside_text_names_both_numbers(paper, rows):
    card = regime_card(with_config(paper, learning_rates={"high": 3.0, "low": 1.0}))
    document = claims_document([rows["forgets_bf16"]], [], card)
    assert document["claims"][0]["outside_regime"] == (
        "high / low learning rate is 3, outside [3.16, 31.6] (the paper's 10): forgetting is the high rate "
        "overwriting pretrained knowledge that a rate a decade lower keeps (the paper's contrast)")
