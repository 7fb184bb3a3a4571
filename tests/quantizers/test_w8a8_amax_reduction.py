"""W8A8 amax reduction across data-parallel ranks (``amax_reduction``): two gloo processes (spawned, CPU) feed their
own tensors to the same DDP-wrapped W8A8 layer. With ``"data_parallel"`` both ranks' observer histories hold the
elementwise maximum of the ranks' amaxes and their outputs and gradients are exactly those of a reference quantizer
fed that maximum; with ``"none"`` (and with a process group of one rank) each rank's are those of its own amaxes.
Without a process group ``"data_parallel"`` is ``"none"`` bit for bit; bad values are named."""

import math

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from dp_testing import CALLS, REDUCED_CASES, WINDOW, WORLD, grads, inputs, linear, train_calls, worker

from common.formats import get_format
from common.observers import make_observer
from common.quantization import prepare
from common.quantizers import W8A8Layer, attach_w8a8
from common.quantizers.scaled import scaled_qdq
from common.quantizers.w8a8 import all_reduce_amax, scale_for, tensor_amax
from common.recipes import ROLES, DelayedScalingRecipe

HIF8 = get_format("hif8")
REDUCED = {"max": 3.0, "zero": 0.0, "inf": math.inf, "nan": math.nan}  # REDUCED_CASES' maximum on every rank


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """``[results of rank 0, results of rank 1]`` of :func:`dp_testing.worker` (two spawned gloo processes)."""
    root = tmp_path_factory.mktemp("amax_reduction")
    mp.spawn(worker, args=(root,), nprocs=WORLD, join=True)
    return [torch.load(root / f"rank{rank}.pt", weights_only=False) for rank in range(WORLD)]


def local_amaxes(rank):
    """What rank ``rank`` alone observes: ``{role: [amax of each call]}``."""
    weight = linear()[0].weight.detach()
    return {"input": [tensor_amax(inputs(rank, c)) for c in range(CALLS)], "weight": [tensor_amax(weight)] * CALLS,
            "grad_output": [tensor_amax(grads(rank, c)) for c in range(CALLS)]}


def reduced_amaxes():
    """The elementwise maximum over the ranks of :func:`local_amaxes`."""
    per_rank = [local_amaxes(rank) for rank in range(WORLD)]
    return {role: [max(a) for a in zip(*(p[role] for p in per_rank), strict=True)] for role in ROLES}


def reference(rank, amaxes):
    """The single-process result of rank ``rank``'s tensors when call ``c`` of role ``r`` observes ``amaxes[r][c]``:
    delayed scaling written out (``p`` = max of the last WINDOW observed amaxes, the call's own on a cold start,
    ``s = float32(15 / (p + 1e-12))``, ``Q(t) = HiF8(t s) / s``), the layer's products, the local weight gradient."""
    layer = linear()[0]
    weight, bias = layer.weight.detach(), layer.bias.detach()
    observers = {role: make_observer("max_window", window=WINDOW) for role in ROLES}
    out = {"y": [], "dx": [], "dw": []}

    def q(role, t, call):
        a = amaxes[role][call]
        p = observers[role].predict(current=a)
        observers[role].update(a)
        return scaled_qdq(t, scale_for(a if p is None else p, 15.0), HIF8)

    for call in range(CALLS):
        qx, qw = q("input", inputs(rank, call), call), q("weight", weight, call)
        qg = q("grad_output", grads(rank, call), call)
        out["y"].append(F.linear(qx, qw, bias))
        out["dx"].append(qg @ qw)
        out["dw"].append(qg.t() @ qx)
    out["history"] = {role: observers[role].state_dict()["history"] for role in ROLES}
    return out


