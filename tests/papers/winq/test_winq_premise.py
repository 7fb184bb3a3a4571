"""The premise statistic and the baseline-only pilot (papers.winq.premise), on planted runs."""

import json
import math

import pytest
import torch
from winq_testing import (
    MECHANISM,
    build_study,
    mechanism_records,
    smoke_config,
    stagnation_records,
    train_config,
    write_csv,
)

from common.config import merged
from papers.winq import premise as wp
from papers.winq.regime import premise_values
from papers.winq.settings import period_lr_sums
from papers.winq.study import stall_ratio, study_summary


# ------------------------------------------------------------------------------------------------ the statistics
def test_the_stall_ratio_is_progress_per_unit_rate_late_over_early():
    # early: 0.3 codes over 7 units of rate, late: 0.06 over 3 -> (0.06 / 3) / (0.3 / 7) = 7 / 15
    assert stall_ratio([0.2, 0.1, 0.05, 0.01], [4.0, 3.0, 2.0, 1.0]) == pytest.approx(7 / 15, rel=1e-12)
    # progress in proportion to the rate is 1, whatever the schedule; no late change is a full stall
    assert stall_ratio([0.4, 0.3, 0.2, 0.1], [4.0, 3.0, 2.0, 1.0]) == pytest.approx(1.0, rel=1e-12)
    assert stall_ratio([0.2, 0.1, 0.0, 0.0], [4.0, 3.0, 2.0, 1.0]) == 0.0
    # an odd count: the middle period is in neither half
    assert stall_ratio([0.3, 99.0, 0.1], [3.0, 5.0, 2.0]) == pytest.approx((0.1 / 2) / (0.3 / 3), rel=1e-12)
    assert stall_ratio([0.3], [1.0]) is None  # one period: no halves
    assert stall_ratio([0.0, 0.1], [1.0, 1.0]) is None  # nothing changed early: no reference progress
    with pytest.raises(ValueError, match="3 periods of code changes but 2 of learning rate"):
        stall_ratio([0.1, 0.1, 0.1], [1.0, 1.0])


def test_the_gain_per_rate_and_the_late_share_of_a_planted_curve():
    # lr 1, warmup 2, 4 steps, cosine to 0: rates 0.5, 1, 1, 0 -> 1.5 in the first half, 1 in the last
    train = train_config(max_steps=4, warmup_steps=2, lr=1.0, min_lr_ratio=0.0)
    curve = [(1, math.exp(3.0)), (2, math.exp(2.0)), (4, math.exp(1.5))]  # ln ppl 3 -> 2 (half) -> 1.5
    assert wp.gain_per_lr(curve, train) == pytest.approx((0.5 / 1.0) / (1.0 / 1.5), rel=1e-12)
    assert wp.late_share(curve, 4) == pytest.approx(100 * 0.5 / 1.5, rel=1e-12)
    flat = [(1, 10.0), (2, 10.0), (4, 9.0)]
    assert wp.gain_per_lr(flat, train) is None  # no early gain
    assert wp.late_share([(1, 9.0), (4, 10.0)], 4) is None  # no gain at all


def test_the_summary_gives_each_cell_its_stall_and_the_card_the_baselines_mean(tmp_path):
    config = smoke_config()
    study = study_summary(*build_study(tmp_path, mechanism=MECHANISM))
    # the planted baseline changes 1/8 of its codes every period: on the smoke schedule (12 steps, K = 3) its ratio
    # is the early half's summed rate over the late half's
    sums = period_lr_sums(train_config(max_steps=12, warmup_steps=2, lr=config["learning_rates"]["low_bit"],
                                       min_lr_ratio=0.0), 3)
    expected = (sums[0] + sums[1]) / (sums[2] + sums[3])
    cells = {c["cell"]: c for c in study["cells"]}
    assert cells["w1-baseline/seed0"]["stall"] == pytest.approx(expected, rel=1e-12)
    assert cells["w1-noise/seed0"]["stall"] is None  # a run without mechanism records
    measured, notes = premise_values(study, ["stall_w1", "stall_w2", "stall_w3"])
    assert measured["stall_w1"] == pytest.approx(expected, rel=1e-12)
    assert notes["stall_w1"].startswith("the w1 baseline of this build, mean over 2 seeds (seed 0 ")
    assert (measured["stall_w3"], notes["stall_w3"]) == (None, "no w3 baseline in this build")


