"""Inputs shared by the block-quantization tests of every device (tests/scaling, tests/gpu)."""

import torch


def edge_blocks(dtype: torch.dtype) -> torch.Tensor:
    """A (96, 100) matrix (100 is no multiple of any block size: ragged last blocks): Gaussian rows from 2^-30 to
    2^20, integer rows (exact ties between 4/6 candidates), and rows with zeros, a NaN, an Inf, subnormals, one
    large value among tiny ones, equal values."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(96, 100, generator=g) * torch.exp2(torch.linspace(-30, 20, 96)).unsqueeze(1)
    x[10:20] = (x[10:20] / x[10:20].abs().amax(dim=1, keepdim=True) * 12).round()
    x[0] = 0.0
    x[1, 3] = float("nan")
    x[2, 40] = float("inf")
    x[3, 70] = float("-inf")
    x[4] = torch.linspace(-1, 1, 100) * 2.0**-140
    x[5] = 1e-30
    x[5, 7] = 1e4
    x[6] = 3.0
    x[7, ::2] = -0.0
    return x.to(dtype)