def assert_equal_lists(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert torch.equal(a, e)


def ddp_mean(dws):
    """DDP's weight gradient: each rank's divided by the world size, then summed (exact for 2 ranks)."""
    return [sum(dw / WORLD for dw in per_call) for per_call in zip(*dws, strict=True)]


@pytest.mark.parametrize("scenario", ["data_parallel", "world_group"])
def test_data_parallel_ranks_observe_the_maximum_amax(ranks, scenario):
    amaxes = reduced_amaxes()
    expected = [reference(rank, amaxes) for rank in range(WORLD)]
    for rank, result in enumerate(r[scenario] for r in ranks):
        assert result["history"] == {role: amaxes[role][-WINDOW:] for role in ROLES} == expected[rank]["history"]
        assert_equal_lists(result["y"], expected[rank]["y"])
        assert_equal_lists(result["dx"], expected[rank]["dx"])
        assert_equal_lists(result["dw"], ddp_mean([e["dw"] for e in expected]))
    assert ranks[0][scenario]["history"] == ranks[1][scenario]["history"]
    for rows in zip(*(r[scenario]["telemetry"] for r in ranks), strict=True):  # the same scale on every rank
        assert rows[0]["scale"] == rows[1]["scale"]
        assert rows[0]["predicted_amax"] == rows[1]["predicted_amax"]


def test_none_keeps_each_rank_on_its_own_amaxes(ranks):
    for rank, result in enumerate(r["none"] for r in ranks):
        own = local_amaxes(rank)
        expected = reference(rank, own)
        assert result["history"] == {role: own[role][-WINDOW:] for role in ROLES} == expected["history"]
        assert_equal_lists(result["y"], expected["y"])
        assert_equal_lists(result["dx"], expected["dx"])
        assert_equal_lists(result["dw"], ddp_mean([reference(r, local_amaxes(r))["dw"] for r in range(WORLD)]))
        single = train_calls(rank, "none")  # one process, no DDP: the same forward and input gradient
        assert_equal_lists(result["y"], single["y"])
        assert_equal_lists(result["dx"], single["dx"])
        assert result["telemetry"] == single["telemetry"]
    assert ranks[0]["none"]["history"]["input"] != ranks[1]["none"]["history"]["input"]
    assert ranks[0]["none"]["history"]["weight"] == ranks[1]["none"]["history"]["weight"]  # DDP replicas agree
    # the reduction matters here: rank 0's first call takes rank 1's larger cold-start amax, rank 1's last call
    # rank 0's spike of call 1 in its window
    assert not torch.equal(ranks[0]["none"]["y"][0], ranks[0]["data_parallel"]["y"][0])
    assert not torch.equal(ranks[1]["none"]["y"][2], ranks[1]["data_parallel"]["y"][2])


def test_a_group_of_one_rank_reduces_nothing(ranks):
    for result in ranks:
        own, none = result["own_group"], result["none"]
        assert own["history"] == none["history"]
        assert own["telemetry"] == none["telemetry"]
        for key in ("y", "dx", "dw"):
            assert_equal_lists(own[key], none[key])
        assert ("eval" in own) == ("eval" in none)
        if "eval" in none:
            assert torch.equal(own["eval"], none["eval"])


def test_telemetry_records_the_local_amax(ranks):
    reduced = reduced_amaxes()
    for rank, result in enumerate(r["data_parallel"] for r in ranks):
        own = local_amaxes(rank)
        rows = result["telemetry"]
        assert [(r["role"], r["amax"]) for r in rows] == [(role, own[role][c]) for c in range(CALLS)
                                                          for role in ROLES]
        for row in rows:
            if row["cold_start"]:  # the scale of the reduced amax, never a saturation
                assert row["predicted_amax"] == reduced[row["role"]][0] >= row["amax"]
                assert row["scale"] == scale_for(reduced[row["role"]][0], 15.0)
            assert row["overflow"] == (not row["cold_start"] and row["amax"] > row["predicted_amax"])


def test_evaluation_uses_the_shared_history_without_communicating(ranks):
    history = ranks[0]["data_parallel"]["history"]
    layer = linear()[0]
    scales = {role: scale_for(max(history[role]), 15.0) for role in ("input", "weight")}
    expected = F.linear(scaled_qdq(inputs(0, 0), scales["input"], HIF8),
                        scaled_qdq(layer.weight.detach(), scales["weight"], HIF8), layer.bias.detach())
    assert torch.equal(ranks[0]["data_parallel"]["eval"], expected)
    assert "eval" not in ranks[1]["data_parallel"]


def test_all_reduce_amax_is_the_maximum_and_keeps_nan(ranks):
    for result in ranks:
        assert set(result["reduced"]) == set(REDUCED) == set(REDUCED_CASES)
        for case, value in result["reduced"].items():
            assert value == REDUCED[case] or (math.isnan(value) and math.isnan(REDUCED[case])), case


@pytest.mark.parametrize("rank", range(WORLD))
def test_without_a_process_group_data_parallel_is_none(rank):
    assert not dist.is_initialized()
    reduced, none = train_calls(rank, "data_parallel"), train_calls(rank, "none")
    assert reduced["history"] == none["history"]
    assert reduced["telemetry"] == none["telemetry"]
    for key in ("y", "dx", "dw"):
        assert_equal_lists(reduced[key], none[key])
    assert all_reduce_amax(2.5, torch.device("cpu")) == 2.5
    assert math.isnan(all_reduce_amax(math.nan, torch.device("cpu")))


def test_the_front_door_passes_the_reduction():
    model = linear()
    handle = prepare(model, DelayedScalingRecipe(amax_reduction="data_parallel"), filter_fn=lambda m, name: True)
    assert {q.amax_reduction for q in handle.layers["0"].quantizers.values()} == {"data_parallel"}
    assert {q.amax_reduction for q in W8A8Layer("fc", DelayedScalingRecipe()).quantizers.values()} == {"none"}


def test_a_bad_reduction_is_named():
    with pytest.raises(ValueError, match=r"unknown amax_reduction 'all_ranks'; valid: none, data_parallel"):
        attach_w8a8(linear(), ["0"], DelayedScalingRecipe(amax_reduction="all_ranks"))
    with pytest.raises(ValueError, match=r"unknown amax_reduction 'dp'"):
        W8A8Layer("fc", DelayedScalingRecipe(amax_reduction="dp"))
