"""Plan a budgeted design from a pilot: variance components, predicted half-widths, and the
design (prompts per dataset x variants per prompt) with the narrowest predicted interval.

Components, per dataset and axis, from a finished grid (the pilot): ``between`` = the
variance of the per-prompt scores s_i over prompts; ``within`` = the per-cell variance,
within a prompt and stratum, of the linearised score z = d^2 / (2 s_i) (the first-order
term of sqrt(MS), so that a mean of m such cells has variance ``within`` / m); ``variants``
= variants per prompt. (At T > 0 a third component, sample-within-variant, would add
``sample / (m K)``; not yet read here.)

For n of N prompts and m of V variants per prompt, the estimate of a dataset's SGS has
variance (two-stage sampling, Cochran 1977 section 10.4)

- for the full grid's value over the same N prompts: (1 - n/N) between / n
  + within (1/m - 1/V) / N;
- for the mean over the prompt population (what the report's t-test is about, prompts
  drawn from a pool larger than N): between / n + within (1/m - 1/V) / n.

Pooled: the mean over D datasets, variance sum_j var_j / D^2; the half-width is 1.96 x its
root. A prompt costs m + ``PROMPT_OVERHEAD`` generations (its base answer and its replay),
so a budget of B generations affords n D (m + 2) <= B; ``best_designs`` searches n (m
following from B) and ranks by the worst axis' half-width over its target (or over its
SGS, with no target). Cochran's optimum for the population mean, m* = sqrt(2 within /
between), is where the search lands when the pool of prompts is unlimited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sago_core.budget.design import Layout
from sago_core.budget.estimate import Z95, full_scores

PROMPT_OVERHEAD = 2  # generations a sampled prompt costs besides its variants
Scope = Literal["grid", "population"]


@dataclass(frozen=True)
class Components:
    """One (dataset, axis): variance components of a pilot and its size."""

    between: float
    within: float
    prompts: int
    variants: float
    sgs: float


def variance_components(layout: Layout, values: np.ndarray) -> list[Components]:
    """Per dataset, for one axis (``values``: the full grid's normalised deltas)."""
    s = full_scores(layout, values)
    z = values**2 / (2 * s[layout.prompt_code])
    z = np.where(np.isfinite(z), z, np.nan)
    out = []
    for j in range(len(layout.datasets)):
        prompts = np.flatnonzero(layout.prompt_dataset == j)
        scores = s[prompts][np.isfinite(s[prompts])]
        cells = np.isin(layout.prompt_code, prompts) & np.isfinite(z)
        group = layout.prompt_code[cells] * len(layout.strata) + layout.stratum[cells]
        zc = z[cells]
        _, inverse, counts = np.unique(group, return_inverse=True, return_counts=True)
        means = np.bincount(inverse, weights=zc) / counts
        ss = float(((zc - means[inverse]) ** 2).sum())
        dof = int((counts - 1).sum())
        out.append(
            Components(
                between=float(np.var(scores, ddof=1)) if len(scores) >= 2 else 0.0,
                within=ss / dof if dof > 0 else 0.0,
                prompts=len(prompts),
                variants=float(layout.sizes[prompts].sum(axis=1).mean()),
                sgs=float(scores.mean()) if len(scores) else float("nan"),
            )
        )
    return out


def predicted_variance(
    parts: Sequence[Components], prompts: int, variants: float, scope: Scope = "grid"
) -> float:
    total = 0.0
    for c in parts:
        n = min(prompts, c.prompts) if scope == "grid" else prompts
        m = min(variants, c.variants)
        second = c.within * max(1 / m - 1 / c.variants, 0.0)
        if scope == "grid":
            total += (1 - n / c.prompts) * c.between / n + second / c.prompts
        else:
            total += (c.between + second) / n
    return total / len(parts) ** 2


def predicted_half_width(
    parts: Sequence[Components], prompts: int, variants: float, scope: Scope = "grid"
) -> float:
    return float(Z95 * np.sqrt(predicted_variance(parts, prompts, variants, scope)))


@dataclass(frozen=True)
class PlannedDesign:
    prompts: int  # per dataset
    variants: int  # per prompt
    generations: int
    half_widths: dict[str, float]
    score: float  # the worst axis' half-width over its target (smaller is better)


def best_designs(
    components: Mapping[str, Sequence[Components]],
    generations: int,
    *,
    target: Mapping[str, float] | None = None,
    scope: Scope = "grid",
    max_prompts: int | None = None,
    min_variants: int = 1,
    top: int = 5,
) -> list[PlannedDesign]:
    """Designs affordable with ``generations``, best first. ``max_prompts``: the pool per
    dataset (default: the pilot's prompts for scope "grid", 10x them for "population")."""
    first = next(iter(components.values()))
    datasets = len(first)
    pool = max_prompts or (
        min(c.prompts for c in first) if scope == "grid" else 10 * max(c.prompts for c in first)
    )
    variants_max = int(max(c.variants for c in first))
    found = []
    for n in range(2, pool + 1):
        m = min(variants_max, generations // (n * datasets) - PROMPT_OVERHEAD)
        if m < min_variants:
            break
        widths = {
            axis: predicted_half_width(parts, n, m, scope) for axis, parts in components.items()
        }
        ratios = [
            widths[a] / (target[a] if target and a in target else _sgs(components[a]))
            for a in widths
            if not target or a in target
        ]
        found.append(PlannedDesign(n, m, n * datasets * (m + PROMPT_OVERHEAD), widths, max(ratios)))
    return sorted(found, key=lambda d: d.score)[:top]


def _sgs(parts: Sequence[Components]) -> float:
    value = float(np.mean([c.sgs for c in parts]))
    return value if value > 0 else 1.0
