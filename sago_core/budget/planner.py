"""Plan a budgeted design from a pilot: variance components, predicted half-widths, and the
design (prompts per dataset x variants per prompt) with the narrowest predicted interval.

Components, per dataset and axis, from a finished grid (the pilot): ``between`` = the
variance of the per-prompt scores s_i over prompts; ``within`` = the per-cell variance,
within a prompt and stratum, of the linearised score z = d^2 / (2 s_i) (the first-order
term of sqrt(MS), so that a mean of m such cells has variance ``within`` / m); ``variants``
= variants per prompt. The strata are the design's (design.py): a design with m variants
per prompt stratifies at the finest level whose first round fits m, so ``plan`` reads the
components at that level.

At T > 0 with K answers per prompt text, a cell's delta is measured over its K samples and
its within-prompt variance holds a sampling part. A run at K0 > 1 decomposes its per-sample
scores into prompt / variant / sample (variance_components.parquet, sampling/components.py);
the share of the cell-level within-prompt variance that sampling makes,
q = (s2_sample / K0) / (s2_variant + s2_sample / K0), splits ``within`` into the variants'
own spread (1 - q) within, sampled without replacement, and a sampling part q within K0 / K
at K answers per text, each cell's own (no finite-population correction): the same share
assumed for the normalised delta as for the per-sample score, the prompt component left as
it is. Planned over several K, the target is then the grid's expected value over sampling.
An axis without that decomposition (Prob and Ent are teacher-forced, Act is not sampled;
any axis of a run at K0 = 1) keeps its ``within``.

For n of N prompts and m of V variants per prompt, the estimate of a dataset's SGS has
variance (two-stage sampling, Cochran 1977 section 10.4)

- for the full grid's value over the same N prompts: (1 - n/N) between / n
  + [within (1/m - 1/V) + sample / m] / n (each sampled prompt's own estimate error, over
  the n prompts averaged; the estimator's formula has n N in its second term because its
  s_b^2, a variance of estimated roots, already holds that error: Cochran's v(y));
- for the mean over the prompt population (what the report's t-test is about, prompts
  drawn from a pool larger than N): between / n + [within (1/m - 1/V) + sample / m] / n.

On a sparse axis (MR: a handful of non-zero cells per prompt) a prompt whose sampled
cells all show 0 gets the estimator's empirical-Bayes root (estimate.py): the dataset's
rate for its unseen cells and a posterior variance about the design's own, so the
prediction uses the same second-stage term on every axis (a separate floor for such
prompts predicted 1.7-1.9 times MR's realised half-width on the synthetic paper grid).
``no_event_share`` still says how many prompts would see no event (``sago plan
--max-no-event``): their roots lean on the other prompts.

The second-stage term above takes each stratum at its proportional share of the m cells.
The run does not (its first round gives every stratum two cells, its later rounds go where
the spread is): ``plan`` predicts at the design's own allocation where the pilot gives the
strata's spreads (allocation.py: sum_h W_h^2 S_h^2 (1/m_h - 1/V_h) per prompt), which at 20%
of the paper grid brought Ent and Prob from 1.33 and 1.29 times the realised half-width to
0.99 and 0.97.

Pooled: the mean over D datasets, variance sum_j var_j / D^2; the half-width is the run's
t quantile (``predicted_estimate``) x its root. A prompt costs m + ``PROMPT_OVERHEAD``
generations (its base answer and its replay), x K, so a budget of B generations affords
n D (m + 2) K <= B; ``plan`` searches n (and K; m following from B) among the designs a
run would take and ranks them by the worst axis' half-width over its target (or over its
SGS, with no target). Cochran's optimum for the population mean, m* = sqrt(2 within /
between), is where the search lands when the pool is unlimited.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import polars as pl

from sago_core.budget.allocation import (
    StratumParts,
    allocated_sample,
    allocated_within,
    axis_weights,
    dataset_counts,
    stratum_parts,
)
from sago_core.budget.baseline import measured_control
from sago_core.budget.cells import GridValues
from sago_core.budget.design import LEVELS, Layout, Level, index_grid, minimum_counts
from sago_core.budget.estimate import Estimate, dataset_df, full_scores, pooled_estimate
from sago_core.budget.schedule import finer_floor
from sago_core.budget.sequential import interval_level
from sago_core.config import BudgetSettings
from sago_core.vocabulary import POOLED

PROMPT_OVERHEAD = 2  # generations a sampled prompt costs besides its variants
DEFAULT_ROUNDS: int = BudgetSettings.model_fields["rounds"].default
Scope = Literal["grid", "population"]


@dataclass(frozen=True)
class Components:
    """One (dataset, axis): variance components of a pilot and its size."""

    between: float
    within: float
    prompts: int
    variants: float
    sgs: float
    # the per-cell sampling variance at the planned K (``at_samples``): each cell's own
    # draws, so no finite-population correction; 0 where ``within`` holds it (the pilot's K)
    sample: float = 0.0
    # the strata at this level (allocation.py): sizes, spreads, the first round's cells
    stratum_parts: StratumParts | None = None
    # the share of the second stage's variance a baseline run leaves (1 - rho^2 at the best
    # lambda; budget/baseline.py), 1 without one
    controlled: float = 1.0
    # with a baseline, the estimate over its prompts (baseline.py): the variance over
    # prompts of the two releases' difference, and the share of the second stage's
    # variance the difference of their roots on the same cells keeps (None: no baseline)
    difference: float | None = None
    paired: float = 1.0


def variance_components(layout: Layout, values: np.ndarray) -> list[Components]:
    """Per dataset, for one axis (``values``: the full grid's normalised deltas)."""
    s = full_scores(layout, values)
    with np.errstate(invalid="ignore", divide="ignore"):  # a prompt with s = 0 has no z
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
                stratum_parts=stratum_parts(layout, z, j),
            )
        )
    return out


