"""The block-size and scale advice (common.analysis.advice): its numbers are quantize_blocks's and the theory's, the
inversions it predicts move with sigma across the theory's crossover, the JSON round-trips, the CLI refuses bad
input with exit status 2."""

import json

import numpy as np
import pytest
import torch

from common.analysis import advise, advise_weights, fit_sigma, linear_weights, parse_block_sizes
from common.analysis.__main__ import main
from common.analysis.advice import (
    BASELINE,
    SCALE_OPTIONS,
    block_pairs,
    recommend,
    render_html,
    render_markdown,
    theory_rule,
    write_advice,
)
from common.io import read_json
from common.models import load_causal_lm
from common.models.rescale import rescale_checkpoint
from common.recipes import QuantSpec
from common.scaling import quantize_blocks
from common.theory import block_mse, crossover

OPTIONS = {option.key: option for option in SCALE_OPTIONS}
# the quantize_blocks call of each option, written out (scale, rule, global scale)
CALLS = {"ue4m3_absmax": ("ue4m3", "absmax", None), "ue4m3_4over6": ("ue4m3", "four_over_six", None),
         "ue5m3_absmax": ("ue5m3", "absmax", None), "nvfp4": ("ue4m3", "absmax", "tensor")}


def mse_of(w, q):
    """The oracle: mean((w - q)^2) of the float32 difference, in float64, summed by numpy (pairwise, independent of
    torch's thread count)."""
    return float(np.mean(np.square((w - q).double().numpy())))


def cell(tensor, scale, block_size):
    return next(c for c in tensor["cells"] if (c["scale"], c["block_size"]) == (scale, block_size))


def pair(tensor, scale, block_size):
    return next(p for p in tensor["pairs"] if (p["scale"], p["block_size"]) == (scale, block_size))


@pytest.fixture(scope="module")
def smoke_advice(tiny_checkpoint):
    return advise(tiny_checkpoint.model)


@pytest.fixture(scope="module")
def planted():
    """Two Normal tensors, sigma 0.004 (below UE4M3's crossovers: small blocks flush to zero) and 0.1 (above)."""
    g = torch.Generator().manual_seed(0)
    weights = {"narrow": torch.randn(256, 512, generator=g) * 0.004, "wide": torch.randn(256, 512, generator=g) * 0.1}
    return weights, advise_weights(weights, "8,16,32", model="planted")


def test_parse_block_sizes():
    assert parse_block_sizes("8,16,32") == (8, 16, 32)
    assert parse_block_sizes(" 32, 8") == (8, 32)
    assert parse_block_sizes([16, 4]) == (4, 16)
    for text, message in (("8,x", "'x' is not an integer >= 1"), ("0", "0 is not an integer >= 1"),
                          ("8,-16", "'-16' is not an integer >= 1"), ("1.5", "'1.5' is not an integer >= 1"),
                          ("8,16,8", "8 given more than once"), ("", "'' is not an integer >= 1"),
                          ([], "no block size given"), ([True], "True is not an integer >= 1")):
        with pytest.raises(ValueError, match=f"--block-sizes .*{message}"):
            parse_block_sizes(text)


def test_block_pairs_and_theory_rules():
    assert block_pairs((8, 16, 32)) == [(8, 16), (16, 32)]
    assert block_pairs((4, 16, 32)) == [(16, 32)]
    assert block_pairs((8, 32)) == []
    assert {key: option.theory_rule for key, option in OPTIONS.items()} == {
        "ue4m3_absmax": "absmax", "ue4m3_4over6": None, "ue5m3_absmax": "absmax", "nvfp4": "absmax"}
    assert theory_rule(QuantSpec("e2m1", "ue4m3", 16, "absmax", prevent_zero=True)) == "prevent_zero"
    assert theory_rule(QuantSpec("e2m1", "ue4m3", 16, "prevent_zero")) == "prevent_zero"
    assert theory_rule(QuantSpec("e2m1", "ue4m3", 16, "brute_force")) is None
    assert theory_rule(QuantSpec("e2m1", "ue4m3", 16, "absmax", global_scale="tensor", global_target=448)) is None


def test_recommend_breaks_ties_to_the_larger_block_then_the_first_option():
    cells = [{"scale": "ue5m3_absmax", "block_size": 8, "mse": 1.0}, {"scale": "nvfp4", "block_size": 16, "mse": 1.0},
             {"scale": "ue4m3_4over6", "block_size": 16, "mse": 1.0}, {"scale": "ue4m3_absmax", "block_size": 32,
                                                                        "mse": 2.0}]
    assert recommend(cells, SCALE_OPTIONS) == {"scale": "ue4m3_4over6", "block_size": 16, "mse": 1.0}
    cells[0]["mse"] = 0.5
    assert recommend(cells, SCALE_OPTIONS)["scale"] == "ue5m3_absmax"


