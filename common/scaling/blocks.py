"""Block (microscaling) quantize-dequantize: ``quantize_blocks``.

Geometry: blocks are ``block_size`` consecutive elements along ``axis`` (default the last). When the axis
length is not a multiple of the block size, the last block of each row is zero-padded; zeros change neither a
block's max nor its error, and the padding is dropped from the result. A block size larger than the axis gives
one block per row; ``block_size="row"`` is that explicitly, one block spanning the whole axis (per output channel
for an ``(out, in)`` weight, per token for activations) whatever its length; ``block_size=None`` gives one block
for the whole tensor (per-tensor scaling).

Two-level ("hierarchical") scaling, ``global_scale="tensor"``, ``"row"`` or ``"slice"``: an FP32 scale
``g = amax / (top * R)`` per tensor, per row (``row`` = every index of the other axes: per token of an activation)
or per dim-0 slice (``slice`` = every index of dim 0, amax over all other dims: per sequence of a ``(batch, seq,
hidden)`` activation, per output row of a weight, where it equals ``row``) is divided out first, block scales are
chosen on ``x / g`` and ``g`` is multiplied back. ``slice`` is the *Finer is Better* authors' hierarchical scope
(``clee1994/finer_is_better`` ``torch_eval.py`` at 0080284, lines 258-260: ``amax`` over every axis but 0); it
needs the blocks to run along another axis than 0, and a tensor of fewer than 2 dims is one slice (their amax over
an empty list of axes reduces everything). ``top`` is the largest element value and
``R`` the block-scale range the rule targets: the scale format's max for every rule (NVFP4:
``g = amax / (6 * 448)``) except four_over_six, which keeps room for its x1.5 candidate (``g = amax / (6 * 256)``
for E2M1 with UE4M3). ``global_target`` replaces the divisor: ``g = amax / global_target`` (the hierarchical
scaling of *Finer is Better* uses ``c = amax / 448``, i.e. ``global_target=448``, which maps the tensor or row
to [-448, 448] before block scales are chosen). ``amax`` ignores non-finite values; an all-zero (or all
non-finite) tensor/row uses g = 1.

Numerics conventions ``ties`` and ``compute_dtype``: :mod:`common.scaling.rules` (module docstring and
:class:`~common.scaling.rules.Arithmetic`). With ``compute_dtype="bfloat16"`` the input is taken as bf16 (exact
for bf16 tensors; a float32 input is rounded to bf16 first), ``g``, ``x / g`` and the result are rounded to bf16
as the authors' ops leave them, and the result is returned in ``x``'s dtype.

Non-finite input: a NaN poisons only its own block (its scale and every value of the block become NaN; with a
global scale too, because ``g`` ignores it). An Inf saturates: its block scale is the largest scale value.

Devices: everything runs on ``x``'s device and the output, scales and element values are returned there, equal
bit for bit to the CPU's (the convention of :mod:`common.formats.rounding`; the exception, 4/6's float32 mean
under ``compute_dtype="bfloat16"``, is in :class:`~common.scaling.rules.Arithmetic`). Every rule but
``brute_force`` runs without a host synchronisation; brute force needs one per call for its data-dependent pruned
search (:func:`common.scaling.rules.brute_force`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from common.formats.registry import get_format
from common.formats.rounding import as_float32, chunk_elements, divide
from common.formats.spec import Format

from .conventions import check_block_geometry
from .rules import Arithmetic, ScaleRule, dequantize_blocks, get_rule


class BlockScales(NamedTuple):
    """The scales behind a block quantization, enough to store it as codes and rebuild it bit-exactly.

    ``block``: one scale per block, shape ``(*other_dims, num_blocks)`` with the block axis last (one element
    for per-tensor blocks); ``global_``: the FP32 global scale per tensor (shape ``()``) or per row
    (``(*other_dims, 1)``; ``"slice"`` repeats each slice's scale on its rows), or None; ``elements``: the
    element-format values ``Q(x / (g s))`` in ``x``'s layout (float32, 0 in zero-scale blocks). The quantized
    tensor is exactly ``(elements * s) * g`` in that order, with ``s`` and ``g`` broadcast back to the elements
    (with ``compute_dtype="bfloat16"``: that float32 value rounded to bf16).
    """

    block: torch.Tensor
    global_: torch.Tensor | None
    elements: torch.Tensor


def quantize_blocks(
    x: torch.Tensor,
    elem: str | Format = "e2m1",
    scale: str | Format = "ue4m3",
    block_size: int | str | None = 16,
    rule: str | ScaleRule = "absmax",
    *,
    prevent_zero: bool = False,
    global_scale: str | None = None,
    global_target: float | None = None,
    axis: int = -1,
    return_scales: bool = False,
    ties: str = "even",
    compute_dtype: str | None = None,
    **rule_options: object,
) -> torch.Tensor | tuple[torch.Tensor, BlockScales]:
    """Quantize-dequantize ``x`` in blocks: elements in ``elem``, one ``scale``-format scale per block.

    ``rule`` is a name from :data:`common.scaling.RULES` (absmax, prevent_zero, four_over_six, brute_force,
    e8m0_floor, e8m0_rceil); ``prevent_zero`` modifies any rule; ``rule_options`` go to the rule (e.g.
    ``criterion="mae"`` or ``e8m0_candidates="floor_ceil"`` for four_over_six). ``ties`` (``"even"`` or
    ``"down"``) and ``compute_dtype`` (None or ``"float32"``, ``"bfloat16"``) choose the numerics conventions
    (module docstring). Returns a tensor of ``x``'s shape and dtype, and with ``return_scales=True`` also the
    :class:`BlockScales`. Geometry, global scales and non-finite input: see the module docstring.
    """
    elem_fmt, scale_fmt = get_format(elem), get_format(scale)
    scale_rule = get_rule(rule)
    arithmetic = Arithmetic.of(ties, compute_dtype)
    check_block_geometry(block_size, global_scale, global_target)
    if isinstance(x, torch.Tensor) and x.dim() and not -x.dim() <= axis < x.dim():
        raise ValueError(f"axis {axis} is out of range for a tensor of shape {tuple(x.shape)}")
    if global_scale == "slice" and isinstance(x, torch.Tensor) and x.dim() >= 2 and axis % x.dim() == 0:
        raise ValueError(f"global_scale='slice' scales each index of dim 0 and needs blocks along another axis, got "
                         f"axis {axis} of a tensor of shape {tuple(x.shape)}")
    x32 = arithmetic.op(as_float32(x))
    if x32.numel() == 0:
        empty = x.clone()
        return (empty, BlockScales(torch.empty(0, device=x.device), None, empty.float())) if return_scales else empty
    moved = x32.movedim(axis, -1) if x32.dim() else x32.reshape(1)
    rows_shape, length = moved.shape[:-1], moved.shape[-1]
    if block_size == "row":
        block_size = length
    size = moved.numel() if block_size is None else block_size
    n_per_row = -(-length // size) if length else 0
    padded_length = n_per_row * size
    if block_size is None:
        blocks = moved.reshape(1, -1)
    else:
        rows = moved.reshape(-1, length)
        if padded_length != length:
            rows = torch.nn.functional.pad(rows, (0, padded_length - length))
        blocks = rows.reshape(-1, size)

    g = _global_scale(moved, global_scale, scale_rule, scale_fmt, elem_fmt, global_target, arithmetic)
    rule_options = {**rule_options, "ties": ties, "compute_dtype": compute_dtype}
    out = torch.empty_like(blocks)
    elements = torch.empty_like(blocks) if return_scales else None
    scales = torch.empty(blocks.shape[0], 1, dtype=torch.float32, device=blocks.device)
    chunk_size = chunk_elements(blocks.device)
    blocks_per_chunk = max(1, chunk_size // max(size, 1))
    g_per_block = None if g is None else g.reshape(-1, 1).expand(-1, n_per_row).reshape(-1, 1)
    for start in range(0, blocks.shape[0], blocks_per_chunk):
        stop = start + blocks_per_chunk
        chunk = blocks[start:stop]
        g_chunk = None if g is None else g if global_scale == "tensor" else g_per_block[start:stop]
        if g_chunk is not None:
            chunk = arithmetic.op(chunk / g_chunk)
        if scale_rule.select_with_values is not None:
            s, dq = scale_rule.select_with_values(chunk, scale_fmt, elem_fmt, prevent_zero=prevent_zero,
                                                  **rule_options)
            parts = [(slice(None), dq)]
        else:
            s = scale_rule.select(chunk, scale_fmt, elem_fmt, prevent_zero=prevent_zero, **rule_options)
            # one part unless a single block is longer than a chunk; a generator keeps one part alive at a time
            parts = ((slice(col, col + chunk_size),
                      dequantize_blocks(chunk[:, col : col + chunk_size], s, elem_fmt, ties=ties,
                                        compute_dtype=compute_dtype, scale_fmt=scale_fmt))
                     for col in range(0, size, chunk_size))
        for cols, dq in parts:
            if elements is not None:  # q * s is exact (few significand bits), so dq / s gives q back exactly
                elements[start:stop, cols] = (dq / s.masked_fill(s == 0, 1.0)).masked_fill_((s == 0).expand_as(dq), 0.0)
            out[start:stop, cols] = arithmetic.op(dq if g_chunk is None else dq.mul_(g_chunk))
        scales[start:stop] = s

    result = _restore_layout(out, moved.shape, padded_length, length, block_size, axis, x32.dim())
    result = result.to(x.dtype)
    if not return_scales:
        return result
    block_scales = scales.reshape(*rows_shape, n_per_row) if block_size is not None else scales.reshape(1)
    global_out = None if g is None else (g.reshape(()) if global_scale == "tensor" else g.reshape(*rows_shape, 1))
    element_values = _restore_layout(elements, moved.shape, padded_length, length, block_size, axis, x32.dim())
    return result, BlockScales(block_scales, global_out, element_values)


def _restore_layout(blocks: torch.Tensor, moved_shape: torch.Size, padded_length: int, length: int,
                    block_size: int | None, axis: int, ndim: int) -> torch.Tensor:
    """Blocks back to the input's layout: drop padding, move the block axis back, make contiguous."""
    if block_size is None:
        result = blocks.reshape(moved_shape)
    else:
        result = blocks.reshape(-1, padded_length)[:, :length].reshape(moved_shape)
    return (result.movedim(-1, axis) if ndim else result.reshape(())).contiguous()


def _global_scale(moved: torch.Tensor, mode: str | None, rule: ScaleRule, scale_fmt: Format,
                  elem_fmt: Format, target: float | None, arithmetic: Arithmetic) -> torch.Tensor | None:
    """``g = amax / target`` per tensor (shape ``(1, 1)``), per row (``(rows, 1)``) or per dim-0 slice (repeated on
    the slice's rows: ``(rows, 1)``), ``target = top * R`` by default, rounded as ``arithmetic`` says; see module
    docstring. ``moved`` has the block axis last and dim 0 in place (a slice needs blocks off dim 0)."""
    if mode is None:
        return None
    finite_abs = moved.abs().nan_to_num_(nan=0.0, posinf=0.0)
    if mode == "tensor":
        amax = finite_abs.amax()
    elif mode == "slice" and moved.dim() >= 2:
        rows_per_slice = finite_abs[0].numel() // moved.shape[-1]
        amax = finite_abs.reshape(moved.shape[0], -1).amax(dim=-1).repeat_interleave(rows_per_slice)
    else:
        amax = finite_abs.reshape(-1, moved.shape[-1]).amax(dim=-1)
    if target is None:
        target = elem_fmt.max * rule.global_range(scale_fmt, elem_fmt)
    g = arithmetic.op(divide(amax.reshape(-1, 1), target))
    return torch.where(g > 0, g, 1.0)