# ----------------------------------------------------------------------------------------------------- the pilot
STEPS = 800  # the pilot test's run length: K = 200, boundaries after 200, 400, 600, 800 steps
WEIGHT = 0.06  # every planted weight +-0.06: W1 bin 2 mean|W| = 0.12, W2 bin max|W| / 2 = 0.03


def pilot_config():
    """The smoke study with a pilot whose first candidate keeps the study's regime (lr 1e-3 x 800 steps: every card
    row inside), the second halves the rate (travel W1 below 1 bin) and the third runs 1200 steps; a card of the
    pilot's rows only."""
    config = merged(smoke_config(), {"learning_rates": {"low_bit": 1.0e-3}, "train_steps": {"low_bit": STEPS},
                                     "train": {"warmup_steps": 2, "eval_every": 200}})
    config["pilot"]["candidates"] = {"same": {}, "slower": {"learning_rates": {"low_bit": 5.0e-4}},
                                     "longer": {"train_steps": {"low_bit": 1200}}}
    config["regime"] = {k: v for k, v in config["regime"].items()
                        if k in ("travel_w1", "step_w1", "travel_w2", "step_w2", "quantized_share", "stall_w1",
                                 "stall_w2")}
    return config


def planted_parameters():
    sign = torch.where(torch.arange(64).reshape(8, 8) % 3 == 0, -1.0, 1.0).to(torch.float64)
    return {"model.layers.0.self_attn.q_proj.weight": WEIGHT * sign, "model.embed_tokens.weight": torch.ones(2, 8)}