def test_measured_and_predicted_numbers_are_quantize_blocks_and_block_mse(smoke_advice, tiny_checkpoint):
    weights = linear_weights(load_causal_lm(tiny_checkpoint.model))
    assert [t["name"] for t in smoke_advice["tensors"]] == list(weights)
    assert len(weights) == 4 * 7  # smoke: 4 layers of q, k, v, o, gate, up, down
    for name in ("model.layers.0.mlp.down_proj.weight", "model.layers.3.self_attn.k_proj.weight"):  # 172 pads
        w = weights[name]
        tensor = next(t for t in smoke_advice["tensors"] if t["name"] == name)
        fit = fit_sigma(w)
        assert (tensor["sigma"], tensor["excess_kurtosis"], tensor["mean"]) == (
            fit["std"], fit["excess_kurtosis"], fit["mean"])
        assert tensor["sigma"] == pytest.approx(w.double().std(correction=0).item(), rel=1e-12)
        assert tensor["mean_square"] == float(np.mean(np.square(w.double().numpy())))
        amax = w.abs().amax()
        for key, (scale, rule, global_scale) in CALLS.items():
            for n in (8, 16, 32):
                q = quantize_blocks(w, "e2m1", scale, n, rule, global_scale=global_scale)
                mse = mse_of(w, q)
                c = cell(tensor, key, n)
                assert c["mse"] == mse
                assert c["relative_mse"] == mse / tensor["mean_square"]
                g = (amax / (6 * 448)).item() if global_scale else None
                assert c["global_scale"] == g
                if key == "ue4m3_4over6":
                    assert c["predicted_mse"] is c["ratio"] is c["agrees"] is None
                    continue
                predicted = block_mse(tensor["sigma"], n, "e2m1", scale, "absmax", global_scale=g)["total"]
                assert c["predicted_mse"] == predicted
                assert c["ratio"] == mse / predicted
                assert c["agrees"] == (abs(mse / predicted - 1) <= 0.1)
        base = quantize_blocks(w, "e2m1", "ue4m3", 16, "absmax")
        assert tensor["baseline_mse"] == mse_of(w, base)
        best = min(tensor["cells"], key=lambda c: c["mse"])
        assert tensor["recommendation"]["mse"] == best["mse"]
        assert tensor["recommendation"]["saving"] == 1 - best["mse"] / tensor["baseline_mse"]


def test_planted_tensors_invert_where_the_theory_says(planted):
    advice = planted[1]
    narrow, wide = advice["tensors"]
    star = {n: crossover(n, "e2m1", "ue4m3", "absmax") for n in (8, 16)}
    assert star[16] < star[8] < 0.02  # 0.0161 and 0.0194
    for n in (8, 16):
        assert pair(narrow, "ue4m3_absmax", n) == {"scale": "ue4m3_absmax", "block_size": n, "larger": 2 * n,
                                                   "measured_inverts": True, "sigma_star": star[n],
                                                   "predicted_inverts": True}
        assert pair(wide, "ue4m3_absmax", n)["measured_inverts"] is pair(wide, "ue4m3_absmax", n)[
            "predicted_inverts"] is False
        assert pair(narrow, "ue4m3_4over6", n)["predicted_inverts"] is None
        for tensor in (narrow, wide):  # UE5M3's crossovers are 256 times lower; NVFP4's tensor scale lifts sigma / g
            assert pair(tensor, "ue5m3_absmax", n)["predicted_inverts"] is False
            assert pair(tensor, "ue5m3_absmax", n)["measured_inverts"] is False
            g = cell(tensor, "nvfp4", n)["global_scale"]
            assert pair(tensor, "nvfp4", n)["sigma_star"] == g * star[n]
            assert pair(tensor, "nvfp4", n)["predicted_inverts"] is False
    # Normal data: every cell the theory covers agrees within 10% (3 options x 3 sizes x 2 tensors)
    assert advice["summary"]["agreement"] == {"cells": 18, "agree": 18}
    # (at most 3.9%: narrow at block 32, where the MSE is steep in sigma and rests on 1% of the blocks flushing)
    assert max(abs(c["ratio"] - 1) for t in (narrow, wide) for c in t["cells"] if c["ratio"] is not None) < 0.05
    rows = {(r["scale"], r["block_size"]): r for r in advice["summary"]["pairs"]}
    assert rows["ue4m3_absmax", 8] == {"scale": "ue4m3_absmax", "block_size": 8, "larger": 16, "covered": 2,
                                       "below_sigma_star": 1, "measured_inversions": 1, "both": 1}
    assert rows["ue4m3_4over6", 16]["covered"] == 0
    # the narrow tensor: UE4M3 abs-max loses a sixth of its mean square at block 8; the best option saves most of it
    assert cell(narrow, "ue4m3_absmax", 8)["relative_mse"] == pytest.approx(0.1656, rel=0.03)
    assert narrow["recommendation"]["scale"] in ("ue5m3_absmax", "nvfp4")
    assert narrow["recommendation"]["saving"] > 0.8
    total = 1 - sum(t["numel"] * t["recommendation"]["mse"] for t in (narrow, wide)) / sum(
        t["numel"] * t["baseline_mse"] for t in (narrow, wide))
    assert advice["summary"]["saving"]["total"] == total
    assert sum(r["tensors"] for r in advice["summary"]["recommendations"]) == 2
    assert advice["crossovers"][0] == {"scale": "ue4m3_absmax", "block_size": 8, "larger": 16, "sigma_star": star[8]}


