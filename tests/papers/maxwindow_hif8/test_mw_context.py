"""The setup table: our side built from the planted config and artifacts (exact), set beside the paper's of
config.yaml, what it refuses, and the context step end to end (its inputs found among the cited artifacts)."""

import json

import pytest
from mw_testing import PAPER_LIKE, build_study, raw_config, setup_of, smoke_config, study_artifacts, summarize

from common.report import claims_document
from papers.maxwindow_hif8.__main__ import cited_path, last_row, main
from papers.maxwindow_hif8.context import corpus_name, our_setup
from papers.maxwindow_hif8.regime import regime_card
from papers.maxwindow_hif8.study import observer_cell

OURS = {
    "Model and size": "base (LlamaForCausalLM): 1,536 parameters",
    "Data": "continual pretraining on shift_corpus; the base model was pretrained on pretrain_corpus",
    "Tokens": "3,072: 12 steps of 256 tokens",
    "Steps": "12 optimizer steps: 4 in BF16, then HiF8 (amax histories reset); learning-rate warmup 2 steps, cosine "
             "decay to 0.1 of the peak",
    "Learning rates": "1.5e-05 (the recipe) and 0.00015 (the high-rate runs, 10x); AdamW (0.9, 0.95), weight decay "
                      "0.1, clip 1",
    "Seeds": "2 per run (0, 1): the seed fixes the data order; runs compared paired by seed",
    "Layers quantized": "50.0% of the parameters: 6 linears (l0, l1, l2, l3, l4, l5) hold 768 of the model's 1,536 "
                        "parameters; no tied weights (max_window-lrlow-w4, seed 0); inputs, weights and output "
                        "gradients HiF8, per-tensor delayed scaling",
    "Evaluation": "every model in BF16 (as trained) and after HiF8 W8A8 checkpoint quantization: perplexity on 4,096 "
                  "test tokens of pretrain_corpus and 4,096 of shift_corpus, zero-shot cloze (1,024 examples) and "
                  "multiple choice (1,024) from pretrain_corpus",
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("runs"), **PAPER_LIKE)


@pytest.fixture(scope="module")
def claims(study):
    """A claims document holding the regime card of the paper-like study (and no claim: the setup reads the card)."""
    return claims_document([], [], regime_card(study_artifacts(study)))


def test_our_setup_of_the_planted_study(study, claims):
    assert setup_of(study, claims["regime"]) == OURS
    assert list(OURS) == list(raw_config()["paper_setup"])  # the same aspects, in the paper's order


def test_our_setup_reads_the_tokens_of_every_rank_from_the_log(study, claims):
    base = {role: study["evaluations"][f"bf16/base/{role}"] for role in ("pretrain", "shift")}
    setup = our_setup(smoke_config(), base=base, log_end={"step": "11", "tokens": "12288"}, regime=claims["regime"])
    assert setup["Tokens"] == "12,288: 12 steps of 1,024 tokens"  # e.g. four ranks


def test_our_setup_needs_the_quantized_share_of_the_card(study):
    base = {role: study["evaluations"][f"bf16/base/{role}"] for role in ("pretrain", "shift")}
    with pytest.raises(ValueError, match=r"no quantized_share row: rebuild claims\.json"):
        our_setup(smoke_config(), base=base, log_end={"step": "11", "tokens": "3072"}, regime=[])


def test_corpus_name_is_the_split_folder():
    assert corpus_name({"data": {"split": {"path": "data/corpora/fineweb_edu/test.jsonl"}}}) == "fineweb_edu"


def test_cited_path_and_last_row(tmp_path):
    paths = ["r/eval/bf16/base/pretrain.json", "r/eval/bf16/max_window-lrlow-w4/seed0/pretrain.json"]
    assert cited_path(paths, "/bf16/base/pretrain.json") == paths[0]
    with pytest.raises(ValueError, match=r"--cited holds 0 paths ending '/bf16/base/shift.json'"):
        cited_path(paths, "/bf16/base/shift.json")
    with pytest.raises(ValueError, match=r"--cited holds 2 paths ending '/pretrain.json'"):
        cited_path(paths, "/pretrain.json")
    log = tmp_path / "train_log.csv"
    log.write_text("step,tokens\n0,256\n1,512\n")
    assert last_row(str(log)) == {"step": "1", "tokens": "512"}
    log.write_text("step,tokens\n")
    with pytest.raises(ValueError, match="has no rows"):
        last_row(str(log))


def test_context_step_builds_the_setup_table(study, claims, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evaluations = []
    for name, record in study["evaluations"].items():
        path = tmp_path / "eval" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
        evaluations.append(str(path))
    files = {"summary.json": summarize(study), "observer_study.json": observer_cell(smoke_config()),
             "claims.json": claims}
    for name, data in files.items():
        (tmp_path / name).write_text(json.dumps(data))
    config = {**study["config"], "paper_setup": raw_config()["paper_setup"]}
    argv = ["context", "--config-json", json.dumps(config), "--profile", "smoke", "--seed", "0",
            "--summary", "summary.json", "--observer-study", "observer_study.json", "--claims", "claims.json",
            "--figures", "figures/loss-curves.png", "--cited", *evaluations, *study["logs"].values(),
            "--out", "context.json"]
    assert main(argv) == 0
    context = json.loads((tmp_path / "context.json").read_text())
    assert context["setup"] == [{"aspect": aspect, "paper": text, "ours": OURS[aspect]}
                                for aspect, text in raw_config()["paper_setup"].items()]
    assert [row["id"] for row in context["regime"]] == ["lr_ratio", "warmup_share", "window_steps", "quantized_share"]
