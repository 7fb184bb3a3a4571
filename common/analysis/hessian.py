"""The Hessian spectral density by stochastic Lanczos quadrature (SLQ), as the WinQ paper measures it (Li, Liu et
al. 2026, ``../shared/papers/winq.md``: 20 probes, 50 Lanczos steps, Gaussian kernel sigma 1e-3, a 400-point grid,
Hessian-vector products by double backprop over the linear weights).

Sources: Ubaru, Chen & Saad, "Fast estimation of tr(f(A)) via stochastic Lanczos quadrature", SIAM J. Matrix Anal.
Appl. 38(4), 2017; Ghorbani, Krishnan & Xiao, "An investigation into neural net optimization via Hessian eigenvalue
density", ICML 2019. For a symmetric ``H`` of size ``n`` with eigenpairs ``(lambda_i, u_i)`` the spectral density
``phi(t) = (1/n) sum_i delta(t - lambda_i)`` is estimated from random unit vectors ``v``: ``E[(u_i . v)^2] = 1/n``,
and ``m`` Lanczos steps from ``v`` give the tridiagonal ``T = U diag(theta) U^T`` whose Gauss quadrature (nodes
``theta_k``, weights ``tau_k = U[0, k]^2``, ``sum_k tau_k = 1``) integrates polynomials of degree ``< 2m`` against
``sum_i (u_i . v)^2 delta(t - lambda_i)`` exactly. Averaging over probes and smoothing every node with a Gaussian
gives ``phi(t) ~ (1/P) sum_p sum_k tau_pk N(t; theta_pk, sigma^2)``.

* :func:`hessian_vector_product` is ``v -> H v`` for the loss Hessian over chosen parameters (double backprop).
* :func:`lanczos` is the ``m``-step Lanczos tridiagonalisation of any symmetric ``matvec``.
* :func:`slq_density` is the density on a grid, the quadrature nodes and weights per probe, and the mass
  fractions WinQ reports (near zero, negative, positive).
* :func:`model_hessian_spectrum` does both for a model's linear weights.

Conventions, checked against the authors' notebook ``notebooks/eval_model_hessian_spectrum.ipynb`` of
``facebookresearch/WinQ`` and PyHessian's ``density_generate``:

* The kernel width ``sigma`` is the standard deviation in the eigenvalues' own (absolute) units; it is not
  scaled by the largest eigenvalue. The authors' ``slq_density`` evaluates ``w exp(-((t - theta) / sigma)^2 / 2)
  / (sqrt(2 pi) sigma)`` with ``sigma = 1e-3`` on the raw Ritz values; PyHessian is absolute too (its kernel
  variance is ``sigma_squared * max(1, lambda_max - lambda_min)``). At LLM scale (``|lambda|`` up to ~10^3) a
  400-point grid spaced far wider than ``sigma`` undersamples the kernels: ``density_mass`` (the trapezoid
  integral over the grid) then falls short of 1, while ``nodes``/``weights`` and the mass fractions are exact
  quadrature quantities, independent of ``sigma`` and the grid, from which any other smoothing can be redone.
* Start vectors are Gaussian ``N(0, I)`` normalised to unit length (uniform on the sphere), as in the authors'
  code; the paper's near-zero threshold is absolute (its text: eigenvalues in ``[-1e-3, 1e-3]`` count as zero;
  the notebook that computes the fraction uses ``|theta| < 1.5e-3``). The default here is relative,
  ``near_zero * max |theta|`` (scale-free, comparable across bit widths whose spectra shrink);
  ``near_zero_abs=1e-3`` gives the paper's.
* Lanczos uses full reorthogonalisation by default (the authors' uses the plain three-term recurrence, whose
  lost orthogonality duplicates converged Ritz values); ``reorthogonalize=False`` is theirs, for models whose
  ``steps x dim`` basis does not fit in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize

from common.progress import progress
from common.select import embedding_ids

GRID_PAD_FRACTION = 0.05  # grid padding beyond the extreme nodes, as a fraction of their range (authors' code)
GRID_PAD_SIGMAS = 5.0  # ... and at least this many kernel widths, so a narrow spectrum's tails stay on the grid


def hessian_vector_product(loss_fn: Callable[[], Tensor], params: Sequence[Tensor]) -> Callable[[Tensor], Tensor]:
    """``hvp(v) = H v``, ``H = d^2 L / d theta^2`` the Hessian of the scalar ``L = loss_fn()`` over ``params``
    flattened and concatenated in order (``theta`` of length ``dim = sum(p.numel())``).

    Double backprop (Pearlmutter 1994): ``g = dL/dtheta`` with ``create_graph=True``, then ``H v = d(g . v)/dtheta``,
    computed as the vector-Jacobian product of ``g`` with ``v`` (``torch.autograd.grad(g, params, v)``; ``H`` is
    symmetric, so ``J_g^T v = H v``).

    The loss is evaluated once, here, and its gradient graph is reused by every call with ``retain_graph=True``:
    one backward pass per product instead of a forward and two backwards, and every product sees the same ``H``
    (Lanczos needs a fixed operator; a forward with fresh noise, e.g. WinQ's training-mode weight noise or
    dropout, would change ``H`` between calls: its one realisation is frozen here). The graph lives as long as
    the returned function. ``loss_fn`` runs under ``torch.enable_grad()``.

    ``v``: a 1-D tensor of length ``dim`` (any float dtype and device; it is cast to each parameter's dtype and
    device, the product is returned in ``v``'s). Parameters whose gradient does not depend on ``params`` (the
    loss is linear in them) have a zero Hessian block.

    ValueError: empty ``params``, a parameter that does not require grad, one given twice, one the loss does not
    reach, a loss that is not a scalar; from ``hvp``, a ``v`` of the wrong shape.
    """
    params = list(params)
    if not params:
        raise ValueError("params is empty: need at least one tensor to differentiate the loss by")
    seen: set[int] = set()
    for i, p in enumerate(params):
        if not isinstance(p, Tensor) or not p.requires_grad:
            raise ValueError(f"params[{i}] must be a tensor that requires grad, got {_describe(p)}")
        if id(p) in seen:
            raise ValueError(f"params[{i}] (shape {tuple(p.shape)}) is given twice")
        seen.add(id(p))
    with torch.enable_grad():
        loss = loss_fn()
        if not isinstance(loss, Tensor) or loss.numel() != 1:
            raise ValueError(f"loss_fn must return a scalar tensor, got {_describe(loss)}")
        grads = torch.autograd.grad(loss.reshape(()), params, create_graph=True, allow_unused=True)
    for i, (g, p) in enumerate(zip(grads, params, strict=True)):
        if g is None:
            raise ValueError(f"params[{i}] (shape {tuple(p.shape)}) does not reach the loss")
    live = [i for i, g in enumerate(grads) if g.requires_grad]
    sizes = [p.numel() for p in params]
    dim = sum(sizes)

    def hvp(v: Tensor) -> Tensor:
        if not isinstance(v, Tensor) or v.shape != (dim,):
            raise ValueError(f"v must be a 1-D tensor of length dim = {dim}, got {_describe(v)}")
        if not live:
            return torch.zeros_like(v)
        pieces = v.detach().split(sizes)
        products = torch.autograd.grad([grads[i] for i in live], params,
                                       grad_outputs=[pieces[i].reshape(params[i].shape).to(grads[i]) for i in live],
                                       retain_graph=True, allow_unused=True)
        flat = [(torch.zeros_like(p) if h is None else h).reshape(-1) for h, p in zip(products, params, strict=True)]
        return torch.cat([f.to(dtype=v.dtype, device=v.device) for f in flat])

    return hvp


def lanczos(matvec: Callable[[Tensor], Tensor], dim: int, steps: int, generator: torch.Generator,
            dtype: torch.dtype = torch.float64, *, tol: float = 1e-10,
            reorthogonalize: bool = True) -> tuple[Tensor, Tensor]:
    """``m``-step Lanczos tridiagonalisation of the symmetric operator ``matvec`` (``dim x dim``): the diagonal
    ``alpha`` (length ``k``) and off-diagonal ``beta`` (length ``k - 1``) of ``T = Q^T A Q``, ``k <= m``.

    Start: ``q_1 = z / ||z||``, ``z ~ N(0, I_dim)`` drawn with ``generator`` on its device, where the basis lives
    (in ``dtype``). Step ``j``: ``w = A q_j``, ``alpha_j = q_j . w``, ``w -= alpha_j q_j + beta_{j-1} q_{j-1}``;
    with ``reorthogonalize`` (default) ``w -= Q_j (Q_j^T w)`` twice (classical Gram-Schmidt, repeated: full
    reorthogonalisation against every previous ``q``, memory ``m x dim``); ``beta_j = ||w||``,
    ``q_{j+1} = w / beta_j``. Without it only the last two vectors are kept (memory ``3 x dim``); orthogonality is
    then lost as Ritz values converge and converged ones reappear as copies (their quadrature weights split).

    ``m = min(steps, dim)`` (a Krylov space has at most ``dim`` dimensions). Breakdown: when ``beta_j <= tol *
    s_j``, with ``s_j = max(|alpha_i|, beta_i : i <= j)`` (a lower bound on ``||A||``, so the test is relative),
    the Krylov space is invariant and Lanczos stops with ``k = j``: ``T`` is shorter and its eigenvalues are
    exact eigenvalues of ``A`` (a start vector generic in an ``A`` with ``r`` distinct eigenvalues gives
    ``k = r``). Returns float64 CPU tensors.

    ValueError: ``dim``/``steps`` not an integer >= 1, a negative ``tol``, a non-float ``dtype``, ``matvec``
    returning a shape other than ``(dim,)`` or non-finite values.
    """
    dim = _int_at_least("dim", dim, 1)
    steps = _int_at_least("steps", steps, 1)
    tol = _finite_number("tol", tol, 0.0, inclusive=True)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise ValueError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    m = min(steps, dim)
    device = generator.device
    q = torch.randn(dim, generator=generator, dtype=dtype, device=device)
    q /= torch.linalg.vector_norm(q)
    basis = torch.empty((m, dim), dtype=dtype, device=device) if reorthogonalize else None
    q_prev: Tensor | None = None
    alphas: list[float] = []
    betas: list[float] = []
    scale = 0.0
    for j in range(m):
        if basis is not None:
            basis[j] = q
        w = _apply(matvec, q, dim, j)
        alpha = float(q @ w)
        alphas.append(alpha)
        scale = max(scale, abs(alpha))
        if j == m - 1:
            break
        w = w - alpha * q
        if q_prev is not None:
            w = w - betas[-1] * q_prev
        if basis is not None:
            for _ in range(2):
                done = basis[: j + 1]
                w = w - done.T @ (done @ w)
        beta = float(torch.linalg.vector_norm(w))
        if beta <= tol * scale:
            break
        scale = max(scale, beta)
        betas.append(beta)
        q_prev, q = q, w / beta
    return torch.tensor(alphas, dtype=torch.float64), torch.tensor(betas, dtype=torch.float64)


def slq_density(matvec: Callable[[Tensor], Tensor], dim: int, *, probes: int = 20, steps: int = 50,
                sigma: float = 1e-3, grid: int = 400, seed: int = 0,
                grid_range: tuple[float, float] | None = None, near_zero: float = 0.01,
                near_zero_abs: float | None = None, reorthogonalize: bool = True,
                device: str | torch.device = "cpu") -> dict[str, Any]:
    """The spectral density of the symmetric ``dim x dim`` operator ``matvec`` by stochastic Lanczos quadrature
    (module docstring), with WinQ's defaults (20 probes, 50 steps, sigma 1e-3, 400 grid points).

    For each probe ``p = 1 .. probes``: ``T_p`` = :func:`lanczos` (``steps``, float64 basis on ``device``, Gaussian
    start vectors from one ``torch.Generator`` seeded with ``seed``, drawn probe after probe), ``T_p = U diag(theta)
    U^T`` (``numpy.linalg.eigh``); nodes ``theta_pk``, weights ``tau_pk = U[0, k]^2`` (``sum_k tau_pk = 1``).

    * ``density[j] = (1/probes) sum_p sum_k tau_pk exp(-(t_j - theta_pk)^2 / (2 sigma^2)) / (sqrt(2 pi) sigma)``
      on ``grid`` equally spaced points ``t_j`` spanning ``[min theta - pad, max theta + pad]`` over all probes,
      ``pad = max(0.05 (max theta - min theta), 5 sigma)`` (the authors' 5% margin, at least 5 kernel widths), or
      exactly ``grid_range = (lo, hi)``. ``sigma`` is absolute (eigenvalue units, module docstring).
    * ``density_mass``: the trapezoid integral of ``density`` over the grid, 1 up to the kernel tails outside it
      when the spacing is below ``sigma``; smaller when the grid undersamples the kernels.
    * ``largest_abs_eigenvalue = max |theta_pk|`` (Ritz values lie in ``[lambda_min, lambda_max]``, the extreme
      ones converge first: a lower bound on the spectral radius, tight after a few dozen steps).
    * With ``c = near_zero * largest_abs_eigenvalue`` (default ``near_zero = 0.01``), or ``c = near_zero_abs`` when
      given (``1e-3`` is the paper's absolute threshold): ``near_zero_mass = (1/probes) sum_p sum_{|theta_pk| <= c}
      tau_pk``, ``negative_mass`` the same over ``theta_pk < -c``, ``positive_mass`` over ``theta_pk > c`` (the three
      sum to 1): estimates of the fraction of eigenvalues in each range.

    Returns plain floats and lists (JSON-serializable): ``grid``, ``density``, ``density_mass``, ``nodes`` and
    ``weights`` (one list per probe, ``k_p <= steps`` entries: shorter on breakdown), ``largest_abs_eigenvalue``,
    ``near_zero_threshold`` (``c``), ``near_zero_mass``, ``negative_mass``, ``positive_mass``, ``probes``,
    ``steps``, ``sigma``, ``seed``, ``dim``.

    ValueError naming the value: ``probes``, ``steps``, ``grid`` (>= 2), ``dim`` not integers at least 1, ``seed``
    not an integer >= 0, ``sigma`` not finite and > 0, ``near_zero`` not in ``[0, 1)``, a negative or non-finite
    ``near_zero_abs``, ``grid_range`` not finite with ``lo < hi``, and ``matvec`` returning a shape other than
    ``(dim,)`` (a ``dim`` that does not match the operator).
    """
    dim = _int_at_least("dim", dim, 1)
    probes = _int_at_least("probes", probes, 1)
    steps = _int_at_least("steps", steps, 1)
    grid = _int_at_least("grid", grid, 2)
    seed = _int_at_least("seed", seed, 0)
    sigma = _finite_number("sigma", sigma, 0.0, inclusive=False)
    near_zero = _finite_number("near_zero", near_zero, 0.0, inclusive=True)
    if near_zero >= 1:
        raise ValueError(f"near_zero must be a fraction of the largest |eigenvalue| in [0, 1), got {near_zero!r}")
    if near_zero_abs is not None:
        near_zero_abs = _finite_number("near_zero_abs", near_zero_abs, 0.0, inclusive=True)
    if grid_range is not None:
        grid_range = _check_range(grid_range)

    generator = torch.Generator(device=device).manual_seed(seed)
    nodes: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for _ in progress(range(probes), "SLQ probes", total=probes, unit="probe"):
        alpha, beta = lanczos(matvec, dim, steps, generator, torch.float64, reorthogonalize=reorthogonalize)
        tridiagonal = np.diag(alpha.numpy()) + np.diag(beta.numpy(), 1) + np.diag(beta.numpy(), -1)
        theta, vectors = np.linalg.eigh(tridiagonal)
        nodes.append(theta)
        weights.append(vectors[0] ** 2)

    theta_all = np.concatenate(nodes)
    tau_all = np.concatenate(weights) / probes
    if grid_range is None:
        low, high = float(theta_all.min()), float(theta_all.max())
        pad = max(GRID_PAD_FRACTION * (high - low), GRID_PAD_SIGMAS * sigma)
        grid_range = (low - pad, high + pad)
    points = np.linspace(grid_range[0], grid_range[1], grid)
    kernels = np.exp(-0.5 * ((points[:, None] - theta_all[None, :]) / sigma) ** 2) / (math.sqrt(2 * math.pi) * sigma)
    density = kernels @ tau_all

    largest = float(np.abs(theta_all).max())
    threshold = near_zero * largest if near_zero_abs is None else near_zero_abs
    near = float(tau_all[np.abs(theta_all) <= threshold].sum())
    negative = float(tau_all[theta_all < -threshold].sum())
    return {
        "grid": points.tolist(),
        "density": density.tolist(),
        "density_mass": float(np.trapezoid(density, points)),
        "nodes": [theta.tolist() for theta in nodes],
        "weights": [tau.tolist() for tau in weights],
        "largest_abs_eigenvalue": largest,
        "near_zero_threshold": float(threshold),
        "near_zero_mass": near,
        "negative_mass": negative,
        "positive_mass": float(tau_all[theta_all > threshold].sum()),
        "probes": probes,
        "steps": steps,
        "sigma": sigma,
        "seed": seed,
        "dim": dim,
    }


def model_hessian_spectrum(model: nn.Module, loss_fn: Callable[[], Tensor], params: Sequence[Tensor] | None = None,
                           **slq_options: Any) -> dict[str, Any]:
    """:func:`slq_density` of the Hessian of ``loss_fn()`` over ``params`` of ``model`` (:func:`hessian_vector_product`,
    ``dim = sum(p.numel())``), plus ``parameters``: their names in ``model.named_parameters()``, in order.

    ``params`` defaults to the weight of every ``nn.Linear`` except the input and output embeddings (``lm_head``
    excluded, the selection of :func:`common.analysis.linear_weights`), in module order: WinQ's "all linear
    weights", the quantized ones. A fake-quantized layer (``common.quantizers.attach_fake_quant``'s parametrization)
    contributes its latent weight ``parametrizations.weight.original``: the Hessian is then over the weights the
    optimizer updates, through the straight-through estimator. ``loss_fn`` closes over the model and one batch;
    the model's mode is the caller's (eval mode for a loss without dropout or training noise).

    ValueError: a model without such layers, a parameter that is not one of ``model``'s, and everything
    :func:`hessian_vector_product` and :func:`slq_density` reject.
    """
    names = {id(p): name for name, p in model.named_parameters()}
    if params is None:
        skip = embedding_ids(model)
        chosen = [_latent_weight(module) for module in model.modules()
                  if isinstance(module, nn.Linear) and id(module) not in skip]
        if not chosen:
            raise ValueError(f"{type(model).__name__} has no nn.Linear layer outside its embeddings")
    else:
        chosen = list(params)
        for i, p in enumerate(chosen):
            if id(p) not in names:
                raise ValueError(f"params[{i}] ({_describe(p)}) is not a parameter of {type(model).__name__}")
    hvp = hessian_vector_product(loss_fn, chosen)
    dim = sum(p.numel() for p in chosen)
    return {"parameters": [names[id(p)] for p in chosen], **slq_density(hvp, dim, **slq_options)}


def _latent_weight(module: nn.Linear) -> Tensor:
    """The weight parameter the optimizer updates: the parametrization's ``original`` where there is one."""
    if parametrize.is_parametrized(module, "weight"):
        return module.parametrizations.weight.original
    return module.weight


def _apply(matvec: Callable[[Tensor], Tensor], q: Tensor, dim: int, step: int) -> Tensor:
    """``matvec(q)`` checked (shape ``(dim,)``, finite) and cast to ``q``'s dtype and device."""
    w = matvec(q)
    if not isinstance(w, Tensor) or w.shape != (dim,):
        raise ValueError(f"matvec returned {_describe(w)} for a vector of length dim = {dim} (dim mismatch?)")
    w = w.detach().to(dtype=q.dtype, device=q.device)
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"matvec returned non-finite values at Lanczos step {step}")
    return w


def _describe(value: object) -> str:
    if isinstance(value, Tensor):
        return f"a tensor of shape {tuple(value.shape)}, requires_grad={value.requires_grad}"
    return f"{type(value).__name__} {value!r}"


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _finite_number(name: str, value: object, low: float, *, inclusive: bool) -> float:
    ok = (not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
          and (value >= low if inclusive else value > low))
    if not ok:
        raise ValueError(f"{name} must be a finite number {'>=' if inclusive else '>'} {low:g}, got {value!r}")
    return float(value)


def _check_range(grid_range: object) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in grid_range)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(f"grid_range must be a pair (lo, hi) of numbers, got {grid_range!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"grid_range must be finite with lo < hi, got {grid_range!r}")
    return low, high
