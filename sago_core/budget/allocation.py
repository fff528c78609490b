"""The planner's account of how a budgeted run spreads a prompt's cells over its strata.

The proportional prediction (planner.predicted_estimate: ``within`` (1/m - 1/V) per prompt)
assumes each stratum gets its share of a prompt's m cells. The design does otherwise
(sequential.py): its first round gives every stratum two cells (one variance needs two),
however few variants the stratum holds, and tops the round up proportionally; the later
rounds go to the strata where the watched axes' spread is largest (greedy Neyman). At 20%
of the paper grid most cells are the first round's two per stratum, so a small stratum with
a large spread is sampled far past its share. The proportional prediction then over-states
Ent's and Prob's half-widths by about a third and under-states BLEU's by a fifth (the replay
table, docs/guide/budget-validation.md).

Here the typical prompt of a dataset (its strata at their mean sizes V_h) is allocated the
same way from the pilot's per-stratum spreads: the minimum round, the first round's
proportional top-up, then the rest of m by the same greedy steps and weights as the run,
a_h = sum over the watched axes of W_h^2 S_h^2 / sum_h' W_h'^2 S_h'^2 (each axis' weights
summing to one: the targeted axes, or every axis with no target). The second-stage variance
of one prompt's estimate of an axis is then sum_h W_h^2 S_h^2 (1 / m_h - 1 / V_h) (Cochran
1977 section 5.3), W_h = V_h / sum V. What it leaves out: the run's weights come from its
pilot round's cells (here the pilot run's spreads are known), and the run shares a round's
cells equally over the sampled prompts of every dataset where the plan allocates each
dataset's typical prompt (a stratum whose mean size is below one half counts as one
variant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sago_core.budget.design import Layout, minimum_counts
from sago_core.budget.sequential import allocate


@dataclass(frozen=True)
class StratumParts:
    """One dataset's strata, for one axis: the typical prompt's variants per stratum (V_h,
    the mean over prompts), the within-stratum variance S_h^2 of the linearised score
    z = d^2 / (2 s_i) pooled over prompts, and the first round's cells per stratum."""

    sizes: tuple[float, ...]
    spread: tuple[float, ...]
    minimum: tuple[int, ...]

    def scaled(self, factor: float) -> StratumParts:
        """The spreads times ``factor`` (the variants' own part at another K)."""
        return StratumParts(self.sizes, tuple(v * factor for v in self.spread), self.minimum)

    def shares(self) -> np.ndarray:
        sizes = np.asarray(self.sizes)
        return sizes / max(float(sizes.sum()), 1e-12)


def stratum_parts(layout: Layout, z: np.ndarray, dataset: int) -> StratumParts:
    """``z``: per cell, the linearised score (NaN where not measured)."""
    prompts = np.flatnonzero(layout.prompt_dataset == dataset)
    strata = np.flatnonzero(layout.stratum_dataset == dataset)
    cells = np.isin(layout.prompt_code, prompts) & np.isfinite(z)
    shape = (len(layout.prompts), len(layout.strata))
    n, t1, t2 = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    at = (layout.prompt_code[cells], layout.stratum[cells])
    np.add.at(n, at, 1.0)
    np.add.at(t1, at, z[cells])
    np.add.at(t2, at, z[cells] ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        ss = np.where(n >= 2, t2 - t1**2 / np.maximum(n, 1), 0.0).sum(axis=0)
        dof = np.where(n >= 2, n - 1, 0.0).sum(axis=0)
        spread = np.where(dof > 0, np.maximum(ss, 0.0) / np.maximum(dof, 1), 0.0)
    sizes = layout.sizes[prompts].mean(axis=0) if len(prompts) else np.zeros(shape[1])
    return StratumParts(
        tuple(float(sizes[h]) for h in strata),
        tuple(float(spread[h]) for h in strata),
        tuple(int(v) for v in minimum_counts(layout)[strata]),
    )


def planned_counts(
    parts: Mapping[str, StratumParts],
    variants: float,
    rounds: int,
    weights: Mapping[str, float],
) -> np.ndarray:
    """The typical prompt's cells per stratum at ``variants`` cells per prompt: the
    minimum round, its proportional top-up to ``variants / rounds``, the rest by greedy
    Neyman steps over ``weights`` (per axis, w_axis; an axis absent is not watched)."""
    first = next(iter(parts.values()))
    ceiling = np.maximum(np.rint(first.sizes).astype(np.int64), 1)
    counts = np.minimum(np.asarray(first.minimum, dtype=np.int64), ceiling)
    total = min(round(variants), int(ceiling.sum()))
    share = first.shares()
    opening = max(int(counts.sum()), round(total / max(rounds, 1)))
    counts = allocate(counts, share**2, ceiling, max(opening - int(counts.sum()), 0))
    weight = np.zeros(len(ceiling))
    for axis, w in weights.items():
        if axis in parts and w > 0:
            a = share**2 * np.asarray(parts[axis].spread)
            weight += a / a.sum() if a.sum() > 0 else 0.0
    if not weight.any():
        weight = share**2
    return allocate(counts, weight, ceiling, max(total - int(counts.sum()), 0))


def allocated_within(parts: StratumParts, counts: np.ndarray) -> float:
    """One prompt's second-stage variance at ``counts`` cells per stratum:
    sum_h W_h^2 S_h^2 (1 / m_h - 1 / V_h), a stratum asked whole adding nothing."""
    share = parts.shares()
    sizes = np.maximum(np.asarray(parts.sizes), 1e-12)
    m = np.maximum(counts.astype(float), 1e-12)
    fpc = np.where(counts > 0, np.maximum(1 / m - 1 / sizes, 0.0), 0.0)
    return float((share**2 * np.asarray(parts.spread) * fpc).sum())


def allocated_sample(parts: StratumParts, counts: np.ndarray) -> float:
    """The per-cell sampling variance's multiplier at ``counts``: sum_h W_h^2 / m_h (each
    cell's own draws, so no finite-population correction); 1/m at proportional shares."""
    share = parts.shares()
    asked = counts > 0
    return float((share[asked] ** 2 / counts[asked]).sum())


def axis_weights(sgs: Mapping[str, float], target: Mapping[str, float] | None) -> dict[str, float]:
    """The watched axes as the run weighs them (sequential._weights), each weight positive:
    the targeted axes, or every axis with no target (the values are read as a mask only:
    each axis' allocation weights are scaled to sum to one)."""
    if target:
        return {a: 1.0 / hw**2 for a, hw in target.items() if hw > 0}
    return {a: 1.0 / max(value, 1e-6) ** 2 for a, value in sgs.items()}


def dataset_counts(
    parts: Mapping[str, Sequence[StratumParts]],
    variants: float,
    rounds: int,
    weights: Mapping[str, float],
) -> list[np.ndarray]:
    """Per dataset, ``planned_counts`` over every axis' parts of that dataset."""
    datasets = len(next(iter(parts.values())))
    return [
        planned_counts({a: p[j] for a, p in parts.items()}, variants, rounds, weights)
        for j in range(datasets)
    ]
