"""Analyses shared by the papers: Monte Carlo block-quantization error, weight studies, Hessian spectra (SLQ)."""

from .gaps import gap_inverts
from .hessian import hessian_vector_product, lanczos, model_hessian_spectrum, slq_density
from .mse import block_mse, block_stats, mse_sweep, sigma_grid, standard_normal
from .observer_study import amax_trace, observer_study, run_observer, saturation_metrics, spike_steps
from .weights import fit_sigma, linear_weights, tensor_block_mse, weight_study

__all__ = [
    "amax_trace",
    "block_mse",
    "block_stats",
    "fit_sigma",
    "gap_inverts",
    "hessian_vector_product",
    "lanczos",
    "linear_weights",
    "model_hessian_spectrum",
    "mse_sweep",
    "observer_study",
    "run_observer",
    "saturation_metrics",
    "sigma_grid",
    "slq_density",
    "spike_steps",
    "standard_normal",
    "tensor_block_mse",
    "weight_study",
]
