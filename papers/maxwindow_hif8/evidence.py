"""How the Max-Window claims make their intervals: the workflow's bootstrap settings (:class:`Bootstrap`, from
``evidence:`` in ``workflow/config/default.yaml``) and a circular block bootstrap over training steps.

Evaluation windows and zero-shot examples are exchangeable units shared by the models compared: the paired
bootstrap of :func:`common.uncertainty.paired_bootstrap` resamples them. Training steps are not: the loss gap
and the saturation of step ``t`` depend on step ``t - 1`` (the same weights one update earlier, the amax history),
so resampling steps one by one would understate the variance. :func:`block_bootstrap` resamples blocks of ``b``
consecutive steps instead (the circular block bootstrap of Politis and Romano, 1992): a resample of ``n`` steps
is ``k = ceil(n / b)`` blocks with starts ``s ~ U{0, .., n - 1}`` from ``numpy.random.default_rng(seed)``
(``rng.integers(0, n, (resamples, k))``), block ``s`` being the steps ``s, s + 1, .., s + b - 1`` modulo ``n``,
truncated to ``n`` steps. Wrapping around gives every step the same chance to be drawn, so the resampled sums are
centred on the sample's. The block length is :func:`block_length`, ``b = ceil(n^(1/3))``, the order of the
variance-optimal block length (Hall, Horowitz and Jing, 1995). As in the paired bootstrap, each column enters the
statistic as its sum over the resampled steps and the interval is the percentile interval; with ``b = 1`` the
draw, and so the estimate, equals :func:`common.uncertainty.paired_bootstrap`'s (tested).

Within one run these intervals describe the variation of a step mean along that run's trajectory; a second seed
would vary the trajectory itself, which no interval over steps can show (one seed per run: issue 14 adds seeds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.uncertainty import MIN_RESAMPLES, Estimate, Sums, paired_bootstrap

FIELDS = ("level", "resamples", "seed")


@dataclass(frozen=True)
class Bootstrap:
    """The workflow's interval settings (``evidence: {level, resamples, seed}``), the same for every claim."""

    level: float
    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if not 0 < self.level < 1:
            raise ValueError(f"evidence level must be in (0, 1), got {self.level!r}")
        if isinstance(self.resamples, bool) or not isinstance(self.resamples, int) or self.resamples < MIN_RESAMPLES:
            raise ValueError(f"evidence resamples must be an integer >= {MIN_RESAMPLES}, got {self.resamples!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"evidence seed must be an integer >= 0, got {self.seed!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bootstrap:
        """The settings of ``evidence:`` (ValueError naming a missing or unknown field or a bad value)."""
        missing, unknown = [f for f in FIELDS if f not in data], [f for f in data if f not in FIELDS]
        if missing or unknown:
            raise ValueError(f"evidence settings: missing {missing or 'nothing'}, unknown {unknown or 'nothing'}")
        return cls(float(data["level"]), data["resamples"], data["seed"])

    def paired(self, columns: Mapping[str, Sequence[float] | np.ndarray], statistic: Callable[[Sums], Any],
               unit: str) -> Estimate:
        """:func:`common.uncertainty.paired_bootstrap` over exchangeable ``unit`` (windows, examples)."""
        return paired_bootstrap(columns, statistic, resamples=self.resamples, seed=self.seed, level=self.level,
                                unit=unit)

    def blocks(self, columns: Mapping[str, Sequence[float] | np.ndarray], statistic: Callable[[Sums], Any],
               unit: str) -> Estimate:
        """:func:`block_bootstrap` over consecutive ``unit`` (training steps)."""
        return block_bootstrap(columns, statistic, resamples=self.resamples, seed=self.seed, level=self.level,
                               unit=unit)


def block_length(n: int) -> int:
    """``ceil(n^(1/3))`` in integers: the least ``b >= 1`` with ``b^3 >= n`` (ValueError for ``n < 1``)."""
    if n < 1:
        raise ValueError(f"a block length needs at least 1 unit, got {n}")
    b = max(1, round(n ** (1 / 3)))
    while b**3 < n:
        b += 1
    while b > 1 and (b - 1) ** 3 >= n:
        b -= 1
    return b


def circular_block_counts(n: int, block: int, resamples: int, seed: int) -> np.ndarray:
    """``(resamples, n)`` float64: how often each of ``n`` ordered units is drawn in each circular block resample
    (module docstring)."""
    if n < 2:
        raise ValueError(f"a bootstrap needs at least 2 units, got {n}")
    if not 1 <= block <= n:
        raise ValueError(f"block length must be in [1, {n}], got {block}")
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be >= {MIN_RESAMPLES}, got {resamples}")
    blocks = math.ceil(n / block)
    starts = np.random.default_rng(seed).integers(0, n, (resamples, blocks))
    drawn = ((starts[:, :, None] + np.arange(block)) % n).reshape(resamples, blocks * block)[:, :n]
    counts = np.zeros((resamples, n))
    np.add.at(counts, (np.arange(resamples)[:, None], drawn), 1.0)
    return counts


def block_bootstrap(columns: Mapping[str, Sequence[float] | np.ndarray], statistic: Callable[[Sums], Any], *,
                    resamples: int, seed: int, level: float, unit: str = "steps", block: int | None = None
                    ) -> Estimate:
    """Circular block bootstrap of ``statistic`` (module docstring); ``columns`` are per-unit values in order (all
    the same length ``n``, unit ``j`` of every column the same step: paired), ``block`` defaults to
    :func:`block_length`. ``statistic`` receives the column sums (shape ``()`` for the point estimate,
    ``(resamples,)`` for the replicates). A replicate that is not finite is an error, never dropped."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")
    if not columns:
        raise ValueError("block_bootstrap needs at least one column")
    data = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items()}
    shapes = {name: v.shape for name, v in data.items()}
    n = len(next(iter(data.values())))
    if any(shape != (n,) for shape in shapes.values()):
        raise ValueError(f"block_bootstrap columns must be 1-D of one length, got {shapes}")
    if n < 2:
        raise ValueError(f"a bootstrap needs at least 2 {unit}, got {n}")
    b = block_length(n) if block is None else block
    counts = circular_block_counts(n, b, resamples, seed)
    point = float(statistic({name: np.asarray(v.sum()) for name, v in data.items()}))
    replicates = np.asarray(statistic({name: counts @ v for name, v in data.items()}), dtype=np.float64)
    if replicates.shape != (resamples,):
        raise ValueError(f"the statistic must return one value per resample, got shape {replicates.shape}")
    if not np.isfinite(replicates).all() or not math.isfinite(point):
        raise ValueError(f"the bootstrap statistic is not finite (point estimate {point}); check the columns")
    alpha = (1 - level) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    rule = " = ceil(n^(1/3))" if block is None else ""
    method = (f"circular block bootstrap over {n} consecutive {unit} (blocks of {b}{rule} {unit}, {resamples} "
              f"resamples, seed {seed}, percentile)")
    return Estimate(point, float(low), float(high), method, level)
