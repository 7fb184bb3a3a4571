"""The regime card of the WinQ study: the quantities that decide whether the interpolation can act at all, measured
on our run's schedule and base model (the config's ``regime:``, :mod:`common.report.regime`).

The interpolation ``W <- (1 - a) W + a Q(W)`` (``a = 0.8``) leaves ``Q(W)`` unchanged and moves each latent weight
80% of the way to its level, the centre of its bin: it acts only through what follows, if a weight can travel from
there to a code boundary before the next interpolation. Adam moves a weight by about ``lr`` a step, so that reach
is the summed learning rate over a period, in bin widths (the WinQ fact sheet, "The regime the mechanism acts in").

* **Bin width** of a row: ``d_b alpha``, the distance between adjacent levels of the quantizer in latent-weight
  units, twice the distance from a level to its nearest code boundary. ``d_b`` is the level spacing of ``q`` in units
  of ``alpha`` (:func:`level_spacing`, read off :func:`common.quantizers.lowbit.normalized_levels`: 2 at 1 bit, levels
  ``+-1`` around the boundary 0; 2/3 at 1.58 bits; 1/2 at 2 bits; 1 at 3 and 4 bits), ``alpha`` the per-row scale
  at the start of QAT, :func:`common.quantizers.lowbit.init_alpha` of the base model's weight (``mean|W|`` at 1 bit,
  ``max|W|`` at 1.58 and 2 bits, ``max|W| / (2^(b-1) - 1)`` at 3 and 4), clamped as the forward clamps it. The
  card's bin width of a bit width is the median over every latent weight of the quantized linears, each weight
  counting its row's width (:func:`median_bin_width`, the lower median).
* **Travel per period** (``travel_w<b>``): ``sum_{t<K} lr_t / w_b``, the learning rate summed over the first
  interpolation period (optimizer steps ``1 .. K``, the longest reach: the cosine decays) of the bit width's
  learning-rate group (:func:`papers.winq.settings.period_lr_sums`: :func:`common.train.learning_rate`, linear
  warmup then cosine), over its median bin width ``w_b``.
* **Step** (``step_w<b>``): ``lr / w_b``, the peak learning rate in bin widths: about the largest move one Adam
  step makes.
* **Quantized share** (``quantized_share``): the parameters of the linears low-bit QAT quantizes
  (:data:`common.quantizers.lowbit.LOWBIT_INCLUDE`) over all parameters, each tensor once (a tied embedding once).
* **Stall** (``stall_<setting>``, the premise of the method claims; only the rows the config's card has): the
  baseline's codes changed per unit of summed learning rate, last half of its periods over the first half
  (:mod:`papers.winq.premise`), the mean over the seeds of that setting's baseline in the same build, read from the
  study summary (so the card of a build is measured after its baselines, never on another build's runs).

A bit width ``b`` is the A16 setting of its id suffix (:data:`CARD_BITS`: ``w1_58`` is 1.58 bits), trained at its
group's learning rate and run length with its group's period ``K`` (:mod:`papers.winq.settings`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from common.quantizers.lowbit import LOWBIT_INCLUDE, clamp_alpha, init_alpha, lowbit_spec, normalized_levels
from common.report import RegimeRow, regime_rows, regime_specs
from common.train import TrainConfig

from .settings import interpolation_every, learning_rate_group, period_lr_sums, run_steps

CARD_BITS: dict[str, float] = {"w1": 1, "w1_58": 1.58, "w2": 2, "w3": 3, "w4": 4}  # id suffix -> weight bits (A16)
PER_BITS = ("travel", "step")  # the quantities measured per bit width: <quantity>_<suffix>
SHARE = "quantized_share"
STALL = "stall"  # the premise rows, stall_<suffix> (papers.winq.premise), measured where the config's card has them
BASELINE = "baseline"
WEIGHT = ".weight"
# the intervals level_spacing samples u in (from one below the clip range to one above, at most 9 units): every level
# whose bin is wider than one interval (~2e-3 alpha) is hit
SPACING_SAMPLES = 4096


def card_ids() -> list[str]:
    """Every quantity this module measures: ``travel_<w>`` and ``step_<w>`` per :data:`CARD_BITS` suffix, then
    :data:`SHARE`."""
    return [f"{kind}_{suffix}" for kind in PER_BITS for suffix in CARD_BITS] + [SHARE]


def level_spacing(bits: float) -> float:
    """The distance between adjacent levels of ``q(u)`` in units of ``alpha`` (module docstring), read off the
    quantizer's levels over ``u`` from one below its clip range to one above; ValueError for an unknown bit width
    (:func:`common.quantizers.lowbit.lowbit_spec`)."""
    spec = lowbit_spec(bits)
    u = torch.linspace(spec.lo - 1, spec.hi + 1, SPACING_SAMPLES + 1, dtype=torch.float64)
    gaps = torch.diff(torch.unique(normalized_levels(u, bits)))
    if not torch.allclose(gaps, gaps[0]):
        raise ValueError(f"the {bits}-bit levels are not evenly spaced: gaps {gaps.tolist()}")
    return float(gaps[0])


def row_bin_widths(weight: torch.Tensor, bits: float) -> torch.Tensor:
    """Per output row of a 2-D ``weight``, the bin width ``level_spacing(bits) clamp_alpha(init_alpha(W))`` in
    float64, shape ``(out,)``; ValueError for a weight that is not 2-D."""
    if weight.dim() != 2:
        raise ValueError(f"a quantized weight is 2-D (out x in), got shape {tuple(weight.shape)}")
    alpha = clamp_alpha(init_alpha(weight.detach().to(torch.float64), bits))
    return level_spacing(bits) * alpha.squeeze(-1)


def weighted_lower_median(values: torch.Tensor, counts: torch.Tensor) -> float:
    """The lower median of the multiset holding ``values[i]`` ``counts[i]`` times: its element of 0-based rank
    ``(N - 1) // 2`` in ascending order, ``N = sum(counts)`` (``torch.median``'s convention); ValueError when it
    is empty."""
    total = int(counts.sum())
    if values.numel() != counts.numel() or total < 1:
        raise ValueError(f"a median needs values with positive counts, got {values.numel()} values and "
                         f"{counts.numel()} counts summing to {total}")
    order = torch.argsort(values, stable=True)
    cumulative = torch.cumsum(counts[order], dim=0)
    rank = torch.tensor((total - 1) // 2, dtype=cumulative.dtype)
    return float(values[order][int(torch.searchsorted(cumulative, rank, right=True))])


def median_bin_width(weights: Iterable[torch.Tensor], bits: float) -> float:
    """The lower median bin width over every latent weight of ``weights`` (2-D, out x in), each weight counting
    its row's width (:func:`row_bin_widths`; a row of ``in`` weights counts ``in`` times). ValueError for none."""
    widths, counts = [], []
    for weight in weights:
        rows = row_bin_widths(weight, bits)
        widths.append(rows)
        counts.append(torch.full_like(rows, weight.shape[1], dtype=torch.int64))
    if not widths:
        raise ValueError("no quantized weight to take a bin width of")
    return weighted_lower_median(torch.cat(widths), torch.cat(counts))