def predicted_estimate(
    parts: Sequence[Components],
    prompts: int,
    variants: float,
    scope: Scope = "grid",
    counts: Sequence[np.ndarray] | None = None,
) -> Estimate:
    """The pooled estimate's predicted variance, with the degrees of freedom its interval
    will take: each dataset's (``dataset_df``), Satterthwaite's over the datasets (a normal
    quantile at 95% predicted the half-width 10-12% short at 4 prompts per dataset over 3
    rounds, 6% at 8). ``counts``: per dataset, the typical prompt's cells per stratum as
    the design allocates them (allocation.py); without, each stratum its proportional
    share. With a baseline, the estimator the run takes: the one over the baseline's
    prompts where it is narrower than the design alone, else the control variate
    (baseline.py)."""
    alone, controlled, across, sampled = [], [], [], []
    for j, c in enumerate(parts):
        n = min(prompts, c.prompts) if scope == "grid" else prompts
        m = min(variants, c.variants)
        if counts is not None and c.stratum_parts is not None:
            sample = c.sample * allocated_sample(c.stratum_parts, counts[j])
            second = allocated_within(c.stratum_parts, counts[j]) + sample
        else:
            second = c.within * max(1 / m - 1 / c.variants, 0.0) + c.sample / m
        # Cochran 1977 theorem 10.1: the second stage's term is over n in both scopes
        first = (1 - n / c.prompts) * c.between if scope == "grid" else c.between
        alone.append((first + second) / n)
        controlled.append((first + second * c.controlled) / n)
        # its stated variance: the observed spread over n, no finite-population correction
        across.append(np.inf if c.difference is None else (c.difference + second * c.paired) / n)
        sampled.append(n)
    best = across if sum(across) < sum(alone) else controlled
    datasets = [
        Estimate(0.0, float(v), n, dataset_df(n, float(v)))
        for v, n in zip(best, sampled, strict=True)
    ]
    pooled = pooled_estimate(datasets)
    assert pooled is not None  # one dataset at least
    return pooled