def write_pilot_run(folder, codes, steps, seconds):
    every = steps // 4
    series = (codes, [0.5] * 3 + [None], [0.5] * 3 + [None], [0.0] * 4, [0.0] * 4)
    folder.mkdir(parents=True)
    (folder / "mechanism.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                    for r in mechanism_records(series, every=every)))
    (folder / "stagnation.jsonl").write_text("".join(json.dumps(r) + "\n"
                                                     for r in stagnation_records([1.0, 0.8, 0.6, 0.4], every=every)))
    write_csv(folder / "eval_log.csv", "step,val_loss,val_perplexity,val_tokens",
              [(every * (i + 1) - 1, 0.0, p, 64) for i, p in enumerate([100.0, 50.0, 40.0, 38.0])])
    (folder / "train_summary.json").write_text(json.dumps({"seconds": seconds, "steps": steps}))


def test_the_pilot_table_and_its_rule(tmp_path):
    config = pilot_config()
    folders = []
    for name, steps, stalls in (("same", STEPS, False), ("slower", STEPS, True), ("longer", 1200, True)):
        study = wp.pilot_study(config, name)
        sums = period_lr_sums(wp.train_config(study, "w1-baseline"), steps // 4)
        codes = [0.1, 0.1, 0.0, 0.0] if stalls else [0.5 * s for s in sums]  # no late change, or steady progress
        for setting in ("w1", "w2"):
            folder = tmp_path / "pilot" / name / "runs" / f"{setting}-baseline" / "seed100"
            write_pilot_run(folder, codes, steps, seconds=0.01 * steps)
            folders.append(folder)
    table = wp.pilot_table(config, folders, planted_parameters())
    rows = {r["candidate"]: r for r in table["rows"]}
    assert [r["candidate"] for r in table["rows"]] == ["same", "slower", "longer"]
    assert rows["same"]["settings"]["w1"]["stall"] == pytest.approx(1.0, rel=1e-12)
    assert rows["slower"]["settings"]["w2"]["stall"] == 0.0
    assert rows["same"]["settings"]["w1"]["relative_grad_norm"] == pytest.approx(0.4 / 0.8, rel=1e-12)
    assert rows["same"]["settings"]["w1"]["late_share"] == pytest.approx(
        100 * math.log(50 / 38) / math.log(100 / 38), rel=1e-12)
    # the card under each schedule: step W1 = lr / 0.12, W2 = lr / 0.03; the halved rate leaves W1's travel < 1 bin
    assert rows["same"]["card"]["step_w2"] == pytest.approx(1.0e-3 / 0.03, rel=1e-12)
    assert rows["slower"]["card"]["step_w1"] == pytest.approx(5.0e-4 / 0.12, rel=1e-12)
    assert (rows["same"]["card_outside"], rows["slower"]["card_outside"], rows["longer"]["card_outside"]) == (
        [], ["travel_w1"], [])
    assert [(r["premise_holds"], r["card_inside"]) for r in table["rows"]] == [(False, True), (True, False),
                                                                             (True, True)]
    # the budget: the study's 12 cells (W1 x 4 methods, W2 x 2, 2 seeds each) at the candidate's 1200 steps, 0.01 s
    # a step
    assert rows["longer"]["seconds_per_step"] == pytest.approx(0.01, rel=1e-12)
    assert rows["longer"]["budget_hours"] == pytest.approx(33 / 60 + 1.58 * 12 * 1200 * 0.01 / 2 / 3600, rel=1e-12)
    assert table["chosen"] == "longer"  # the first whose premise holds, card inside, within the budget
    assert wp.choose([{**rows["longer"], "fits": False}]) is None
    with pytest.raises(ValueError, match=r"missing \['longer/w2-baseline/seed100'\]"):
        wp.pilot_table(config, folders[:-1], planted_parameters())


def test_an_unknown_candidate_and_a_card_without_the_premise_row_are_refused(tmp_path):
    config = pilot_config()
    with pytest.raises(ValueError, match="unknown pilot candidate 'faster'; valid: same, slower, longer"):
        wp.candidate_config(config, "faster")
    runs = {s: {"codes_changed": [0.1] * 4, "curve": [(200, 2.0), (800, 1.0)], "relative_grad_norm": None,
                "seconds": 1.0, "steps": STEPS} for s in ("w1", "w2")}
    config["regime"].pop("stall_w2")
    with pytest.raises(ValueError, match="the regime card has no premise row stall_w2"):
        wp.pilot_row(config, "same", runs, planted_parameters())


def test_the_report_shows_the_recorded_pilot(tmp_path):
    from papers.winq.context import pilot_table

    config = pilot_config()
    assert pilot_table({**config, "pilot": {**config["pilot"], "record": None}}) is None  # nothing recorded yet
    rows = [{"candidate": name, "settings": {s: {"stall": stall, "gain_per_lr": 2.5, "relative_grad_norm": None,
                                                 "late_share": 40.0}
                                             for s in ("w1", "w2")},
             "card": {"travel_w1": 1.6, "step_w1": 0.0083, "travel_w2": 6.4, "step_w2": 0.033},
             "card_outside": [], "seconds_per_step": 0.3, "budget_hours": 3.2, "premise_holds": stall <= 0.5,
             "card_inside": True, "fits": True} for name, stall in (("same", 0.9), ("longer", 0.25))]
    config["pilot"]["record"] = {"commit": "84132df", "profile": "default", "rows": rows, "chosen": "longer"}
    table = pilot_table(config)
    assert table["rows"][0] == ["same", "w1", "0.001 x 800", "0.9 (<= 0.5)", "2.5", "undefined", "40.0%", "1.6",
                                "0.0083", "0.300", "3.20", "premise fails; card inside; fits the 3.5 h budget; "
                                                           "not chosen"]
    assert table["rows"][3][-1] == "premise holds; card inside; fits the 3.5 h budget; chosen"
    assert table["rows"][3][2] == "0.001 x 1,200"  # the candidate's schedule, from the config
    assert "run at commit 84132df on seed 100" in table["caption"]
    assert table["caption"].endswith("chose: longer")
