"""Analyses shared by the papers: Monte Carlo block-quantization error (and, later, Hessian spectra)."""

from .mse import block_mse, block_stats, mse_sweep, sigma_grid, standard_normal

__all__ = ["block_mse", "block_stats", "mse_sweep", "sigma_grid", "standard_normal"]
