"""Analyses shared by the papers: Monte Carlo block-quantization error (and, later, Hessian spectra)."""

from .mse import block_mse, mse_sweep, sigma_grid

__all__ = ["block_mse", "mse_sweep", "sigma_grid"]
