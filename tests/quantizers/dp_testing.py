"""Two data-parallel ranks for the amax-reduction tests (test_w8a8_amax_reduction.py): the tensors each rank feeds
to one W8A8 layer and the spawned gloo worker. Kept apart from the tests so that a spawned process imports torch
and ``common.qat`` only."""

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from common.quantizers import attach_w8a8
from common.quantizers.w8a8 import all_reduce_amax
from common.recipes import ROLES, DelayedScalingRecipe

WORLD = 2
WINDOW = 2  # max_window over the last 2 calls: the third call's scale comes from the amaxes of calls 0 and 1
INPUT_SCALES = ((1.0, 6.0, 0.5), (3.0, 0.25, 2.0))  # per rank and call: the larger amax alternates between the ranks
GRAD_SCALES = ((0.5, 2.0, 1.0), (1.5, 0.75, 3.0))
CALLS = len(INPUT_SCALES[0])
SCENARIOS = {  # name: (amax_reduction, group): None (the default group), "world" (given) or "own" (one rank)
    "none": ("none", None), "data_parallel": ("data_parallel", None), "world_group": ("data_parallel", "world"),
    "own_group": ("data_parallel", "own")}
# all_reduce_amax of each rank's value: case -> (rank 0's, rank 1's)
REDUCED_CASES = {"max": (0.75, 3.0), "zero": (0.0, 0.0), "inf": (2.0, math.inf), "nan": (math.nan, 1e30)}


def inputs(rank: int, call: int) -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(100 * rank + call)) * INPUT_SCALES[rank][call]


def grads(rank: int, call: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1000 + 100 * rank + call)
    return torch.randn(4, 5, generator=generator) * GRAD_SCALES[rank][call]


def linear() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 5))


def train_calls(rank: int, reduction: str, group: dist.ProcessGroup | None = None) -> dict[str, Any]:
    """CALLS forward/backward calls of rank ``rank``'s tensors through a W8A8 layer (max_window over WINDOW calls;
    DDP-wrapped when a process group is initialised), then one evaluation call on rank 0 only: ``y``, ``dx``,
    ``dw`` (per call), ``eval`` (rank 0), ``history`` (per role) and ``telemetry``."""
    model = linear()
    recipe = DelayedScalingRecipe(observer="max_window", observer_options={"window": WINDOW}, amax_reduction=reduction)
    handle = attach_w8a8(model, ["0"], recipe, amax_group=group)
    wrapped = DistributedDataParallel(model) if dist.is_initialized() else model
    out: dict[str, Any] = {"y": [], "dx": [], "dw": []}
    for call in range(CALLS):
        x = inputs(rank, call).requires_grad_()
        y = wrapped(x)
        (y * grads(rank, call)).sum().backward()  # grad_output = grads(rank, call) exactly
        out["y"].append(y.detach())
        out["dx"].append(x.grad)
        out["dw"].append(model[0].weight.grad.clone())
        model.zero_grad()
    if rank == 0:  # an evaluation call on one rank alone: it must not communicate (the other rank would not match)
        with torch.no_grad():
            out["eval"] = model(inputs(0, 0))
    out["history"] = {role: handle.observer("0", role).state_dict()["history"] for role in ROLES}
    out["telemetry"] = handle.telemetry_rows()
    handle.remove()
    return out


def worker(rank: int, root: Path) -> None:
    """One rank (``torch.multiprocessing.spawn``): every scenario of :data:`SCENARIOS` and the :func:`all_reduce_amax`
    cases, saved to ``root/rank<rank>.pt``."""
    dist.init_process_group("gloo", init_method=f"file://{root}/store", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    own = [dist.new_group([r]) for r in range(WORLD)][rank]  # every rank creates every group, in order
    groups = {None: None, "world": dist.group.WORLD, "own": own}
    results: dict[str, Any] = {name: train_calls(rank, reduction, groups[group])
                               for name, (reduction, group) in SCENARIOS.items()}
    results["reduced"] = {case: all_reduce_amax(values[rank], torch.device("cpu"))
                          for case, values in REDUCED_CASES.items()}
    torch.save(results, root / f"rank{rank}.pt")
    dist.destroy_process_group()
