"""The fake-quant kernels and a tiny model's PTQ and QAT on CUDA (``pytest -m gpu`` on a GPU machine; skipped here).

Kernels: CUDA equals the CPU bit for bit (:func:`assert_same_bits`: the same bit pattern at every position, NaNs
matched as NaNs) for every registered format, rounding and overflow mode, every scale rule with prevent-zero on and
off and every global-scale mode, every named spec, on float32 and bfloat16 inputs full of edge values; the kernels
stay on the device and, all scale rules but brute force, never synchronise with the host. Models: PTQ logits and one
QAT step on CUDA close to the CPU's (only the GEMMs and reductions round differently there).
"""

import contextlib
from collections.abc import Iterator
from functools import partial

import pytest
import torch
from ptq_testing import TINY, tiny_llama
from scaling_testing import edge_blocks

from common.formats import FORMATS, OVERFLOWS, get_format, round_to_format
from common.quantization import prepare, quantize_
from common.quantizers import quantize_tensor, scaled_qdq
from common.quantizers.scaled import float32
from common.recipes import SPECS, LowBitRecipe, Recipe, get_recipe
from common.scaling import RULES, quantize_blocks
from common.train import causal_lm_loss

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CUDA = torch.device("cuda")
DTYPES = (torch.float32, torch.bfloat16)
BLOCK_SETUPS = (("e2m1", "ue4m3", 16), ("e2m1", "e8m0", 32), ("e4m3", "ue5m3", 8))
# brute force reads the width of its candidate window and its number of surviving pairs on the host (one sync per
# call, common.scaling.rules.brute_force); every other rule runs without a host synchronisation
SYNC_FREE_RULES = [name for name in RULES if name != "brute_force"]


def assert_same_bits(a: torch.Tensor, b: torch.Tensor) -> None:
    """Same dtype, shape and bit pattern everywhere (both NaN counts as equal: payloads may differ by device)."""
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    a32, b32 = a.detach().cpu().float(), b.detach().cpu().float()
    both_nan = a32.isnan() & b32.isnan()
    assert torch.equal(torch.where(both_nan, 0, a32.view(torch.int32)), torch.where(both_nan, 0, b32.view(torch.int32)))


def edge_values(fmt_name: str, dtype: torch.dtype) -> torch.Tensor:
    """Inputs for ``fmt_name``: bfloat16 gets all 65536 bit patterns; float32 gets random bit patterns (every
    exponent, NaN, Inf, subnormals), patterns of exact bfloat16 ties, Gaussians over 2^-30..2^20, the signed
    specials and, for formats of 8 bits or fewer, every grid value, every midpoint and their float32 neighbours."""
    if dtype == torch.bfloat16:
        return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    g = torch.Generator().manual_seed(0)
    patterns = torch.randint(-(1 << 31), 1 << 31, (1 << 15,), dtype=torch.int64, generator=g).to(torch.int32)
    ties = (patterns & ~0xFFFF) | 0x8000
    gaussians = torch.randn(1 << 15, generator=g) * torch.exp2(torch.randint(-30, 21, (1 << 15,), generator=g).float())
    specials = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 2.0**-149, -(2.0**-149),
                             2.0**-126, 2.0**-127, torch.finfo(torch.float32).max, -torch.finfo(torch.float32).max])
    parts = [patterns.view(torch.float32), ties.view(torch.float32), gaussians, specials]
    fmt = get_format(fmt_name)
    if fmt.is_codebook:
        grid = torch.tensor(fmt.finite_values, dtype=torch.float32)
        points = torch.cat([grid, (grid[1:] + grid[:-1]) / 2, grid * 1.5])
        points = torch.cat([points, -points])
        parts += [points, points.nextafter(torch.tensor(float("inf"))), points.nextafter(torch.tensor(float("-inf")))]
    return torch.cat(parts)


def overflows(fmt_name: str) -> list[str]:
    fmt = get_format(fmt_name)
    return [mode for mode in OVERFLOWS if mode == "saturate" or fmt.has_inf or fmt.has_nan]


FORMAT_CASES = [(name, rounding, overflow) for name in FORMATS for rounding in ("rne", "away")
                for overflow in overflows(name)]


# -------------------------------------------------------------------------------------------------------- kernels
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("fmt", "rounding", "overflow"), FORMAT_CASES)
def test_round_to_format_on_cuda_equals_cpu(fmt, rounding, overflow, dtype):
    x = edge_values(fmt, dtype)
    expected = round_to_format(x, fmt, rounding=rounding, overflow=overflow)
    out = round_to_format(x.to(CUDA), fmt, rounding=rounding, overflow=overflow)
    assert out.device.type == "cuda"
    assert_same_bits(out, expected)


