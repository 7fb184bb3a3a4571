"""The authors' analytic model of the block MSE (*Is finer better?*, Fasoli et al., ICLR 2026): ``model="paper"``.

Source: ``iclr2016codeshare/microscaling``, ``modelling_errors_from_theory_fp8_scales.py`` at commit
``3c3dae1e3ad4140a4628bd69dc96d1c179839ca8`` (read, not copied; lines of that file):

* grid (lines 19-20): ``sigma`` = 1e-4, then 50 points ``linspace(1e-3, 0.05)``; block sizes 2-256 (line 13);
* E2M1 element levels and their Voronoi edges, clipped to ``[-6, 6]`` (lines 24-25);
* scale levels (lines 33-49): the positive values of an FP8 ``e``/``m`` format (E4M3: up to 448, the all-ones code
  skipped; ``e=5, m=3``: UE5M3 up to 114688, as :mod:`common.formats`' ``ue5m3``; ``2^(1-bias)`` is listed twice,
  as the last subnormal and the first normal, a bin of width zero); nearest-level bins whose first edge is half
  the smallest scale and whose last edge is the largest scale (lines 52-53);
* the block max's density ``f_max(m) = n g(m) G(m)^(n-1)`` (lines 61-68), its mass in each scale bin (lines 77-82);
* three terms, summed over the scale levels ``v_k`` with bins ``[a_k, b_k]`` of ``M / 6`` (lines 159-185):

  - max element (lines 101-121): ``(1/n) int_{6 a_k}^{6 b_k} f_max(m) (m - v_k Q_E(m / v_k))^2 dm``;
  - non-max elements (lines 124-151): ``P(s = v_k) ((n-1)/n) E[e_{v_k}(X)^2 | |X| <= 6 v_k]`` with
    ``e_s(x) = x - s Q_E(x / s)``: every other element is Normal **truncated at +-6 s, s the quantized scale**;
  - zero-scale blocks (lines 85-98): ``P(M < 6 v_1 / 2) E[X^2 | |X| < 6 v_1 / 2]``.

With ``G``, ``g`` the CDF and density of ``|X|`` and ``s(m)`` the block scale of a block max ``m``, the model is

    ``MSE_paper = zero_blocks + max_element + (n-1) int_{s(m)>0} g(m) G(m)^(n-1) C(s(m)) dm``,
    ``C(s) = E[e_s(X)^2 | |X| <= top s] = H_s(top s) / G(top s)``,  ``H_s(m) = int_0^m g(x) e_s(x)^2 dx``,

where the exact model (:mod:`.block_mse`) has ``H_s(m) / G(m)`` in place of ``C(s(m))``: given the block max ``M``,
the other ``n - 1`` elements are iid ``|X|`` truncated at ``M``, not at ``top s(M)``. The two agree where
``top s(M)`` is close to ``M``; they part where the scale rounds far from ``M / top`` (UE4M3's subnormal scales,
sigma ~ 0.005-0.01 for E2M1): there ``top s < M`` drops the elements in ``(top s, M]`` (each of which clips to
``top s``) and ``top s > M`` admits elements the block cannot hold. The zero-block and max-element terms are the
same integrals in both models. Their script covers Normal data with abs-max scales; ``model="paper"`` applies the
same truncation wherever :func:`common.theory.block_mse` applies (other distributions, prevent_zero, a global scale).

Computation: :func:`common.theory.block_mse` integrates ``C(s(m))`` over the same sub-intervals and Gauss-Legendre
nodes as the exact non-max term; ``C(s)`` is closed form per scale value (:func:`truncated_error`). This equals
their script, whose every integral is ``scipy.integrate.quad`` (``limit=100``), to the accuracy of their quad: on
96 points of their grid (all 8 block sizes, 12 sigmas) the non-max and zero-block terms agree to 1e-13 and the
total to 5e-5, the error of their max-element quad, which runs over each scale bin without the element-rounding
jumps as breakpoints (lines 104-109); an oracle split at the jumps agrees with ours to 1e-9
(tests/theory/test_paper_model.py). One difference is deliberate: their last scale bin ends at the largest scale,
so blocks with ``M > top v_max`` (a saturated scale) drop out of all three terms; ours keep them with the
saturated scale, as the quantizer does (UE4M3, E2M1: ``M > 2688``, probability below 1e-300 for sigma < 70).
"""

from __future__ import annotations

import numpy as np

from .distributions import Distribution, cell_error
from .grids import ElementCells

MODELS = ("exact", "paper")
SOURCE = ("iclr2016codeshare/microscaling modelling_errors_from_theory_fp8_scales.py "
          "@3c3dae1e3ad4140a4628bd69dc96d1c179839ca8")
# their sigma grid (lines 19-20): 1e-4, then 50 points from 1e-3 to 0.05
PAPER_SIGMA_FIRST = 1e-4
PAPER_SIGMA_LINEAR = (1e-3, 0.05, 50)
PAPER_BLOCK_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)  # line 13


def check_model(model: str) -> str:
    """``model`` if it is one of :data:`MODELS`, else a ValueError naming it."""
    if not isinstance(model, str) or model not in MODELS:
        raise ValueError(f"unknown model {model!r}; valid models: {', '.join(MODELS)}")
    return model


def paper_sigmas() -> np.ndarray:
    """The authors' sigma grid: ``1e-4`` followed by ``numpy.linspace(1e-3, 0.05, 50)`` (the same 51 floats)."""
    return np.insert(np.linspace(*PAPER_SIGMA_LINEAR), 0, PAPER_SIGMA_FIRST)


def truncated_error(dist: Distribution, scales: np.ndarray, cells: ElementCells) -> np.ndarray:
    """``C(s) = E[e_s(X)^2 | |X| <= top s]`` for each positive scale ``s`` (data of unit variance): the error of
    every element cell ``[s lower_j, s upper_j]`` (the last one ending at ``s top``, where the truncation cuts it),
    each ``int g(x) (x - s q_j)^2 dx`` in closed form (:func:`.distributions.cell_error`), over ``G(top s)``."""
    s = np.asarray(scales, np.float64)[:, None]
    uppers = np.append(cells.mids, cells.top)
    errors = cell_error(dist, s * cells.lowers, s * uppers, s * cells.q).sum(axis=1)
    return errors / np.exp(dist.log_cdf(cells.top * s[:, 0]))
