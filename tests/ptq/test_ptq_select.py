"""select_linears: exactly the expected module names, skips by count and by proportion, clear errors."""

import pytest
from ptq_testing import mlp_names, tiny_llama
from torch import nn

from common.ptq import block_index, num_blocks, select_linears


def test_default_selects_every_mlp_linear_in_order(model):
    assert select_linears(model) == mlp_names(range(6))


def test_skip_first_and_last_blocks(model):
    assert select_linears(model, skip_first=1, skip_last=2) == mlp_names(range(1, 4))
    assert select_linears(model, exclude=r"down_proj") == [n for n in mlp_names(range(6)) if "down" not in n]


def test_attention_selection(model):
    names = select_linears(model, include=r"self_attn\.[qkvo]_proj$", skip_last=5)
    assert names == [f"model.layers.0.self_attn.{p}_proj" for p in "qkvo"]


@pytest.mark.parametrize(("depth", "first", "last"), [(26, 3, 2), (6, 1, 0), (13, 2, 1), (52, 6, 4)])
def test_skip_proportion_rounds_to_nearest(depth, first, last):
    model = tiny_llama(num_hidden_layers=depth, hidden_size=8, intermediate_size=8, num_attention_heads=2,
                       num_key_value_heads=1)
    # 3/26 * 13 = 1.5 rounds up to 2 (halves up); 2/26 * 13 = 1
    assert select_linears(model, skip_proportion=(3 / 26, 2 / 26)) == mlp_names(range(first, depth - last))


def test_lm_head_only_when_named_in_the_pattern(model):
    assert "lm_head" not in select_linears(model, include=".*")
    assert len(select_linears(model, include=".*")) == 6 * 7
    assert select_linears(model, include=r"mlp\.|lm_head$", skip_first=6) == ["lm_head"]
    assert select_linears(model, include=r"mlp\.|lm_head$")[-1] == "lm_head"


def test_block_index_and_depth():
    assert block_index("model.layers.7.mlp.up_proj") == 7
    assert block_index("layers.12.fc") == 12
    assert block_index("lm_head") is None
    assert block_index("model.layers_7.mlp") is None
    plain = nn.Module()
    plain.layers = nn.ModuleList(nn.Sequential(nn.Linear(4, 4)) for _ in range(3))
    assert num_blocks(plain) == 3
    assert select_linears(plain, include=r"\.0$", skip_last=1) == ["layers.0.0", "layers.1.0"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"include": "mlp\\.(up"}, r"invalid include pattern 'mlp\\\\.\(up'"),
    ({"exclude": "["}, r"invalid exclude pattern '\['"),
    ({"include": r"mlp\.fc1$"}, r"no nn.Linear module matches include='mlp\\\\.fc1\$', exclude=None"),
    ({"skip_first": 4, "skip_last": 2}, "skip_first=4, skip_last=2 of 6 blocks"),
    ({"skip_first": -1}, "skip_first must be an integer >= 0, got -1"),
    ({"skip_first": 1, "skip_proportion": (0.1, 0.1)}, "not both"),
    ({"skip_proportion": (0.1, 1.5)}, r"two fractions in \[0, 1\], got \(0.1, 1.5\)"),
])
def test_bad_selections_raise(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        select_linears(model, **kwargs)