@pytest.mark.parametrize("fmt", ["hif8", "e4m3", "e2m1", "int4", "binary", "midrise2"])
def test_stochastic_rounding_on_cuda_is_seeded_and_picks_a_neighbour(fmt):
    """Stochastic draws come from the device's generator (so no bit equality with the CPU's stream): the same seed
    gives the same bits, every result is one of the two grid neighbours of its input, and both occur."""
    grid = torch.tensor(get_format(fmt).finite_values, dtype=torch.float32)
    x = edge_values(fmt, torch.float32)
    x = x[x.isfinite() & (x.abs() < grid[-1])]
    low = grid[torch.searchsorted(grid, x, side="right") - 1]
    high = grid[torch.searchsorted(grid, x, side="left")]
    first = round_to_format(x.to(CUDA), fmt, rounding="stochastic", generator=torch.Generator(CUDA).manual_seed(3))
    second = round_to_format(x.to(CUDA), fmt, rounding="stochastic", generator=torch.Generator(CUDA).manual_seed(3))
    assert first.device.type == "cuda"
    assert_same_bits(first, second)
    first = first.cpu()
    assert bool(((first == low) | (first == high)).all())
    between = low != high
    assert bool((between & (first == low)).any())
    assert bool((between & (first == high)).any())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("global_scale", [None, "tensor", "row"])
@pytest.mark.parametrize("prevent_zero", [False, True])
@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize(("elem", "scale", "block_size"), BLOCK_SETUPS)
def test_quantize_blocks_on_cuda_equals_cpu(elem, scale, block_size, rule, prevent_zero, global_scale, dtype):
    x = edge_blocks(dtype)
    kwargs = {"prevent_zero": prevent_zero, "global_scale": global_scale, "return_scales": True}
    expected, expected_scales = quantize_blocks(x, elem, scale, block_size, rule, **kwargs)
    out, scales = quantize_blocks(x.to(CUDA), elem, scale, block_size, rule, **kwargs)
    assert out.device.type == scales.block.device.type == scales.elements.device.type == "cuda"
    assert_same_bits(out, expected)
    assert_same_bits(scales.block, expected_scales.block)
    assert_same_bits(scales.elements, expected_scales.elements)
    if global_scale is None:
        assert scales.global_ is None
    else:
        assert_same_bits(scales.global_, expected_scales.global_)


@pytest.mark.parametrize("criterion", ["mse", "mae"])
@pytest.mark.parametrize("axis", [0, -1])
def test_four_over_six_options_on_cuda_equal_cpu(criterion, axis):
    x = edge_blocks(torch.float32)
    kwargs = {"global_scale": "tensor", "axis": axis, "criterion": criterion}
    assert_same_bits(quantize_blocks(x.to(CUDA), "e2m1", "ue4m3", 16, "four_over_six", **kwargs),
                     quantize_blocks(x, "e2m1", "ue4m3", 16, "four_over_six", **kwargs))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["absmax", "unit_target_15", "e4m3"])
def test_per_tensor_qdq_on_cuda_equals_cpu(case, dtype):
    """HiF8 per tensor (an FP32 scale; the unit rule with g = amax / 15, the W8A8 convention), E4M3 per tensor,
    and the delayed-scaling kernel ``scaled_qdq``."""
    x = edge_blocks(dtype)
    elem, rule, options = {"absmax": ("hif8", "absmax", {}),
                           "unit_target_15": ("hif8", "unit", {"global_scale": "tensor", "global_target": 15.0}),
                           "e4m3": ("e4m3", "absmax", {})}[case]
    assert_same_bits(quantize_blocks(x.to(CUDA), elem, "fp32", None, rule, **options),
                     quantize_blocks(x, elem, "fp32", None, rule, **options))
    finite = x.float().abs().nan_to_num(nan=0.0, posinf=0.0).amax()
    scale = float32(15.0 / (float(finite) + 1e-12))
    assert_same_bits(scaled_qdq(x.to(CUDA), scale, elem), scaled_qdq(x, scale, elem))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(64, 256), (2, 8, 128)])