def predicted_half_width(
    parts: Sequence[Components],
    prompts: int,
    variants: float,
    scope: Scope = "grid",
    counts: Sequence[np.ndarray] | None = None,
    rounds: int = 1,
) -> float:
    """At the level of the run's last look (``sequential.interval_level``)."""
    estimate = predicted_estimate(parts, prompts, variants, scope, counts)
    return estimate.half_width(interval_level(rounds, rounds))


def allocated_half_widths(
    components: Mapping[str, Sequence[Components]],
    prompts: int,
    variants: float,
    *,
    rounds: int,
    target: Mapping[str, float] | None = None,
    scope: Scope = "grid",
) -> dict[str, float]:
    """Per axis, the predicted half-width at the design's own allocation of ``variants``
    cells per prompt over ``rounds`` rounds (allocation.py), every axis watched as the run
    watches it (``target``, or relative precision without one)."""
    strata = {
        axis: [c.stratum_parts for c in parts if c.stratum_parts is not None]
        for axis, parts in components.items()
    }
    if any(len(p) != len(components[a]) for a, p in strata.items()):
        return {
            a: predicted_half_width(p, prompts, variants, scope, rounds=rounds)
            for a, p in components.items()
        }
    weights = axis_weights({a: _sgs(p) for a, p in components.items()}, target)
    counts = dataset_counts(strata, variants, rounds, weights)
    return {
        axis: predicted_half_width(parts, prompts, variants, scope, counts, rounds)
        for axis, parts in components.items()
    }


@dataclass(frozen=True)
class PlannedDesign:
    prompts: int  # per dataset
    variants: int  # per prompt
    generations: int
    half_widths: dict[str, float]
    score: float  # the worst axis' half-width over its target (smaller is better)
    samples: int = 1  # K, answers per prompt text
    level: Level | None = None  # the design's strata (``plan``)
    no_event: dict[str, float] | None = None  # per axis, ``no_event_share`` (``plan``)


def _sgs(parts: Sequence[Components]) -> float:
    value = float(np.mean([c.sgs for c in parts]))
    return value if value > 0 else 1.0


@dataclass(frozen=True)
class Pilot:
    """What a plan reads from a finished run: per stratum level, each axis' components per
    dataset (``components[level][axis]``); per level, the variants per prompt one round needs
    (two per stratum, the largest over datasets); the pilot's K and, per axis, the sampling
    share q of the within-prompt variance (absent: not estimated)."""

    components: Mapping[Level, Mapping[str, Sequence[Components]]]
    minimum: Mapping[Level, int]
    variants: int  # the grid's variants per prompt (the largest over datasets, rounded)
    samples: int = 1
    sample_share: Mapping[str, float] | None = None
    # per axis: each prompt's measured cells and, of them, the cells with a non-zero delta
    events: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None

    def generations(self) -> int:
        """The full run's generations: every prompt's variants, base and replay, x K."""
        first = next(iter(self.components[LEVELS[0]].values()))
        return round(sum(c.prompts * (c.variants + PROMPT_OVERHEAD) for c in first)) * self.samples


def pilot_from_grid(
    gv: GridValues,
    samples: int = 1,
    sample_share: Mapping[str, float] | None = None,
    baseline: np.ndarray | None = None,
) -> Pilot:
    """``baseline``: the last release's values of the same cells (cells x axes), the run's
    control variate: the second stage's variance is what it leaves (``planned_components``)."""
    components: dict[Level, dict[str, list[Components]]] = {}
    minimum: dict[Level, int] = {}
    for level in LEVELS:
        layout = index_grid(gv.grid, level)
        components[level] = {
            axis: variance_components(layout, gv.values[:, a]) for a, axis in enumerate(gv.axes)
        }
        if baseline is not None:
            components[level] = planned_components(
                components[level], layout, gv.values, baseline, gv.axes
            )
        per_dataset = np.bincount(
            layout.stratum_dataset, weights=minimum_counts(layout), minlength=len(layout.datasets)
        )
        minimum[level] = int(per_dataset.max())
    first = next(iter(components[LEVELS[0]].values()))
    variants = round(max(c.variants for c in first))
    codes = index_grid(gv.grid, LEVELS[0]).prompt_code
    events = {}
    for a, axis in enumerate(gv.axes):
        seen = np.isfinite(gv.values[:, a])
        measured = np.bincount(codes, weights=seen)
        nonzero = np.bincount(codes, weights=seen & (np.nan_to_num(gv.values[:, a]) != 0))
        events[axis] = (measured, nonzero)
    return Pilot(components, minimum, variants, samples, sample_share, events)


