"""fake_quant_perplexity and fake_quant_zero_shot: the unquantized reference and a fake-quantized cell equal a
direct computation (the same load, select and apply steps); bad input is refused by name before anything loads."""

import shutil

import pytest

from common.data import read_jsonl, token_stream
from common.eval import (
    build_choice_task,
    build_cloze_task,
    fake_quant_perplexity,
    fake_quant_zero_shot,
    perplexity,
    score_choice,
    score_cloze,
    write_task,
)
from common.models import load_causal_lm
from common.ptq import QuantRecipe, QuantSpec, select_linears
from common.quantization import quantize_

INCLUDE = r"mlp\.(gate_proj|up_proj|down_proj)$"
SPECS = [None, QuantSpec("e2m1", "ue4m3", 4, "four_over_six", True),
         QuantSpec("e2m1", "ue4m3", 8, "absmax", False, "row", (), 448.0)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, saved):
    folder = tmp_path_factory.mktemp("fq") / "model"
    shutil.copytree(saved["model"], folder)
    for item in saved["tokenizer"].iterdir():
        shutil.copy2(item, folder / item.name)
    return folder


def quantized(checkpoint, recipe):
    model = load_causal_lm(checkpoint)
    if recipe is not None:
        quantize_(model, recipe, names=select_linears(model, include=INCLUDE))
    return model


def direct(checkpoint, split, tokenizer, recipe, max_tokens):
    stream = token_stream(tokenizer, read_jsonl(split))[:max_tokens]
    return perplexity(quantized(checkpoint, recipe), stream, window=32, stride=16, batch_size=4)["perplexity"]


def check_quantization(record, recipe):
    if recipe is None:
        assert record["quantization"] is None
    else:
        assert record["quantization"]["recipe"] == recipe.to_dict()
        assert record["quantization"]["layers"] == [f"model.layers.{i}.mlp.{p}_proj" for i in range(2)
                                                    for p in ("gate", "up", "down")]


@pytest.mark.parametrize("spec", SPECS)
def test_matches_a_direct_computation(checkpoint, saved, tokenizer, spec):
    recipe = None if spec is None else QuantRecipe(spec, spec, "cell")
    record = fake_quant_perplexity(checkpoint, saved["split"], recipe, include=INCLUDE, window=32, stride=16,
                                   max_tokens=256, batch_size=4)
    assert record["metrics"]["perplexity"]["perplexity"] == direct(checkpoint, saved["split"], tokenizer, recipe, 256)
    assert record["data"]["split"]["tokens"] == 256
    check_quantization(record, recipe)


def test_max_tokens_shorter_than_the_window_is_refused(checkpoint, saved):
    with pytest.raises(ValueError, match="max_tokens 16 is shorter than the window 32"):
        fake_quant_perplexity(checkpoint, saved["split"], None, include=INCLUDE, window=32, stride=16, max_tokens=16)



@pytest.fixture(scope="module")
def built(docs):
    """The cloze and choice examples of the tiny corpus (5 each)."""
    return {"cloze": build_cloze_task(docs, 5, 3, context_words=20), "choice": build_choice_task(docs, 5, 3)}


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, built):
    """The task files of :func:`built`."""
    folder = tmp_path_factory.mktemp("tasks")
    for kind, examples in built.items():
        write_task(folder / f"{kind}.jsonl", examples)
    return {kind: folder / f"{kind}.jsonl" for kind in built}


def without_time(group):
    return {k: v for k, v in group.items() if k != "wall_time_s"}


@pytest.mark.parametrize("spec", SPECS)
def test_zero_shot_matches_a_direct_computation(checkpoint, tokenizer, built, tasks, spec):
    recipe = None if spec is None else QuantRecipe(spec, spec, "cell")
    record = fake_quant_zero_shot(checkpoint, recipe, include=INCLUDE, tasks=tasks, batch_size=4)
    model = quantized(checkpoint, recipe)
    for kind, score in (("cloze", score_cloze), ("choice", score_choice)):
        expected = score(model, tokenizer, built[kind], batch_size=4)
        assert without_time(record["metrics"][kind]) == without_time(expected)
        assert record["data"][kind]["examples"] == len(record["metrics"][kind]["example_correct"]) == 5
        assert record["data"][kind]["path"] == str(tasks[kind])
    assert len(record["metrics"]["choice"]["example_correct_norm"]) == 5
    assert record["model"]["path"] == str(checkpoint)
    check_quantization(record, recipe)


def test_zero_shot_scores_only_the_tasks_given(checkpoint, tasks):
    record = fake_quant_zero_shot(checkpoint, None, include=INCLUDE, tasks={"choice": tasks["choice"]}, batch_size=4)
    assert list(record["metrics"]) == list(record["data"]) == ["choice"]


@pytest.mark.parametrize(("chosen", "message"), [
    ({}, r"fake_quant_zero_shot needs at least one task \(kinds: cloze, choice\)"),
    ({"cloze": "cloze.jsonl", "lambada": "lambada.jsonl"},
     r"unknown zero-shot task kinds \['lambada'\] \(known: cloze, choice\)"),
])
def test_zero_shot_names_bad_tasks(chosen, message):
    with pytest.raises(ValueError, match=message):
        fake_quant_zero_shot("no-model", None, include=INCLUDE, tasks=chosen)
