"""Analytic expected MSE of block (microscaling) quantization with quantized scales (numerical integration).

>>> from common.theory import block_mse, crossover, zero_block_probability
>>> round(zero_block_probability(0.005, 4), 2)
0.33
>>> sorted(block_mse(0.005, 16))
['max_element', 'non_max', 'total', 'zero_blocks']
>>> round(crossover(16, model="paper"), 5), round(crossover(16), 5)  # the authors' model, ours
(0.01583, 0.01614)
"""

from .block_mse import block_mse, zero_block_probability
from .crossover import best_block_size, crossover
from .distributions import DISTRIBUTIONS, cell_error, get_distribution
from .grids import THEORY_RULES, element_cells, quantize_scale, scale_steps, zero_scale_max
from .paper_model import MODELS, PAPER_BLOCK_SIZES, paper_sigmas

__all__ = [
    "DISTRIBUTIONS",
    "MODELS",
    "PAPER_BLOCK_SIZES",
    "THEORY_RULES",
    "best_block_size",
    "block_mse",
    "cell_error",
    "crossover",
    "element_cells",
    "get_distribution",
    "paper_sigmas",
    "quantize_scale",
    "scale_steps",
    "zero_block_probability",
    "zero_scale_max",
]
