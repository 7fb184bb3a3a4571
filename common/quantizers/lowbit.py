"""Low-bit weight QAT with learnable per-row scales (ParetoQ, Liu et al. 2025), the quantizers of WinQ.

Sources: the WinQ fact sheet (``papers/winq``) and ParetoQ's ``models/utils_quant.py`` (``LsqBinaryTernaryExtension``
for 1, 3 and 4 bits, ``StretchedElasticQuant`` for 1.58 and 2 bits; ParetoQ writes ternary as ``num_bits = 0``).

Forward. A weight ``W`` (out x in) has a learnable scale ``alpha`` (out x 1, one per output row), clamped below at
``eps = 1e-5`` (ParetoQ: ``alpha = where(alpha > eps, alpha, eps)``); ``u = W / alpha``, ``w_q = q(u) alpha``::

    bits   q(u)                                                    levels of q            alpha init (per row)
    1      sign(u), sign(0) := +1 (every weight gets a level)      {-1, 1}                mean |W|
    1.58   (round(clamp(u, -c, c) n - shift) + shift) / n,         {-2/3, 0, 2/3}         max |W|
           n = 1.5, shift = 0
    2      same with n = 2, shift = 1/2                            {-3/4, -1/4, 1/4, 3/4} max |W|
    3, 4   clamp(round(u), Qn, Qp), Qn = -2^(b-1), Qp = 2^(b-1)-1   Qn .. Qp               max |W| / Qp

with ``c = 1 - 1e-2`` (the fact sheet's 0.99) and ``round`` half to even (``torch.round``, as ParetoQ). ParetoQ's
``input.sign()`` maps an exactly zero weight to 0, a third level; here it gets ``+alpha``. Ternary:
``|clamp(u)| n <= 1.485`` rounds to -1, 0 or 1, so the levels are ``{-2/3, 0, 2/3} alpha``; 2-bit:
``clamp(u) 2 - 1/2`` lies in ``[-2.48, 1.48]`` and rounds to -2 .. 1, so ``{-3/4, -1/4, 1/4, 3/4} alpha``.

Backward (ParetoQ, LSQ-style). With ``g = dL/dw_q``, the forward's ``u`` and clamped ``alpha``, ``N = W.numel()``::

    small = u < lo,  big = u > hi,  middle = otherwise
    dL/dW     = middle g
    dL/dalpha = sum over the row of  d(u) g / sqrt(N Qp)
    d(u)      = sign(u)                                   1 bit (sign(0) := +1 as in the forward)
              = small l + big h + middle (q(u) - u)        otherwise

    bits     lo, hi      l, h             Qp in the gradient scale
    1        -1, 1       -                1
    1.58     -c, c       -1, 1            1
    2        -c, c       -3/4, 3/4        1
    3, 4     Qn, Qp      Qn, Qp           2^(b-1) - 1

For the stretched quantizers ``l, h = -/+ (n - shift) / n`` and the gradient scale uses ParetoQ's integer ``Qp`` of
its ``num_bits`` (1 for both), as in ParetoQ's ``StretchedElasticQuant`` (so the ternary ``h`` is 1, not its top
level 2/3). The gradient of ``alpha`` reaches the unclamped parameter unchanged (ParetoQ).

Noise injection (WinQ fact sheet): with ``sigma > 0`` every *training* forward (the parametrization module's
``training`` flag, i.e. ``model.train()``) uses ``W + sigma N(0, I)`` and ``alpha + sigma N(0, I)`` (absolute
sigma; the weight noise is drawn first, then the alpha noise, layer by layer in forward order); the STE masks and
``q(u)`` above use these noisy tensors. No noise in eval mode. The draws come from one ``torch.Generator`` owned by
the handle (:class:`NoiseSource`), seeded by :meth:`LowBitHandle.set_noise` and saved in its ``state_dict``.

Hadamard rotation (QuEST-style, ``hadamard=True``): the effective weight is ``Q(W H) H^T`` with ``H`` the
normalized Sylvester Hadamard matrix of size ``in_features`` (:func:`hadamard_matrix`); ``alpha`` is initialised
from and quantizes the rows of ``W H``. So ``y = x H Q(W H)^T``: the layer sees the rotated input (the A8
quantization below acts on the unrotated ``x``).

8-bit activations (``activation_bits=8``, ParetoQ's A8): per token (last dimension) symmetric absmax int8,
``s = max|x| / 127`` (``s = 1`` where the max is 0), ``x_q = clamp(round(x / s), -128, 127) s``, applied by a
forward pre-hook with a straight-through gradient (:func:`common.quantizers.ste_quantize`). It is the PTQ spec
:data:`common.recipes.INT8_PER_TOKEN` (``QuantSpec("int8", "fp32", "row", "absmax")``), so a quantized checkpoint
re-attaches exactly this quantization (:func:`int8_per_token`).

Codes (:func:`lowbit_codes`): every bit width's levels are integer codes of a registered element format times one
float32 scale per row, bit-equal to the forward value ``Q(W)`` (what ``common.ptq`` stores for a trained model)::

    bits   format     codes                              scale per row
    1      binary     sign(u), sign(0) := +1             alpha_c
    1.58   ternary    k = round(clamp(u, -c, c) 1.5)     fl(alpha_c fl(1 / 1.5))
    2      midrise2   2k + 1, k = round(2 clamp(u) - 1/2) alpha_c / 4
    3, 4   int3_tc,   clamp(round(u), Qn, Qp)            alpha_c
           int4_tc

with ``alpha_c = clamp_alpha(alpha)`` and ``u = W / alpha_c``. Exactness: the forward level is ``(k + shift) / n``
in floating point; ternary ``fl(k / 1.5) alpha_c = k fl(fl(1/1.5) alpha_c)`` for ``k`` in ``{-1, 0, 1}``; the 2-bit
level ``(k + 1/2) / 2`` and ``alpha_c / 4`` are exact (powers of two), so ``(2k + 1) (alpha_c / 4)`` and
``((k + 1/2) / 2) alpha_c`` are one rounding of the same real number.

:func:`attach_lowbit` registers the weight quantizer as a ``torch.nn.utils.parametrize`` parametrization whose module
owns ``alpha`` as an ``nn.Parameter``: ``model.parameters()`` yields the latent weight
(``parametrizations.weight.original``) and ``alpha`` (``parametrizations.weight.0.alpha``), so the training loop's
optimizer updates both. Its ``p.dim() >= 2`` rule puts ``alpha`` (out x 1) in the weight-decay group: train with
``weight_decay = 0`` as the paper does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from common.formats.rounding import divide
from common.recipes import INT8_PER_TOKEN, LOWBIT_BITS, LowBitRecipe, QuantRecipe, QuantSpec, check_recipe
from common.scaling import BlockScales
from common.select import linear_modules, select_linears

from .block import quantize_tensor
from .ste import ste_quantize

ALPHA_EPS = 1e-5
STRETCH_CLIP = 1 - 1e-2
LOWBIT_INCLUDE = r"(self_attn\.(q_proj|k_proj|v_proj|o_proj)|mlp\.(gate_proj|up_proj|down_proj))$"
# bits -> (element format of the codes, codes per unit of alpha): level q(u) = code / codes_per_unit
LOWBIT_CODES: dict[float, tuple[str, float]] = {1: ("binary", 1.0), 1.58: ("ternary", 1.5), 2: ("midrise2", 4.0),
                                                3: ("int3_tc", 1.0), 4: ("int4_tc", 1.0)}


@dataclass(frozen=True)
class LowBitSpec:
    """The constants of one bit width (module docstring tables); get one with :func:`lowbit_spec`. The binary
    quantizer's ``d(u)`` is ``sign(u)``: its ``grad_lo, grad_hi`` are ParetoQ's ``Qn, Qp = -1, 1``, unused."""

    bits: float
    family: str  # "binary", "stretched" or "lsq"
    lo: float  # u < lo: clipped low ("small")
    hi: float  # u > hi: clipped high ("big")
    grad_lo: float  # d(u) on small (l)
    grad_hi: float  # d(u) on big (h)
    grad_qp: int  # gradient scale 1 / sqrt(N grad_qp)
    n: float = 1.0  # stretched: levels per unit
    shift: float = 0.0  # stretched: level offset


def _make_spec(bits: float) -> LowBitSpec:
    if bits == 1:
        return LowBitSpec(bits, "binary", -1.0, 1.0, -1.0, 1.0, 1)
    if bits in (1.58, 2):
        n, shift = (1.5, 0.0) if bits == 1.58 else (2.0, 0.5)
        edge = (n - shift) / n
        return LowBitSpec(bits, "stretched", -STRETCH_CLIP, STRETCH_CLIP, -edge, edge, 1, n, shift)
    qn, qp = -(2 ** (int(bits) - 1)), 2 ** (int(bits) - 1) - 1
    return LowBitSpec(bits, "lsq", float(qn), float(qp), float(qn), float(qp), qp)


_SPECS = {bits: _make_spec(bits) for bits in LOWBIT_BITS}


def lowbit_spec(bits: float) -> LowBitSpec:
    """The :class:`LowBitSpec` of ``bits``; ValueError naming it and :data:`LOWBIT_BITS` for any other value."""
    if isinstance(bits, bool) or not isinstance(bits, int | float) or bits not in _SPECS:
        raise ValueError(f"unknown weight bit width {bits!r}; valid: {', '.join(map(str, LOWBIT_BITS))}")
    return _SPECS[bits]


def clamp_alpha(alpha: torch.Tensor) -> torch.Tensor:
    """``where(alpha > eps, alpha, eps)`` with ``eps = 1e-5`` (ParetoQ's forward)."""
    return torch.where(alpha > ALPHA_EPS, alpha, torch.full_like(alpha, ALPHA_EPS))


def sign_plus(t: torch.Tensor) -> torch.Tensor:
    """``sign(t)`` with ``sign(0) := +1`` (the 1-bit level of a zero weight)."""
    return torch.where(t < 0, -torch.ones_like(t), torch.ones_like(t))


def init_alpha(weight: torch.Tensor, bits: float) -> torch.Tensor:
    """Initial per-row scale, shape (out, 1) (fact sheet): mean|W| (1 bit), max|W| (1.58, 2 bits),
    max|W| / (2^(b-1) - 1) (3, 4 bits)."""
    spec = lowbit_spec(bits)
    magnitude = weight.detach().abs()
    if spec.family == "binary":
        return magnitude.mean(dim=-1, keepdim=True)
    row_max = magnitude.amax(dim=-1, keepdim=True)
    return row_max if spec.family == "stretched" else divide(row_max, spec.grad_qp)


def stretched_index(u: torch.Tensor, spec: LowBitSpec) -> torch.Tensor:
    """The integer ``k = round(clamp(u, -c, c) n - shift)`` of a stretched quantizer (round half to even): -1 .. 1
    for 1.58 bits, -2 .. 1 for 2 bits; the level is ``(k + shift) / n``."""
    return torch.round(torch.clamp(u, -STRETCH_CLIP, STRETCH_CLIP) * spec.n - spec.shift)


def normalized_levels(u: torch.Tensor, bits: float) -> torch.Tensor:
    """``q(u)`` of the module docstring (the level in units of alpha)."""
    spec = lowbit_spec(bits)
    if spec.family == "binary":
        return sign_plus(u)
    if spec.family == "stretched":
        return (stretched_index(u, spec) + spec.shift) / spec.n
    return torch.clamp(torch.round(u), spec.lo, spec.hi)


def lowbit_quantize(weight: torch.Tensor, alpha: torch.Tensor, bits: float) -> torch.Tensor:
    """``w_q = q(W / alpha_c) alpha_c`` with ``alpha_c = clamp_alpha(alpha)`` (the forward value; no autograd)."""
    alpha = clamp_alpha(alpha)
    return normalized_levels(weight / alpha, bits) * alpha


def lowbit_codes(weight: torch.Tensor, alpha: torch.Tensor, bits: float) -> tuple[str, BlockScales]:
    """``(format name, BlockScales)`` of ``Q(W) = lowbit_quantize(weight, alpha, bits)`` as integer codes times one
    scale per row (module docstring table, :data:`LOWBIT_CODES`): ``elements`` holds the codes as values of the
    format's grid (``weight``'s shape and dtype), ``block`` the per-row scale (``alpha``'s (out, 1) shape and dtype),
    ``global_`` None; ``elements * block`` is bit-equal to :func:`lowbit_quantize` (``torch.equal``). No autograd."""
    spec = lowbit_spec(bits)
    fmt, per_unit = LOWBIT_CODES[spec.bits]
    with torch.no_grad():
        alpha = clamp_alpha(alpha.detach())
        u = weight.detach() / alpha
        if spec.family == "binary":
            codes = sign_plus(u)
        elif spec.family == "stretched":  # ternary: k; 2 bits: 2 (k + 1/2) = 2k + 1
            codes = (stretched_index(u, spec) + spec.shift) * (per_unit / spec.n)
        else:
            codes = torch.clamp(torch.round(u), spec.lo, spec.hi)
        # fl(1 / per_unit) in alpha's dtype, as the forward's division by n forms it: 1 / 1.5 rounded, or 1/4 exact
        step = torch.ones((), dtype=alpha.dtype, device=alpha.device) / per_unit
        scale = alpha * step
    return fmt, BlockScales(block=scale, global_=None, elements=codes + 0.0)


def lowbit_grads(weight: torch.Tensor, alpha: torch.Tensor, grad: torch.Tensor,
                 bits: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dL/dW, dL/dalpha)`` of the module docstring for ``grad = dL/dw_q`` (``alpha`` is clamped here)."""
    spec = lowbit_spec(bits)
    alpha = clamp_alpha(alpha)
    u = weight / alpha
    small, big = (u < spec.lo).to(grad.dtype), (u > spec.hi).to(grad.dtype)
    middle = 1.0 - small - big
    if spec.family == "binary":
        slope = sign_plus(u)
    else:
        slope = small * spec.grad_lo + big * spec.grad_hi + middle * (normalized_levels(u, bits) - u)
    grad_scale = 1.0 / math.sqrt(weight.numel() * spec.grad_qp)
    grad_alpha = (slope * grad * grad_scale).sum(dim=-1, keepdim=True)
    return middle * grad, grad_alpha


class LowBitQuantFunction(torch.autograd.Function):
    """:func:`lowbit_quantize` forward, :func:`lowbit_grads` backward."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, alpha: torch.Tensor, bits: float) -> torch.Tensor:
        ctx.save_for_backward(weight, alpha)
        ctx.bits = bits
        return lowbit_quantize(weight, alpha, bits)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        weight, alpha = ctx.saved_tensors
        grad_weight, grad_alpha = lowbit_grads(weight, alpha, grad, ctx.bits)
        return grad_weight, grad_alpha, None


def lowbit_ste(weight: torch.Tensor, alpha: torch.Tensor, bits: float) -> torch.Tensor:
    """Differentiable :func:`lowbit_quantize` (:class:`LowBitQuantFunction`)."""
    lowbit_spec(bits)
    return LowBitQuantFunction.apply(weight, alpha, bits)


def hadamard_matrix(size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The normalized Hadamard matrix ``H_size / sqrt(size)`` (Sylvester: ``H_1 = [1]``,
    ``H_2k = [[H_k, H_k], [H_k, -H_k]]``); orthogonal and symmetric. ValueError unless ``size`` is a power of two."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1 or size & (size - 1):
        raise ValueError(f"Hadamard size must be a power of two, got {size!r}")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < size:
        h = torch.cat([torch.cat([h, h], dim=1), torch.cat([h, -h], dim=1)])
    return (h / math.sqrt(size)).to(dtype)


def effective_weight(weight: torch.Tensor, alpha: torch.Tensor, bits: float, hadamard: torch.Tensor | None = None,
                     quantize: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] = lowbit_quantize,
                     ) -> torch.Tensor:
    """``Q(W)``, or ``Q(W H) H^T`` with a Hadamard matrix ``H``; ``quantize`` is :func:`lowbit_quantize` (the value)
    or :func:`lowbit_ste` (differentiable)."""
    if hadamard is None:
        return quantize(weight, alpha, bits)
    return quantize(weight @ hadamard, alpha, bits) @ hadamard.T


def int8_per_token(x: torch.Tensor) -> torch.Tensor:
    """Per-token symmetric absmax int8 (ParetoQ's A8): ``s = max|x| / 127`` over the last dimension (``s = 1`` where
    the max is 0), ``clamp(round(x / s), -128, 127) s`` (round half to even), computed in float32 (a bfloat16 ``x``
    is rounded back; other dtypes are a ValueError).

    It is :func:`common.quantizers.quantize_tensor` with :data:`INT8_PER_TOKEN` (``quantize_blocks`` with one absmax
    block per row): its scale ``fl(max|x| / 127)`` and ``Q_int8(x / s) s`` are the formula's operations; ``|x / s| <=
    127`` up to rounding, so the int8 grid's missing -128 never matters, and an all-zero token (``s = 0`` there,
    quantized as 0) gives the formula's ``round(0 / 1) 1 = 0``."""
    return quantize_tensor(x, INT8_PER_TOKEN)


class NoiseSource:
    """Absolute Gaussian noise ``sigma N(0, I)`` from one ``torch.Generator`` (module docstring).

    The generator is seeded by :meth:`configure` and created on the device of the first tensor it draws for (the
    model may move to a GPU after attaching); later draws use that device and are moved to the tensor's.
    """

    def __init__(self) -> None:
        self.sigma, self.seed = 0.0, 0
        self._generator: torch.Generator | None = None

    def configure(self, sigma: float, seed: int) -> None:
        """Noise ``sigma`` (0 = off) from a fresh generator seeded with ``seed``."""
        if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not 0 <= sigma < math.inf:
            raise ValueError(f"noise sigma must be a finite number >= 0, got {sigma!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"noise seed must be an integer, got {seed!r}")
        self.sigma, self.seed, self._generator = float(sigma), seed, None

    def perturb(self, t: torch.Tensor) -> torch.Tensor:
        """``t + sigma N(0, I)``."""
        if self._generator is None:
            self._generator = torch.Generator(device=t.device).manual_seed(self.seed)
        noise = torch.randn(t.shape, generator=self._generator, device=self._generator.device, dtype=t.dtype)
        return t + self.sigma * noise.to(t.device)

    def state_dict(self) -> dict[str, Any]:
        generator = self._generator
        return {"sigma": self.sigma, "seed": self.seed,
                "device": None if generator is None else str(generator.device),
                "generator": None if generator is None else generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.configure(state["sigma"], state["seed"])
        if state["generator"] is not None:
            self._generator = torch.Generator(device=state["device"])
            self._generator.set_state(state["generator"].cpu())  # a CPU byte tensor, wherever the checkpoint was mapped


class LowBitWeight(nn.Module):
    """The weight parametrization: owns ``alpha`` (and ``hadamard``, a non-persistent buffer or None)."""

    def __init__(self, weight: torch.Tensor, bits: float, noise: NoiseSource, hadamard: bool = False) -> None:
        super().__init__()
        self.bits = lowbit_spec(bits).bits
        self.noise = noise
        self.register_buffer("hadamard", hadamard_matrix(weight.shape[1], weight.dtype).to(weight.device)
                             if hadamard else None, persistent=False)
        rotated = weight.detach() if self.hadamard is None else weight.detach() @ self.hadamard
        self.alpha = nn.Parameter(init_alpha(rotated, bits))

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha
        if self.training and self.noise.sigma > 0:
            weight, alpha = self.noise.perturb(weight), self.noise.perturb(alpha)
        return effective_weight(weight, alpha, self.bits, self.hadamard, quantize=lowbit_ste)


def lowbit_selection(model: nn.Module) -> list[str]:
    """WinQ's selection: every Linear of the transformer blocks (attention q/k/v/o, MLP gate/up/down;
    :data:`LOWBIT_INCLUDE`), not the embeddings or ``lm_head`` (``common.select.select_linears``)."""
    return select_linears(model, include=LOWBIT_INCLUDE)


class LowBitHandle:
    """What :func:`attach_lowbit` changed (``recipe``: the :class:`common.recipes.LowBitRecipe` attached, its
    ``bits``, ``activation_bits`` and ``hadamard`` also attributes); ``remove()`` (idempotent) undoes it; also a
    context manager."""

    def __init__(self, modules: dict[str, nn.Linear], recipe: LowBitRecipe, noise: NoiseSource,
                 hooks: list[Any]) -> None:
        self.names = list(modules)
        self.recipe = recipe
        self.bits, self.activation_bits, self.hadamard = recipe.bits, recipe.activation_bits, recipe.hadamard
        self.noise = noise
        self._modules, self._hooks = modules, hooks

    def _parametrization(self, name: str) -> LowBitWeight:
        if name not in self._modules:
            raise ValueError(f"{name!r} is not a quantized layer of this handle; layers: {self.names}")
        return self._modules[name].parametrizations.weight[0]

    def set_noise(self, sigma: float, seed: int) -> None:
        """Noise ``sigma`` on weights and alphas in training forwards (0 = off), from a generator seeded ``seed``."""
        self.noise.configure(sigma, seed)

    def quantized_weight(self, name: str) -> torch.Tensor:
        """The noise-free effective quantized weight ``Q(W)`` (``Q(W H) H^T`` with Hadamard), detached."""
        layer = self._parametrization(name)
        with torch.no_grad():
            return effective_weight(self.latent_weight(name), layer.alpha, self.bits, layer.hadamard).detach()

    def latent_weight(self, name: str) -> nn.Parameter:
        """The latent weight (the parametrization's ``original``: what the optimizer updates)."""
        self._parametrization(name)
        return self._modules[name].parametrizations.weight.original

    def alphas(self) -> dict[str, nn.Parameter]:
        """``{name: alpha}`` (out x 1 parameters)."""
        return {name: self._parametrization(name).alpha for name in self.names}

    def learned_codes(self) -> tuple[QuantRecipe, dict[str, BlockScales]]:
        """The trained layers as a quantized checkpoint stores them (``recipe`` and ``weight_scales`` of
        :func:`common.ptq.save_quantized_checkpoint`): per layer the integer codes and learned per-row scales of
        ``Q(W)`` (:func:`lowbit_codes`), and the recipe ``QuantRecipe(QuantSpec(<codes format>, "fp32", "row",
        rule=None), INT8_PER_TOKEN with 8-bit activations, "paretoq-w<bits>[a8]")``. ValueError for a Hadamard
        rotation: ``Q(W H) H^T`` has no integer codes of the unrotated weight with per-row scales."""
        if self.hadamard:
            raise ValueError("a low-bit model trained with a Hadamard rotation (hadamard: true) cannot be stored as "
                             "codes: its effective weights Q(W H) H^T have no codes of the unrotated weight with "
                             "per-row scales")
        alphas = self.alphas()
        scales = {name: lowbit_codes(self.latent_weight(name), alphas[name], self.bits)[1] for name in self.names}
        a8 = self.activation_bits == 8
        recipe = QuantRecipe(QuantSpec(LOWBIT_CODES[self.bits][0], "fp32", "row", rule=None),
                             INT8_PER_TOKEN if a8 else None, f"paretoq-w{self.bits:g}{'a8' if a8 else ''}")
        return recipe, scales

    def state_dict(self) -> dict[str, Any]:
        """The noise generator's state (alphas and latent weights are model parameters)."""
        return {"noise": self.noise.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.noise.load_state_dict(state["noise"])

    def remove(self, *, materialize: bool = False) -> None:
        """Plain Linear layers holding their latent weights, or with ``materialize=True`` their noise-free
        effective weights ``Q(W)`` (:meth:`quantized_weight`, bit for bit); the alphas and the activation hooks go
        (idempotent)."""
        effective = {name: self.quantized_weight(name) for name in self._modules} if materialize else {}
        for hook in self._hooks:
            hook.remove()
        for name, module in self._modules.items():
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
            if name in effective:
                with torch.no_grad():
                    module.weight.copy_(effective[name])
        self._hooks, self._modules = [], {}

    def __enter__(self) -> LowBitHandle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.remove()


def _quantize_input(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return (ste_quantize(args[0], int8_per_token), *args[1:])


def attach_lowbit(model: nn.Module, names: Sequence[str], recipe: LowBitRecipe) -> LowBitHandle:
    """Quantize the weights of the Linear modules ``names`` with learnable per-row scales as ``recipe`` says
    (:class:`common.recipes.LowBitRecipe`, validated on construction: ``bits``, optionally int8 per-token inputs
    and the weights in a Hadamard basis; module docstring). The front door is :func:`common.quantization.prepare`.

    ValueError for a recipe of another type, a name that is not an ``nn.Linear``, a weight that is already
    parametrized, or (with ``hadamard``) an ``in_features`` that is not a power of two. Noise starts off
    (:meth:`LowBitHandle.set_noise`).
    """
    check_recipe(recipe, LowBitRecipe)
    modules = linear_modules(model, names)
    for name, module in modules.items():
        if parametrize.is_parametrized(module, "weight"):
            raise ValueError(f"the weight of {name!r} is already parametrized (low-bit QAT attached twice?)")
        if recipe.hadamard:
            hadamard_matrix(module.in_features)
    noise, hooks = NoiseSource(), []
    for module in modules.values():
        parametrize.register_parametrization(module, "weight",
                                             LowBitWeight(module.weight, recipe.bits, noise, recipe.hadamard))
        if recipe.activation_bits is not None:
            hooks.append(module.register_forward_pre_hook(_quantize_input))
    return LowBitHandle(modules, recipe, noise, hooks)