@pytest.mark.parametrize("name", list(SPECS))
def test_named_specs_on_cuda_equal_cpu(name, shape, dtype):
    x = (torch.randn(*shape, generator=torch.Generator().manual_seed(2)) * 0.05).to(dtype)
    x.view(-1)[:3] = torch.tensor([float("nan"), float("inf"), 0.0], dtype=dtype)
    assert_same_bits(quantize_tensor(x.to(CUDA), SPECS[name]), quantize_tensor(x, SPECS[name]))


@contextlib.contextmanager
def sync_errors() -> Iterator[None]:
    """Inside: any CUDA operation that synchronises with the host raises (``torch.cuda.set_sync_debug_mode``)."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


@pytest.mark.parametrize("global_scale", [None, "tensor", "row"])
@pytest.mark.parametrize("prevent_zero", [False, True])
@pytest.mark.parametrize("rule", SYNC_FREE_RULES)
def test_quantize_blocks_never_syncs_with_the_host(rule, prevent_zero, global_scale):
    x = edge_blocks(torch.bfloat16).to(CUDA)
    kwargs = {"prevent_zero": prevent_zero, "global_scale": global_scale, "return_scales": True}
    quantize_blocks(x, "e2m1", "ue4m3", 16, rule, **kwargs)  # warm-up: the per-device tables are copied once
    with sync_errors():
        out, scales = quantize_blocks(x, "e2m1", "ue4m3", 16, rule, **kwargs)
    assert out.device.type == scales.block.device.type == "cuda"


def test_named_specs_hif8_and_scaled_qdq_never_sync_with_the_host():
    x = edge_blocks(torch.float32).to(CUDA)
    calls = [*(partial(quantize_tensor, spec=spec) for spec in SPECS.values()), lambda t: round_to_format(t, "hif8"),
             lambda t: round_to_format(t, "hif8", overflow="inf_nan"),
             lambda t: quantize_blocks(t, "hif8", "fp32", None),
             lambda t: scaled_qdq(t, 0.5, "hif8"), lambda t: scaled_qdq(t, 0.5, "e4m3")]
    for call in calls:
        call(x)
    with sync_errors():
        for call in calls:
            call(x)


def test_brute_force_is_the_one_rule_that_syncs():
    """The exclusion above is real: brute force's pruned search reads data-dependent sizes on the host."""
    x = edge_blocks(torch.float32).to(CUDA)
    quantize_blocks(x, "e2m1", "ue4m3", 16, "brute_force")
    with sync_errors(), pytest.raises(RuntimeError, match="synchroniz"):
        quantize_blocks(x, "e2m1", "ue4m3", 16, "brute_force")