def no_event_share(measured: np.ndarray, nonzero: np.ndarray, variants: int) -> float:
    """Among the prompts with a non-zero delta, the expected share whose ``variants`` cells
    (a simple random sample of the prompt's measured cells) are all 0: for a 0/1-like axis
    (MR, and BLEU at T = 0) such a prompt's root rests on its dataset's fit, not on its own
    cells (estimate.py).
    Hypergeometric: prod_{t < m} (V - k - t) / (V - t)."""
    shares = [
        no_event_chance(v, k, variants) for v, k in zip(measured, nonzero, strict=True) if k > 0
    ]
    return float(np.mean(shares)) if shares else 0.0


def no_event_chance(measured: float, nonzero: float, variants: float) -> float:
    """The chance that ``variants`` cells drawn without replacement from a prompt's
    ``measured`` cells miss all its ``nonzero`` ones (1 when it has none)."""
    t = np.arange(int(min(variants, measured)))
    return float(np.prod(np.clip((measured - nonzero - t) / np.maximum(measured - t, 1), 0.0, 1.0)))


def level_for(pilot: Pilot, variants: int) -> Level | None:
    """The finest strata whose first round fits ``variants`` per prompt (None: none does)."""
    return next((lv for lv in LEVELS if pilot.minimum[lv] <= variants), None)


def at_samples(
    parts: Sequence[Components], share: float | None, k0: int, k: int
) -> list[Components]:
    """The components at K = ``k`` from a pilot at ``k0``: ``within`` split into the
    variants' own spread, (1 - q) within, and the sampling part, q within k0 / k (``share``:
    q; None: unchanged). With the split the target is the grid's expected value over
    sampling, not one run's realised grid."""
    if share is None:
        return list(parts)
    return [
        replace(
            c,
            within=c.within * (1 - share),
            sample=c.within * share * k0 / k,
            stratum_parts=c.stratum_parts and c.stratum_parts.scaled(1 - share),
        )
        for c in parts
    ]


