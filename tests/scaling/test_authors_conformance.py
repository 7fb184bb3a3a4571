"""Our block quantizer under the *Finer is Better* authors' conventions against an oracle of their quantizer.

The oracle (:func:`authors_quantize`) restates the semantics of ``quantize_mx_torch`` in ``clee1994/finer_is_better``
``torch_eval.py`` (commit 0080284; ``:<line>`` below) as read there, in plain eager PyTorch on the input's own
dtype, so that bf16 inputs meet PyTorch's real bf16 ops (not our emulation of them) and the E4M3 scale cast is
torch's ``float8_e4m3fn`` (not our rounding). It is slow and written for reading, not copied: one function per
step of theirs. Our side is :func:`common.scaling.quantize_blocks` with the options of the
``finer_is_better_authors`` convention (:mod:`common.scaling.conventions`), the compute dtype being the data's (the
authors' model is bf16; on float32 data their code computes in float32).
"""

import pytest
import torch

from common.scaling import quantize_blocks
from common.scaling.conventions import block_options

E2M1_SPEC = (2, 1, 1, False)  # exponent bits, mantissa bits, bias, top exponent reserved (:17-18)
UE5M3_SPEC = (5, 3, 15, True)  # :21-22 (has_inf_nan: the top exponent is reserved, so the max is 61440)
E4M3_MAX = 448.0  # :107, :263
E4M3_MIN = 2.0**-9  # :109
BLOCK_MAX_FLOOR = 1e-7  # :291, :314


def grid_of(exponent_bits, mantissa_bits, bias, top_reserved):
    """The non-negative values of a minifloat as the authors enumerate them (:47-77): zero, the subnormals
    ``m / 2^M * 2^(1 - bias)``, and the normals ``(1 + m / 2^M) 2^(e - bias)`` for ``e`` from 1 to the top
    exponent (one less when it is reserved for Inf/NaN), float32, ascending; with the midpoints of neighbours
    (:73-74, formats with mantissa bits)."""
    values = {m / 2**mantissa_bits * 2.0 ** (1 - bias) for m in range(2**mantissa_bits)}
    top = 2**exponent_bits - (2 if top_reserved else 1)
    values |= {(1 + m / 2**mantissa_bits) * 2.0 ** (e - bias) for e in range(1, top + 1)
               for m in range(2**mantissa_bits)}
    grid = torch.tensor(sorted(values), dtype=torch.float32)
    return grid, (grid[:-1] + grid[1:]) / 2


E2M1_GRID, E2M1_MIDPOINTS = grid_of(*E2M1_SPEC)
UE5M3_GRID, UE5M3_MIDPOINTS = grid_of(*UE5M3_SPEC)


def nearest_ties_down(values, grid, midpoints):
    """``grid[bucketize(values, midpoints)]``: a value on a midpoint falls in the lower bucket (:142-143,
    :285-286). The grid is float32, so the result is float32 whatever the input's dtype (PyTorch promotion)."""
    return grid[torch.bucketize(values, midpoints)]


def authors_scale(raw, scale, prevent_zero):
    """A block scale from ``raw = max / 6`` (:105-158): E4M3 by the float8 cast after a clamp at 448, in ``raw``'s
    dtype (:106-108); UE5M3 by the midpoint bucketing on its float32 grid after a clamp at its max (:130-143);
    prevent-zero replaces a zero by the smallest positive value (:109-111, :138, :155-156)."""
    if scale == "ue4m3":
        s = raw.clamp(max=E4M3_MAX).to(torch.float8_e4m3fn).to(raw.dtype)
        return torch.where(s == 0, E4M3_MIN, s) if prevent_zero else s
    s = nearest_ties_down(raw.clamp(max=float(UE5M3_GRID[-1])), UE5M3_GRID, UE5M3_MIDPOINTS)
    return torch.where(s == 0, float(UE5M3_GRID[1]), s) if prevent_zero else s


def authors_dequantize(blocks, s):
    """``Q(b / s) * s`` with a zero scale giving zeros (:303-310, :216-227): the quotient in the promoted dtype of
    ``blocks`` and ``s``, clipped at +-6, its magnitude bucketed on the E2M1 midpoints and the sign put back
    (:282-287)."""
    nonzero = s != 0
    quotient = torch.where(nonzero, blocks / torch.where(nonzero, s, torch.ones_like(s)), 0.0)
    clipped = quotient.clamp(-6.0, 6.0)
    return nearest_ties_down(clipped.abs(), E2M1_GRID, E2M1_MIDPOINTS) * torch.sign(clipped) * s