def test_baseline_is_measured_when_its_block_size_is_not_requested(planted):
    weights, _ = planted
    advice = advise_weights(weights, [8, 32])
    assert BASELINE == ("ue4m3_absmax", 16)
    for tensor, w in zip(advice["tensors"], weights.values(), strict=True):
        assert tensor["pairs"] == []
        assert tensor["baseline_mse"] == mse_of(w, quantize_blocks(w, "e2m1", "ue4m3", 16))
    assert advice["summary"]["pairs"] == []


def test_constant_tensors_have_no_theory_and_null_numbers():
    advice = advise_weights({"zeros": torch.zeros(4, 32), "halves": torch.full((4, 32), 0.5)}, [8, 16])
    zeros, halves = advice["tensors"]
    assert (zeros["sigma"], zeros["excess_kurtosis"], zeros["mean_square"]) == (0.0, None, 0.0)
    assert all(c["mse"] == 0 and c["relative_mse"] is None and c["predicted_mse"] is None for c in zeros["cells"])
    assert zeros["recommendation"] == {"scale": "ue4m3_absmax", "block_size": 16, "mse": 0.0, "relative_mse": None,
                                       "saving": None}  # every MSE ties: the larger block, the first option
    # 0.5 in blocks of 0.5: abs-max s = UE4M3(0.5 / 6) = 0.0859375, 0.5 / s = 5.82 -> 6, error 0.015625; 4/6:
    # s = UE4M3(0.75 / 6) = 0.125, 0.5 / s = 4 exactly; NVFP4: g = 0.5 / 2688, s = UE4M3(1344 / 6) = 224 exactly
    assert halves["mean_square"] == 0.25
    assert {(c["scale"], c["mse"]) for c in halves["cells"]} == {
        ("ue4m3_absmax", 0.015625**2), ("ue5m3_absmax", 0.015625**2), ("ue4m3_4over6", 0.0), ("nvfp4", 0.0)}
    assert halves["recommendation"] == {"scale": "ue4m3_4over6", "block_size": 16, "mse": 0.0, "relative_mse": 0.0,
                                        "saving": 1.0}
    assert all(p["predicted_inverts"] is None for t in (zeros, halves) for p in t["pairs"])
    assert advice["summary"]["agreement"] == {"cells": 0, "agree": 0}
    json.dumps(advice, allow_nan=False)


def test_rescaling_moves_the_predicted_inversions_exactly_across_sigma_star(smoke_advice, tiny_checkpoint, tmp_path):
    record = rescale_checkpoint(tiny_checkpoint.model, 0.5, ["mlp_input"], tmp_path / "rescaled")
    rescaled = advise(tmp_path / "rescaled")
    star = {n: crossover(n, "e2m1", "ue4m3", "absmax") for n in (8, 16)}
    expected = {(name.removesuffix(".weight"), n) for name, sigma in
                ((t["name"], record["sigma"][t["name"].removesuffix(".weight")]) for t in smoke_advice["tensors"])
                for n in (8, 16) if (sigma["before"] < star[n]) != (sigma["after"] < star[n])}
    flipped = set()
    for before, after in zip(smoke_advice["tensors"], rescaled["tensors"], strict=True):
        assert before["name"] == after["name"]
        for p, q in zip(before["pairs"], after["pairs"], strict=True):
            if p["predicted_inverts"] != q["predicted_inverts"]:
                assert p["scale"] == "ue4m3_absmax"  # UE5M3's sigma* is far below; NVFP4's sigma / g is invariant
                flipped.add((before["name"].removesuffix(".weight"), p["block_size"]))
    assert flipped == expected
    names = {name for name, _ in flipped}
    assert names == {f"model.layers.{i}.mlp.{proj}" for i in range(4) for proj in ("gate_proj", "up_proj")}
    for tensor in rescaled["tensors"]:  # sigma 0.01: block 8 and 16 measurably worse than 16 and 32 too
        if "gate_proj" in tensor["name"] or "up_proj" in tensor["name"]:
            assert all(pair(tensor, "ue4m3_absmax", n)["measured_inverts"] for n in (8, 16))