# --------------------------------------------------------------------------------------------------------- models
def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||b||`` in float64 on the CPU."""
    a64, b64 = a.detach().cpu().double(), b.detach().cpu().double()
    return float((a64 - b64).norm() / b64.norm())


INPUT_IDS = torch.randint(0, TINY["vocab_size"], (4, 32), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("name", ["NVFP4", "NVFP4_4over6", "MXFP4"])
def test_ptq_cell_on_cuda_matches_cpu(name):
    """The tiny Llama, weights and inputs fake-quantized (``quantize_``): the quantized weights equal the CPU's bit
    for bit; the logits differ only through float32 GEMM rounding. Weight-only logits within 1e-5 relative; with
    activation quantization a rounding difference can move an activation to the neighbouring grid point, so 5e-3
    (measured on the CPU: weights perturbed by 1e-6 relative move the W+A logits by <= 2.1e-3; leaving the
    activations unquantized moves them by 1.7e-2 to 2.3e-2)."""
    cpu, gpu = tiny_llama(0), tiny_llama(0).to(CUDA)
    for activations, tolerance in ((False, 1e-5), (True, 5e-3)):
        recipe = get_recipe(name, activations=activations)
        with quantize_(cpu, recipe), quantize_(gpu, recipe):
            for param_cpu, param_gpu in zip(cpu.parameters(), gpu.parameters(), strict=True):
                assert param_gpu.device.type == "cuda"
                assert_same_bits(param_gpu, param_cpu)
            with torch.no_grad():
                expected = cpu(INPUT_IDS).logits
                out = gpu(INPUT_IDS.to(CUDA)).logits
        assert out.device.type == "cuda"
        assert bool(out.isfinite().all())
        assert relative_difference(out, expected) <= tolerance, (activations, relative_difference(out, expected))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_a_model_spread_over_two_gpus_evaluates_as_on_one(monkeypatch):
    """``Compute.place`` with the first GPU's free memory faked too small: the tiny Llama dispatched over two GPUs
    (common.compute.gpu_layout), then fake-quantized (NVFP4 weights and inputs) in place on each GPU: the quantized
    weights equal the one-GPU model's bit for bit and the logits come back on the first GPU, equal within GEMM
    rounding."""
    from common.compute import Compute

    one = Compute("cuda:0").place(tiny_llama(0))
    need = sum(p.numel() * p.element_size() for p in one.parameters())
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index: (need, 4 * need))
    spread = Compute("cuda").place(tiny_llama(0))
    assert {p.device.index for p in spread.parameters()} == {0, 1}
    recipe = get_recipe("NVFP4", activations=True)
    with quantize_(one, recipe), quantize_(spread, recipe):
        for param_one, param_spread in zip(one.parameters(), spread.parameters(), strict=True):
            assert_same_bits(param_spread, param_one)
        with torch.no_grad():
            expected = one(INPUT_IDS.to(CUDA)).logits
            out = spread(INPUT_IDS.to(CUDA)).logits
    assert out.device == torch.device("cuda", 0)
    assert relative_difference(out, expected) <= 5e-3


def test_ptq_remove_after_moving_the_model_to_cuda():
    """Quantized on the CPU, moved to CUDA, restored: the original weights come back on CUDA, bit for bit."""
    model, reference = tiny_llama(0), tiny_llama(0)
    handle = quantize_(model, "NVFP4")
    model.to(CUDA)
    handle.remove()
    for param, original in zip(model.parameters(), reference.parameters(), strict=True):
        assert param.device.type == "cuda"
        assert_same_bits(param, original)


QAT_RECIPES = {"HIF8_W8A8": "HIF8_W8A8", "PARETOQ_W2": LowBitRecipe(2),
               "NVFP4_WA_ste": get_recipe("NVFP4", activations=True)}
LEARNING_RATE = 0.1


def qat_step(device: torch.device, recipe: Recipe | str) -> tuple[torch.Tensor, dict[str, torch.Tensor],
                                                                 dict[str, torch.Tensor]]:
    """One QAT step of the tiny Llama prepared on ``device``: ``(loss, gradients, updates)`` of an SGD step (the
    update is ``-lr * grad``, so it compares the step itself; AdamW's first step is ``-lr * sign(grad)``, which a
    rounding difference flips on near-zero gradients)."""
    model = tiny_llama(0).to(device)
    prepare(model, recipe)
    model.train()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    batch = torch.randint(0, TINY["vocab_size"], (4, 33), generator=torch.Generator().manual_seed(3)).to(device)
    loss = causal_lm_loss(model, batch)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    optimizer.step()
    updates = {name: p.detach() - before[name] for name, p in model.named_parameters()}
    return loss.detach(), grads, updates


def flatten(tensors: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().flatten().cpu() for t in tensors.values()])


@pytest.mark.parametrize("recipe", list(QAT_RECIPES))
def test_qat_step_on_cuda_matches_cpu(recipe):
    """W8A8 HiF8 (delayed scaling), ParetoQ 2-bit and STE fake-quant: a finite loss within 1e-5 relative of the
    CPU's, every gradient and update on the device and finite, gradients and the step's updates within 2e-3 relative
    of the CPU's. Measured on the CPU: weights perturbed by 1e-7 relative (the scale of GEMM rounding) move the
    gradients by <= 5e-5, by 1e-6 by <= 1e-3 (HiF8 roundings of grad_output flip); dropping one quantizer (the
    gradients' HiF8, the A8 of ParetoQ, the activations' NVFP4) moves them by >= 5.3e-3."""
    loss_cpu, grads_cpu, updates_cpu = qat_step(torch.device("cpu"), QAT_RECIPES[recipe])
    loss, grads, updates = qat_step(CUDA, QAT_RECIPES[recipe])
    assert loss.device.type == "cuda"
    assert bool(loss.isfinite())
    assert abs(float(loss) - float(loss_cpu)) <= 1e-5 * abs(float(loss_cpu))
    assert grads.keys() == grads_cpu.keys()
    for tensor in (*grads.values(), *updates.values()):
        assert tensor.device.type == "cuda"
        assert bool(tensor.isfinite().all())
    assert relative_difference(flatten(grads), flatten(grads_cpu)) <= 2e-3
    assert relative_difference(flatten(updates), flatten(updates_cpu)) <= 2e-3
    assert float(flatten(updates).abs().max()) > 0
