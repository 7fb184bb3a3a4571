"""Our side of the setup table, read from the profile's config and the base model's facts: every aspect of the
paper's side, each text exact on the smoke and paper profiles; the per-group values collapse when they agree."""

import pytest
import yaml
from winq_testing import CONFIG, smoke_config

from common.report import setup_rows
from papers.winq.context import per_group, setup_ours, study_groups
from papers.winq.settings import profile_config

RAW = yaml.safe_load(CONFIG.read_text())["winq"]
TIED = {"name": "tiny_tied", "parameters": 2_819_200, "quantized": 1_769_472, "share": 1_769_472 / 2_819_200,
        "layers": 28, "blocks": 4, "hidden": 128, "vocabulary": 8192, "tied": True}
LLAMA = {"name": "llama32_1b", "parameters": 1_235_814_400, "quantized": 973_078_528,
         "share": 973_078_528 / 1_235_814_400, "layers": 112, "blocks": 16, "hidden": 2048, "vocabulary": 128_256,
         "tied": True}


def test_per_group_collapses_equal_values():
    assert per_group({"low_bit": "640", "high_bit": "640"}) == "640"
    assert per_group({"low_bit": "2e-05", "a8": "4e-05", "high_bit": "1e-05"}) == (
        "2e-05 (W <= 2 A16); 4e-05 (A8); 1e-05 (W >= 3 A16)")
    assert per_group({"low_bit": "240,000", "a8": "240,000", "high_bit": "80,000"}) == (
        "240,000 (W <= 2 A16, A8); 80,000 (W >= 3 A16)")


def test_study_groups_in_order():
    assert study_groups(smoke_config()) == ["low_bit"]  # W1 and W2
    assert study_groups(profile_config(RAW, "paper")) == ["low_bit", "a8", "high_bit"]


def test_ours_on_the_smoke_study():
    ours = setup_ours(smoke_config(), TIED, "sotu")
    assert list(ours) == list(RAW["paper_setup"])
    assert ours == {
        "Model": "tiny_tied, 2.82M parameters (4 blocks, hidden 128, vocabulary 8,192, tied embeddings), float32",
        "Data": "sotu (the base model's pretraining corpus)",
        "Tokens": "3,072 a run (12 steps of 4 sequences of 64 tokens, per process)",
        "Steps": "12",
        "Learning rate": "AdamW (beta2 0.95), weight decay 0, 2 warmup steps then cosine to 0 lr: 0.004",
        "Interpolation period K": "3 of 12 steps; strength 0.8, noise sigma 0.001",
        "Seeds": "0, 1 for every compared run, 0 for the figure-only runs",
        "Layers quantized": "every attention and MLP linear (q, k, v, o, gate, up, down) of the 4 blocks, 28 layers "
                            "and 63% of the parameters; the tied embeddings and the norms in float32",
        "Evaluation": "sotu's test split: perplexity over the first 4,096 tokens in 64-token windows (stride 64), "
                      "and zero-shot cloze and 4-way choice tasks built from the corpus, every model "
                      "checkpoint-quantized first",
    }


def test_ours_on_the_paper_profile():
    ours = setup_ours(profile_config(RAW, "paper"), LLAMA, "fineweb_sample")
    assert ours["Model"] == ("llama32_1b, 1.24B parameters (16 blocks, hidden 2048, vocabulary 128,256, tied "
                             "embeddings), float32")
    assert ours["Data"] == "fineweb_sample"  # the profile's own corpus
    assert ours["Tokens"] == ("3,932,160,000 a run (240,000 steps of 8 sequences of 2048 tokens, per process) "
                              "(W <= 2 A16, A8); 1,310,720,000 a run (80,000 steps of 8 sequences of 2048 tokens, per "
                              "process) (W >= 3 A16)")
    assert ours["Steps"] == "240,000 (W <= 2 A16, A8); 80,000 (W >= 3 A16)"
    assert ours["Learning rate"] == ("AdamW (beta2 0.95), weight decay 0, 1000 warmup steps then cosine to 0 lr: "
                                     "2e-05 (W <= 2 A16); 4e-05 (A8); 1e-05 (W >= 3 A16)")
    assert ours["Interpolation period K"] == ("60,000 of 240,000 steps (W <= 2 A16, A8); 40,000 of 80,000 steps "
                                              "(W >= 3 A16); strength 0.8, noise sigma 0.001")
    assert ours["Layers quantized"].endswith("of the 16 blocks, 112 layers and 79% of the parameters; the tied "
                                             "embeddings and the norms in float32")
    assert ours["Evaluation"].startswith("fineweb_sample's test split: perplexity over the first 1,048,576 tokens in "
                                         "2048-token windows (stride 2048)")


@pytest.mark.parametrize("profile", ["smoke", "default", "full", "paper", "standin"])
def test_the_setup_rows_pair_every_aspect(profile):
    config = profile_config(RAW, profile)
    rows = setup_rows(config["paper_setup"], setup_ours(config, TIED, "sotu"))
    assert [r["aspect"] for r in rows] == ["Model", "Data", "Tokens", "Steps", "Learning rate",
                                           "Interpolation period K", "Seeds", "Layers quantized", "Evaluation"]
    assert rows[0]["paper"].startswith("LLaMA-3.2-1B, 1.24B parameters")
