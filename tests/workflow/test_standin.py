"""End to end, the stand-in run (``make standin``; docs/scale.md#the-stand-in-run), for the two reports whose paper
profile plumbing covers the other two's (``workflow_testing.STANDIN_TARGETS``: CI's time): the paper profile on
local stand-ins builds them on the CPU, through the paper profile's own paths: every hub model a link to the smoke
base model (never pretrained, never copied), token shards made with the linked model's tokenizer, the QAT study
continuing the linked 1B stand-in, every claim row a computed verdict."""

import json
from pathlib import Path

import pytest
from workflow_testing import STANDIN_TARGETS

from common.data import load_tokenizer, tokenizer_fingerprint
from common.report import VERDICTS, Claim

pytestmark = pytest.mark.slow
PAPERS = [Path(target).stem for target in STANDIN_TARGETS]
SMOKE_MODEL = "results/smoke/models/base/smoke"
EXTERNAL = "results/standin/models/external"


def test_every_report_is_built_and_says_it_is_a_stand_in(standin_build):
    notice = "<strong>Note.</strong> Stand-in profile: the paper profile"  # (an apostrophe follows: escaped)
    assert PAPERS == ["microscaling_limits", "winq"]
    for paper in PAPERS:
        html = (standin_build / f"reports/standin/{paper}.html").read_text(encoding="utf-8")
        assert html.index(notice) < html.index("<h2>"), paper  # before any section
        tex = (standin_build / f"reports/standin/{paper}.tex").read_text(encoding="utf-8")
        assert r"\textbf{Note.} Stand-in profile:" in tex, paper


@pytest.mark.parametrize("paper", PAPERS)
def test_every_claim_row_has_a_computed_verdict(standin_build, paper):
    document = json.loads((standin_build / f"results/standin/{paper}/claims.json").read_text())
    claims = document["claims"]
    assert len(claims) >= 5
    for row in claims:  # each row re-validated: its verdict follows from its interval by the rule
        assert Claim.from_dict(row).verdict == row["verdict"]
    assert document["counts"] == {v: sum(c["tallied"] == v for c in claims if c["kind"] == "paper") for v in VERDICTS}


def test_hub_models_are_links_to_the_smoke_model(standin_build):
    models = sorted((standin_build / EXTERNAL).iterdir())
    assert [m.name for m in models] == ["granite33_8b", "llama2_7b", "llama31_8b", "llama32_1b"]
    target = (standin_build / SMOKE_MODEL).resolve()
    for model in models:
        weights = model / "model.safetensors"
        assert weights.is_symlink(), model.name
        assert weights.resolve() == target / "model.safetensors", model.name
    assert not (standin_build / "results/standin/models/base").exists()  # nothing pretrained in this profile


def test_token_shards_carry_the_linked_tokenizer(standin_build):
    expected = tokenizer_fingerprint(load_tokenizer(standin_build / SMOKE_MODEL))
    manifests = sorted((standin_build / "results/standin/tokens").glob("*/llama32_1b/*/manifest.json"))
    assert {m.parent.name for m in manifests} == {"train", "validation"}
    for manifest in manifests:
        assert json.loads(manifest.read_text())["tokenizer_sha256"] == expected, manifest


def test_qat_runs_continue_the_linked_model(standin_build):
    runs = sorted((standin_build / "results/standin/models/trained/winq").glob("*/seed0/lowbit_metadata.json"))
    assert runs
    for metadata in runs:
        record = json.loads(metadata.read_text())
        assert record["init"] == f"{EXTERNAL}/llama32_1b", metadata
        assert record["train_split"].startswith("results/standin/tokens/"), metadata
