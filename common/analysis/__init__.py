"""Analyses shared by the papers: Monte Carlo block-quantization error, weight studies, Hessian spectra (SLQ), and
the block-size and scale advice on a model's weights (``python -m common.analysis advise``)."""

from common.lazy import lazy_exports

from .gaps import gap_inverts
from .observer_study import amax_trace, observer_study, run_observer, saturation_metrics, spike_steps

# the gap and observer studies above (numbers); the analyses of tensors and models (torch) on first use
__getattr__, __dir__, _LAZY = lazy_exports(__name__, {
    "advice": ("SCALE_OPTIONS", "ScaleOption", "advise", "advise_weights", "parse_block_sizes", "write_advice"),
    "hessian": ("hessian_vector_product", "lanczos", "model_hessian_spectrum", "slq_density"),
    "mse": ("block_mse", "block_stats", "mse_sweep", "sigma_grid", "standard_normal"),
    "weights": ("fit_sigma", "linear_weights", "tensor_block_mse", "weight_study"),
})

__all__ = ["amax_trace", "gap_inverts", "observer_study", "run_observer", "saturation_metrics", "spike_steps", *_LAZY]