def quantized_weights(parameters: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The 2-D ``<module>.weight`` entries of a state dict whose module low-bit QAT quantizes (``re.search`` of
    :data:`common.quantizers.lowbit.LOWBIT_INCLUDE` on the module name, as
    :func:`common.quantizers.lowbit.lowbit_selection`)."""
    include = re.compile(LOWBIT_INCLUDE)
    return {name: t for name, t in parameters.items()
            if name.endswith(WEIGHT) and t.dim() == 2 and include.search(name.removesuffix(WEIGHT))}


def quantized_share(parameters: Mapping[str, torch.Tensor]) -> tuple[float, int, int]:
    """``(share, quantized, total)``: the parameter count of :func:`quantized_weights` over that of every entry,
    each entry counted once (pass each tensor once: ``dict(model.named_parameters())`` or a checkpoint file's
    tensors, where a tied embedding appears once). ValueError when nothing is quantized."""
    quantized = sum(t.numel() for t in quantized_weights(parameters).values())
    total = sum(t.numel() for t in parameters.values())
    if not quantized:
        raise ValueError(f"no quantized linear ({LOWBIT_INCLUDE}) among the {len(parameters)} parameters")
    return quantized / total, quantized, total


def bit_schedule(config: Mapping[str, Any], bits: float) -> tuple[TrainConfig, int]:
    """The schedule an A16 run at ``bits`` trains with: its :class:`common.train.TrainConfig` (the ``train`` fields,
    its group's learning rate and run length) and its group's interpolation period ``K``
    (:func:`papers.winq.settings.interpolation_every`)."""
    group = learning_rate_group(bits, None)
    train = TrainConfig.from_dict({**config["train"], "lr": config["learning_rates"][group],
                                   "max_steps": run_steps(config, group), "progress": False})
    return train, interpolation_every(config, group)


def regime_values(config: Mapping[str, Any], parameters: Mapping[str, torch.Tensor],
                  summary: Mapping[str, Any] | None = None) -> tuple[dict[str, float | None], dict[str, str]]:
    """``(measured, notes)`` of every quantity of :func:`card_ids` (module docstring) for the study ``config``
    (``learning_rates``, ``train``, ``train_steps``, ``interpolation``) and the base model's ``parameters`` (each
    tensor once, :func:`quantized_share`), then of the premise rows the config's ``regime:`` has (:func:`stall_ids`)
    from the study ``summary``'s baselines (:func:`premise_values`; None without a summary): the rows of
    :func:`common.report.regime.regime_rows`."""
    weights = list(quantized_weights(parameters).values())
    share, quantized, total = quantized_share(parameters)
    measured: dict[str, float] = {}
    notes: dict[str, str] = {}
    for suffix, bits in CARD_BITS.items():
        train, every = bit_schedule(config, bits)
        width = median_bin_width(weights, bits)
        summed = period_lr_sums(train, every)[0]
        measured[f"travel_{suffix}"], measured[f"step_{suffix}"] = summed / width, train.lr / width
        notes[f"travel_{suffix}"] = (f"lr {train.lr:g} summed over the first K = {every} of {train.max_steps} steps "
                                     f"(warmup {train.warmup_steps}, cosine to {train.min_lr_ratio:g} lr): "
                                     f"{summed:.3g}; median {bits:g}-bit bin width {width:.3g}")
        notes[f"step_{suffix}"] = f"lr {train.lr:g} / median {bits:g}-bit bin width {width:.3g}"
    measured[SHARE] = share
    notes[SHARE] = (f"{quantized:,} of {total:,} parameters in {len(weights)} quantized "
                    f"linear{'s' * (len(weights) != 1)}; the rest (embeddings, norms) in full precision")
    order = card_ids()
    stall = stall_ids(config.get("regime") or {})
    if summary is None:
        premise, premise_notes = {rid: None for rid in stall}, {rid: "measured on a build's baselines" for rid in stall}
    else:
        premise, premise_notes = premise_values(summary, stall)
    return ({**{rid: measured[rid] for rid in order}, **premise},
            {**{rid: notes[rid] for rid in order}, **premise_notes})


def stall_id(setting: str) -> str:
    """The regime card's premise row of study setting ``setting``: ``stall_<setting>``, ``.`` written ``_``."""
    return f"{STALL}_{setting.replace('.', '_')}"


def stall_ids(regime: Mapping[str, Any]) -> list[str]:
    """The premise rows of a config's ``regime:`` mapping, ``stall_<setting>``, in its order."""
    return [rid for rid in regime if rid.startswith(f"{STALL}_")]


def premise_values(summary: Mapping[str, Any],
                   ids: Sequence[str]) -> tuple[dict[str, float | None], dict[str, str]]:
    """``(measured, notes)`` of the regime card's premise rows ``ids`` (``stall_<suffix>``, the suffix a setting's
    name with ``.`` written ``_``): the mean over the seeds of that setting's baseline of each cell's ``stall``
    (the study summary's cells); None, saying why, for a setting without a baseline in this build or a seed whose
    ratio is undefined."""
    measured: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    for rid in ids:
        setting = rid.removeprefix(f"{STALL}_").replace("_", ".")
        cells = [c for c in summary["cells"] if c["setting"] == setting and c["method"] == BASELINE]
        values = [c.get(STALL) for c in cells]
        if not cells:
            measured[rid], notes[rid] = None, f"no {setting} baseline in this build"
        elif any(v is None for v in values):
            measured[rid], notes[rid] = None, (f"undefined for a seed of the {setting} baseline (fewer than two "
                                               "periods, or no code change in the first half)")
        else:
            measured[rid] = math.fsum(values) / len(values)
            per_seed = ", ".join(f"seed {c['seed']} {v:.3g}" for c, v in zip(cells, values, strict=True))
            notes[rid] = (f"the {setting} baseline of this build, mean over {len(cells)} seed"
                          f"{'s' * (len(cells) != 1)} ({per_seed})")
    return measured, notes


def regime_card(config: Mapping[str, Any], parameters: Mapping[str, torch.Tensor],
                summary: Mapping[str, Any] | None = None) -> list[RegimeRow]:
    """The card's rows: the config's ``regime:`` specs with :func:`regime_values` as ours (ValueError naming a spec
    this module does not measure, or one it measures that the config lacks)."""
    measured, notes = regime_values(config, parameters, summary)
    return regime_rows(regime_specs(config["regime"]), measured, notes)


def model_facts(path: str | Path) -> dict[str, Any]:
    """What the setup table says of the checkpoint folder ``path``, from its ``config.json`` alone (the model built
    on the meta device: no weights read): its ``name`` (the folder's), ``parameters`` and ``quantized`` counts
    (:func:`quantized_share`), ``layers`` (quantized linears), ``blocks``, ``hidden``, ``vocabulary`` and
    ``tied`` (embeddings)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    parameters = dict(model.named_parameters())
    share, quantized, total = quantized_share(parameters)
    return {"name": Path(path).name, "parameters": total, "quantized": quantized, "share": share,
            "layers": len(quantized_weights(parameters)), "blocks": int(config.num_hidden_layers),
            "hidden": int(config.hidden_size), "vocabulary": int(config.vocab_size),
            "tied": bool(getattr(config, "tie_word_embeddings", False))}