def authors_quantize(x, block_size, scale="ue4m3", prevent_zero=False, four_over_six=False, hierarchical=False):
    """The authors' fake quantization of ``x`` (``quantize_mx_torch``, :239-340; no clipping, no rotation)."""
    if hierarchical:  # one c per index of dim 0, amax over the other axes (:257-276)
        amax = x.abs().amax(dim=tuple(range(1, x.dim())), keepdim=True)
        c = amax / (E4M3_MAX if scale == "ue4m3" else float(UE5M3_GRID[-1]))
        c = torch.where(c != 0, c, torch.ones_like(c))
        x_norm = x / c
    else:
        x_norm = x
    blocks = x_norm.reshape(-1, block_size)  # :280
    block_max = blocks.abs().amax(dim=-1, keepdim=True).clamp(min=BLOCK_MAX_FLOOR)  # :289-291
    if not four_over_six:
        dequantized = authors_dequantize(blocks, authors_scale(block_max / 6.0, scale, prevent_zero))  # :295-310
    else:  # candidates (max/6)*1.5 and max/6; the first iff its float32 block MSE is strictly smaller (:328-335)
        dq4 = authors_dequantize(blocks, authors_scale((block_max / 6.0) * 1.5, scale, prevent_zero))
        dq6 = authors_dequantize(blocks, authors_scale(block_max / 6.0, scale, prevent_zero))
        mse4, mse6 = (((blocks - dq) ** 2).mean(dim=-1, keepdim=True) for dq in (dq4, dq6))  # :229-230
        dequantized = torch.where(mse4 < mse6, dq4, dq6)  # :232-233
    dequantized = dequantized.reshape(x.shape)
    if hierarchical:
        dequantized = dequantized * c  # :337-338
    return dequantized.to(x.dtype)  # :340


VARIANTS = {  # the paper's variants: (rule, prevent_zero, hierarchical, scale)
    "absmax": ("absmax", False, False, "ue4m3"),
    "prevent_zero": ("absmax", True, False, "ue4m3"),
    "four_over_six": ("four_over_six", False, False, "ue4m3"),
    "four_over_six_pz": ("four_over_six", True, False, "ue4m3"),
    "hierarchical": ("absmax", False, True, "ue4m3"),
    "hierarchical_four_over_six": ("four_over_six", False, True, "ue4m3"),
    "hierarchical_pz": ("absmax", True, True, "ue4m3"),
    "ue5m3": ("absmax", False, False, "ue5m3"),
    "ue5m3_four_over_six": ("four_over_six", False, False, "ue5m3"),
    "ue5m3_hierarchical": ("absmax", False, True, "ue5m3"),
    "ue5m3_hierarchical_four_over_six": ("four_over_six", False, True, "ue5m3"),
}
SHAPES = {"activations": (1, 128, 256), "weights": (256, 256)}


def sample(kind, shape, dtype, seed=0):
    """Normal, Student-t (3 degrees of freedom) or Normal with 0.1% outliers x100, in ``dtype``, at a spread of
    scales along the first axis longer than 1 (sigma 1e-5 .. 1 over the rows of a weight or the tokens of an
    activation, so that small blocks meet E4M3's zero-scale region)."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(shape, generator=g, dtype=torch.float64)
    if kind == "student_t":
        chi2 = torch.randn((3, *shape), generator=g, dtype=torch.float64).square().sum(0)
        z = z / (chi2 / 3).sqrt()
    elif kind == "outliers":
        z = torch.where(torch.rand(shape, generator=g, dtype=torch.float64) < 1e-3, z * 100, z)
    axis = next(i for i, n in enumerate(shape) if n > 1)
    sigma = torch.logspace(-5, 0, shape[axis], dtype=torch.float64).reshape(-1, *[1] * (len(shape) - 1 - axis))
    return (z * sigma).to(dtype)


def ours(x, block_size, variant, convention="finer_is_better_authors"):
    rule, prevent_zero, hierarchical, scale = VARIANTS[variant]
    options = block_options(convention, rule, prevent_zero=prevent_zero, hierarchical=hierarchical, scale=scale)
    if x.dtype == torch.float32:
        options["compute_dtype"] = None  # the authors' arithmetic is the data's dtype
    return quantize_blocks(x, "e2m1", scale, block_size, **options)


def theirs(x, block_size, variant):
    rule, prevent_zero, hierarchical, scale = VARIANTS[variant]
    return authors_quantize(x, block_size, scale, prevent_zero, rule == "four_over_six", hierarchical)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("kind", ["normal", "student_t", "outliers"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_authors_conventions_reproduce_their_quantizer_bit_for_bit(variant, shape, kind, dtype):
    x = sample(kind, SHAPES[shape], dtype)
    for block_size in (4, 8, 16, 32):
        expected, got = theirs(x, block_size, variant), ours(x, block_size, variant)
        assert got.dtype == x.dtype
        mismatch = (got != expected).nonzero()
        assert mismatch.numel() == 0, (
            f"block {block_size}: {mismatch.shape[0]} of {x.numel()} differ, first at {mismatch[0].tolist()}: "
            f"x {x[tuple(mismatch[0])].item()!r} ours {got[tuple(mismatch[0])].item()!r} "
            f"theirs {expected[tuple(mismatch[0])].item()!r}")


def test_oracle_grids_are_the_formats_the_authors_enumerate():
    assert E2M1_GRID.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert float(UE5M3_GRID[-1]) == 61440.0
    assert float(UE5M3_GRID[1]) == 2.0**-17


def test_our_conventions_differ_from_theirs_on_bf16_activations():
    """The oracle can tell the conventions apart: ours (per-token c, ties even, float32 arithmetic) leaves
    elements of a bf16 activation different from the authors' quantizer, which the authors' conventions do not."""
    x = sample("normal", SHAPES["activations"], torch.bfloat16)
    expected = theirs(x, 16, "hierarchical_four_over_six")
    assert (ours(x, 16, "hierarchical_four_over_six", "lowbit") != expected).any()
    assert torch.equal(ours(x, 16, "hierarchical_four_over_six"), expected)