def test_json_round_trips_and_renderings(smoke_advice, tmp_path):
    write_advice(smoke_advice, tmp_path / "advice.json")
    assert read_json(tmp_path / "advice.json") == smoke_advice
    json.dumps(smoke_advice, allow_nan=False)  # strict JSON: undefined numbers are null
    write_advice(smoke_advice, tmp_path / "advice.html")
    html = (tmp_path / "advice.html").read_text()
    assert html == render_html(smoke_advice)
    assert html.startswith("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">")
    for remote in ("http", "src=", "<script", "<link"):  # offline: inline style, nothing fetched
        assert remote not in html
    # four header rows, then a row per recommendation, scale x block pair, tensor (twice)
    assert html.count("<tr>") == 4 + len(smoke_advice["summary"]["recommendations"]) + 8 + 28 + 28
    write_advice(smoke_advice, tmp_path / "advice.md")
    markdown = (tmp_path / "advice.md").read_text()
    assert markdown == render_markdown(smoke_advice)
    assert markdown.startswith(f"# Block-size and scale advice: {smoke_advice['model']}")
    assert "| UE4M3 abs-max | 8 vs 16 | 0.01939 |" in markdown
    assert "UE4M3 abs-max at block 16" in markdown
    with pytest.raises(ValueError, match=r"--out '.*advice.txt': unknown extension '.txt'"):
        write_advice(smoke_advice, tmp_path / "advice.txt")


def test_cli_writes_json_and_markdown(smoke_advice, tiny_checkpoint, tmp_path, capsys):
    assert main(["advise", "--model", str(tiny_checkpoint.model), "--out", str(tmp_path / "a.json")]) == 0
    assert read_json(tmp_path / "a.json") == smoke_advice
    assert main(["advise", "--model", str(tiny_checkpoint.model), "--block-sizes", "16,32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Block-size and scale advice")
    assert "blocks of 16, 32 along the input dimension" in out
    assert "| UE4M3 abs-max | 16 vs 32 | 0.01614 |" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "nowhere"], "--model 'nowhere' is not a folder"),
    (["--model", "{tmp}"], "--model '{tmp}' is not a Hugging Face checkpoint folder (no config.json)"),
    (["--model", "{model}", "--block-sizes", "8,sixteen"],
     "--block-sizes '8,sixteen': 'sixteen' is not an integer >= 1"),
    (["--model", "{model}", "--block-sizes", "8,8"], "--block-sizes '8,8': 8 given more than once"),
    (["--model", "{model}", "--out", "{tmp}/advice.csv"],
     "--out '{tmp}/advice.csv': unknown extension '.csv'; valid: .md, .json, .html"),
])
def test_cli_errors(args, message, tiny_checkpoint, tmp_path, capsys):
    fill = {"tmp": str(tmp_path), "model": str(tiny_checkpoint.model)}
    assert main(["advise", *(a.format(**fill) for a in args)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {message.format(**fill)}\n"
    assert not (tmp_path / "advice.csv").exists()


@pytest.mark.slow
def test_smollm2(smollm2_checkpoint):
    """SmolLM2-135M (dequantized Q4_1 weights): 210 linears, sigma 0.047 to 0.40, all far above UE4M3's crossovers,
    so nothing inverts; UE4M3 4/6 at block 8 wins everywhere, saving 41% of the error of UE4M3 abs-max at 16."""
    advice = advise(smollm2_checkpoint)
    summary = advice["summary"]
    assert summary["tensors"] == 30 * 7  # 30 Llama layers of q, k, v, o, gate, up, down
    assert summary["parameters"] == 30 * (2 * 576 * 576 + 2 * 192 * 576 + 3 * 1536 * 576)
    weights = linear_weights(load_causal_lm(smollm2_checkpoint))
    name = "model.layers.0.mlp.down_proj.weight"
    tensor = next(t for t in advice["tensors"] if t["name"] == name)
    for key, (scale, rule, global_scale) in CALLS.items():
        q = quantize_blocks(weights[name], "e2m1", scale, 16, rule, global_scale=global_scale)
        assert cell(tensor, key, 16)["mse"] == mse_of(weights[name], q)
    assert min(t["sigma"] for t in advice["tensors"]) > 2 * crossover(8, "e2m1", "ue4m3", "absmax")
    for row in summary["pairs"]:
        assert row["below_sigma_star"] == row["measured_inversions"] == 0
    assert summary["recommendations"] == [{"scale": "ue4m3_4over6", "block_size": 8, "tensors": 210,
                                           "parameters": summary["parameters"]}]
    assert summary["saving"]["total"] == pytest.approx(0.4122, abs=1e-3)
    assert summary["agreement"]["cells"] == 210 * 3 * 3
    assert summary["agreement"]["agree"] >= 0.99 * summary["agreement"]["cells"]