def plan(
    pilot: Pilot,
    generations: int,
    *,
    target: Mapping[str, float] | None = None,
    scope: Scope = "grid",
    max_prompts: int | None = None,
    samples: Sequence[int] | None = None,
    top: int = 5,
    max_no_event: float | None = None,
    rounds: int = DEFAULT_ROUNDS,
) -> list[PlannedDesign]:
    """Designs affordable with ``generations`` (n D (m + 2) K of them), best first: every n
    of the pool, every K of ``samples`` (default: the pilot's), m the most the rest affords,
    the strata the finest that m fits (a design below the coarsest is not a design), each
    half-width at the design's own allocation over ``rounds`` rounds (allocation.py), and
    only the strata and prompts a run would take (``_as_run``). ``max_no_event``: only
    designs whose every axis' ``no_event_share`` is at most this."""
    first = next(iter(pilot.components[LEVELS[0]].values()))
    datasets = len(first)
    pool = max_prompts or (
        min(c.prompts for c in first) if scope == "grid" else 10 * max(c.prompts for c in first)
    )
    # K varies only where asked; then every K, the pilot's too, is planned for the grid's
    # expected value over sampling (at_samples)
    share = (pilot.sample_share or {}) if samples else {}
    found = []
    ks = samples or (pilot.samples,)
    for k in ks:
        for n in range(2, pool + 1):
            m = min(pilot.variants, generations // (n * datasets * k) - PROMPT_OVERHEAD)
            level = level_for(pilot, m)
            if level is None:
                break
            at_k = {
                axis: at_samples(parts, share.get(axis), pilot.samples, k)
                for axis, parts in pilot.components[level].items()
            }
            widths = allocated_half_widths(at_k, n, m, rounds=rounds, target=target, scope=scope)
            ratios = [
                widths[a] / (target[a] if target and a in target else _sgs(first_parts))
                for a, first_parts in pilot.components[level].items()
                if not target or a in target
            ]
            cost = n * datasets * (m + PROMPT_OVERHEAD) * k
            empty = {
                axis: no_event_share(measured, nonzero, m)
                for axis, (measured, nonzero) in (pilot.events or {}).items()
            }
            found.append(PlannedDesign(n, m, cost, widths, max(ratios), k, level, empty))
    found = [d for k in ks for d in _as_run(found, k, pool)]
    if max_no_event is not None:
        found = [d for d in found if max((d.no_event or {}).values(), default=0.0) <= max_no_event]
    return sorted(found, key=lambda d: (d.score, d.generations))[:top]


def _as_run(found: Sequence[PlannedDesign], samples: int, pool: int) -> list[PlannedDesign]:
    """The designs at K = ``samples`` that a run would take (schedule.py: subtypes before
    prompts): finer than family strata over at least ``schedule.finer_floor`` prompts per
    dataset, and family strata only where no such design fits the budget. Family strata
    over many prompts predict the narrower interval, but on a real run's cells they were
    the intervals that missed; subtype strata over 2 of 8 prompts covered 0.63-0.78
    (docs/guide/budget-validation.md)."""
    at_k = [d for d in found if d.samples == samples]
    floor = int(finer_floor(np.array(pool)))
    finer = [d for d in at_k if d.level != LEVELS[-1] and d.prompts >= floor]
    return finer or [d for d in at_k if d.level == LEVELS[-1]] or at_k


def sample_shares(
    table: pl.DataFrame | None, model: str, axes: Sequence[str], k0: int
) -> tuple[dict[str, float], dict[str, str]]:
    """Per axis, q from a run's ``variance_components.parquet`` (its pooled row for
    ``model``), or the reason it is not estimated."""
    shares: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for axis in axes:
        if k0 <= 1:
            reasons[axis] = "one answer per prompt text (K = 1): a run at K > 1 estimates it"
            continue
        if table is None:
            reasons[axis] = "the run has no variance_components.parquet"
            continue
        rows = table.filter(
            (pl.col("model") == model) & (pl.col("dataset") == POOLED) & (pl.col("axis") == axis)
        )
        if rows.is_empty():
            reasons[axis] = "no row in variance_components.parquet"
            continue
        row = rows.row(0, named=True)
        variant, sample = row.get("s2_variant"), row.get("s2_sample")
        if variant is None or sample is None or variant + sample / k0 <= 0:
            reasons[axis] = row.get("missing_reason") or "not decomposed"
            continue
        shares[axis] = (sample / k0) / (variant + sample / k0)
    return shares, reasons


def planned_components(
    components: Mapping[str, Sequence[Components]],
    layout: Layout,
    pilot: np.ndarray,
    baseline: np.ndarray,
    axes: Sequence[str],
) -> dict[str, list[Components]]:
    """The planner's components (per axis, per dataset) with the second stage's variance
    scaled by what the baseline leaves of it, R per dataset, measured between two full grids
    of one layout (``pilot``, ``baseline``: cells x ``axes``)."""
    every = np.ones(len(layout.stratum), dtype=bool)
    out = {}
    for a, axis in enumerate(axes):
        roots = (full_scores(layout, pilot[:, a]), full_scores(layout, baseline[:, a]))
        control = measured_control(layout, pilot[:, a], baseline[:, a], every, roots)
        diff = roots[0] - roots[1]
        out[axis] = [
            replace(
                c,
                controlled=float(r),
                difference=float(np.nanvar(diff[layout.prompt_dataset == j], ddof=1)),
                paired=float(p),
            )
            for j, (c, r, p) in enumerate(
                zip(components[axis], control.ratio, control.paired, strict=True)
            )
        ]
    return out
