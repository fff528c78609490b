"""Rounds: allocate each round's cells, estimate, test, and stop when the answer is known.

Allocation. After a round, each sampled prompt i gets a weight per stratum h of its
dataset, a_ih = sum over axes of w_axis W_h^2 S_h(-i)^2: W_h the stratum's share of the
prompt's variants, S_h(-i) the within-prompt spread of the linearised score z = d^2 / (2 s)
(the root's first-order term, so the allocation is for SGS, not for the mean square) pooled
over the dataset's OTHER prompts. The variance of the prompt's estimate is then, up to a
constant, sum_h a_ih (1/M_ih - 1/V_ih), and adding cells one at a time to the stratum with
the largest drop a_ih (1/M - 1/(M+1)) is the integer Neyman allocation (Cochran 1977
section 5.5; greedy steps are optimal because the objective is convex and separable). Each
sampled prompt gets an equal share of the round's cells. Leaving the prompt's own cells out
of its weights matters: with the stratum's spread pooled over every prompt, a prompt whose
first cells were extreme drew more cells, which pulled its mean square back (regression to
the mean), and SGS came out biased low by 0.3-0.6 of its standard error with intervals
covering 0.82-0.95 at 10% of the synthetic paper grid (proportional allocation: 0.88-0.955).
``w_axis`` is 1/target^2 for an axis whose interval is still wider than its target (0 once
it is met), or 1/SGS^2 (relative precision) for every axis when no target is set. The first
round, with nothing observed, is proportional (S = 1). Prompts vs variants per prompt is
decided once, by the planner (``planner.best_designs``), from the two-stage variance
components.

Stopping. An axis is done when its design half-width meets its target, or when its pooled
one-sided test at each eps (spec section 6: H0 E[s] <= eps, t-test over every sampled
prompt's corrected score; the per-dataset tests are not part of the rule) is decided
at the look's level: rejected (the axis exceeds eps) or its mirror rejected (the axis is below
eps). The watched axes are the target's axes, or every axis without a target. The run stops
when every watched axis is done, or the budget is spent.

Looking between rounds: a Haybittle-Peto alpha-spending rule (Haybittle 1971, Br J Radiol
44:793; Peto et al. 1976, Br J Cancer 34:585): every interim look tests at the fixed small
level ``INTERIM_ALPHA`` (one-sided z = 3, 0.00135) and the last planned look at alpha minus
what the interim looks spent. By the Bonferroni inequality the chance of any false rejection
over all looks is at most the sum of the looks' levels, alpha, whatever the correlation
between looks and whenever the run stops; the final look keeps nearly the whole alpha, so
verdicts at the end are nearly as powerful as a single test. A run stopped early by its
targets reports an undecided test as not significant at the level of the look it stopped at.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sago_core.budget.design import Design, Layout, minimum_counts, select_cells
from sago_core.budget.estimate import RESAMPLES, Estimate, PromptEstimates, axis_estimates

INTERIM_ALPHA = 0.0013498980316301  # one-sided P(Z > 3)


def look_levels(rounds: int, alpha: float) -> tuple[float, ...]:
    """Each look's one-sided level: interim looks at z = 3, the last at what is left."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    interim = min(INTERIM_ALPHA, alpha / (2 * rounds))
    return (interim,) * (rounds - 1) + (alpha - interim * (rounds - 1),)


def allocate(counts: np.ndarray, weight: np.ndarray, ceiling: np.ndarray, cells: int) -> np.ndarray:
    """Raise ``counts`` (one prompt's cells per stratum) by ``cells`` greedy Neyman steps,
    each stratum at most its ``ceiling``. ``weight``: a_h per stratum."""
    counts = counts.copy()

    def gain(h: int) -> float:
        m = counts[h]
        return float(weight[h] * (1 / m - 1 / (m + 1))) if m > 0 else np.inf

    heap = [(-gain(h), h) for h in range(len(counts)) if counts[h] < ceiling[h]]
    heapq.heapify(heap)
    for _ in range(cells):
        if not heap:
            break
        _, h = heapq.heappop(heap)
        counts[h] += 1
        if counts[h] < ceiling[h]:
            heapq.heappush(heap, (-gain(h), h))
    return counts


def allocate_round(
    design: Design, counts: np.ndarray, weight: np.ndarray, cells: int
) -> np.ndarray:
    """Share ``cells`` more equally over the sampled prompts (in their sampled order), each
    prompt's share allocated over its strata by ``allocate``. ``counts``, ``weight``:
    prompts x strata."""
    sampled = [
        i for j, order in enumerate(design.prompt_order) for i in order[: design.sampled_prompts[j]]
    ]
    share, extra = divmod(max(cells, 0), max(len(sampled), 1))
    counts = counts.copy()
    for rank, i in enumerate(sampled):
        counts[i] = allocate(counts[i], weight[i], design.layout.sizes[i], share + (rank < extra))
    return counts


def cells_of(design: Design, counts: np.ndarray) -> int:
    """Cells asked for at these counts (each capped by what each prompt kept)."""
    return int(select_cells(design, counts).sum())


def stratum_spread(layout: Layout, values: np.ndarray, prompts: PromptEstimates) -> np.ndarray:
    """Prompts x strata: the within-prompt SD of z = d^2 / (2 s_i) in each stratum, pooled
    over the dataset's other prompts (leave-one-out); where they hold no two cells of the
    stratum, the SD over all its cells."""
    s = prompts.root[layout.prompt_code]
    seen = np.isfinite(values) & np.isfinite(s) & (s > 0)
    z = np.where(seen, np.where(seen, values, 0.0) ** 2 / (2 * np.where(seen, s, 1.0)), 0.0)
    shape = layout.sizes.shape
    n = np.zeros(shape)
    t1 = np.zeros(shape)
    t2 = np.zeros(shape)
    np.add.at(n, (layout.prompt_code, layout.stratum), seen)
    np.add.at(t1, (layout.prompt_code, layout.stratum), z)
    np.add.at(t2, (layout.prompt_code, layout.stratum), z**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        ss = np.where(n >= 2, t2 - t1**2 / n, 0.0)
        dof = np.where(n >= 2, n - 1, 0.0)
        others_ss = ss.sum(axis=0)[None, :] - ss
        others_dof = dof.sum(axis=0)[None, :] - dof
        spread = np.sqrt(np.where(others_dof > 0, np.maximum(others_ss, 0) / others_dof, np.nan))
    for h in range(shape[1]):
        zh = z[seen & (layout.stratum == h)]
        fallback = float(np.std(zh, ddof=1)) if len(zh) >= 2 else 0.0
        column = spread[:, h]
        column[~np.isfinite(column)] = fallback
    return spread


@dataclass(frozen=True)
class Verdict:
    """One test at one eps: 'above' (H0 rejected), 'below' (the mirror rejected) or None
    (undecided), with the look that decided it (1-based)."""

    decision: str | None
    look: int | None


@dataclass
class AxisState:
    estimate: Estimate | None = None
    verdicts: dict[float, Verdict] = field(default_factory=dict)
    met: bool = False


@dataclass(frozen=True)
class RoundRecord:
    round: int
    cells: int
    counts: np.ndarray
    half_widths: dict[str, float | None]
    estimates: dict[str, float | None]


@dataclass
class BudgetResult:
    rounds: list[RoundRecord]
    axes: dict[str, AxisState]
    prompts: dict[str, PromptEstimates]
    observed: np.ndarray  # mask over the grid's cells
    stop_reason: str
    budget_cells: int
    values: np.ndarray | None = None  # cells x axes as measured (NaN: not asked or missing)

    @property
    def cells(self) -> int:
        return int(self.observed.sum())


def _t_pvalues(scores: np.ndarray, eps: float) -> tuple[float, float] | None:
    """(p of H0 E[s] <= eps, p of its mirror E[s] >= eps), one-sided t-tests."""
    values = scores[np.isfinite(scores)]
    n = len(values)
    if n < 2:
        return None
    sd = float(np.std(values, ddof=1))
    mean = float(values.mean())
    if sd == 0:
        return (0.0, 1.0) if mean > eps else (1.0, 0.0 if mean < eps else 1.0)
    from scipy import stats

    t = (mean - eps) / (sd / np.sqrt(n))
    return float(stats.t.sf(t, n - 1)), float(stats.t.cdf(t, n - 1))


def _decide(
    state: AxisState, scores: np.ndarray, epsilons: Sequence[float], level: float, look: int
) -> None:
    for eps in epsilons:
        if state.verdicts.get(eps, Verdict(None, None)).decision is not None:
            continue
        p = _t_pvalues(scores, eps)
        decision = None
        if p is not None and p[0] < level:
            decision = "above"
        elif p is not None and p[1] < level:
            decision = "below"
        state.verdicts[eps] = Verdict(decision, look if decision else None)


Oracle = Callable[[np.ndarray], np.ndarray]


def run_budgeted(
    design: Design,
    totals: Sequence[int],
    oracle: Oracle,
    axes: Sequence[str],
    *,
    target: Mapping[str, float] | None = None,
    epsilons: Sequence[float] | Mapping[str, Sequence[float]] = (0.01, 0.05, 0.10),
    alpha: float = 0.05,
    correct: bool = True,
    levels: Sequence[float] | None = None,
    resamples: int = RESAMPLES,
) -> BudgetResult:
    """Run the rounds (``totals``: cumulative cells after each, schedule.py).
    ``oracle(mask)`` returns the normalised deltas (cells x axes, NaN
    where missing) of the newly asked cells in ``mask``: a replay reads a finished grid, a
    run generates them. ``epsilons``: the tolerances tested, for every axis or per axis.
    ``levels``: each look's level instead of the spending rule's (a test of the rule)."""
    layout = design.layout
    n = design.sampled_prompts
    target = dict(target or {})
    watched = [a for a in axes if a in target] or list(axes)
    values = np.full((len(layout.stratum), len(axes)), np.nan)
    observed = np.zeros(len(layout.stratum), dtype=bool)
    counts = np.zeros(layout.sizes.shape, dtype=np.int64)
    floor = np.where(
        design.prompt_sampled()[:, None],
        np.minimum(minimum_counts(layout)[None, :], layout.sizes),
        0,
    )
    rounds = len(totals)
    levels = tuple(levels) if levels is not None else look_levels(rounds, alpha)
    tolerances = {
        a: tuple(epsilons[a]) if isinstance(epsilons, Mapping) else tuple(epsilons) for a in axes
    }
    states = {a: AxisState() for a in axes}
    records: list[RoundRecord] = []
    weight = np.broadcast_to(_shares(layout) ** 2, layout.sizes.shape)
    prompts: dict[str, PromptEstimates] = {}
    reason = "budget spent"
    for k, total in enumerate(totals, start=1):
        base = np.maximum(counts, floor)
        counts = allocate_round(design, base, weight, total - cells_of(design, base))
        mask = select_cells(design, counts)
        new = mask & ~observed
        if new.any():
            values[new] = oracle(new)
        observed |= mask
        widths: dict[str, float | None] = {}
        estimates: dict[str, float | None] = {}
        for a_index, axis in enumerate(axes):
            column = np.where(observed, values[:, a_index], np.nan)
            seed = design.seed * 1_000_003 + k * 101 + a_index
            per_prompt, _, pooled = axis_estimates(layout, column, n, correct, seed, resamples)
            prompts[axis] = per_prompt
            state = states[axis]
            state.estimate = pooled
            width = None if pooled is None else pooled.half_width()
            widths[axis] = width
            estimates[axis] = None if pooled is None else pooled.value
            state.met = axis in target and width is not None and width <= target[axis]
            _decide(state, per_prompt.s, tolerances[axis], levels[k - 1], k)
        records.append(RoundRecord(k, int(observed.sum()), counts.copy(), widths, estimates))
        # an axis nothing measured (a model without hidden states has no Act) is not watched
        done = all(
            states[a].met
            or states[a].estimate is None
            or all(v.decision is not None for v in states[a].verdicts.values())
            for a in watched
        )
        if done:
            reason = "every target met or verdict decided"
            break
        if k == rounds:
            break
        weight = _weights(layout, values, observed, axes, states, target, prompts)
    return BudgetResult(records, states, prompts, observed, reason, int(totals[-1]), values)


def _shares(layout: Layout) -> np.ndarray:
    """W_h: a stratum's share of a prompt's variants (the dataset's typical prompt)."""
    per_prompt = layout.sizes / np.maximum(layout.sizes.sum(axis=1, keepdims=True), 1)
    share = np.zeros(len(layout.strata))
    for h in range(len(share)):
        members = layout.prompt_dataset == layout.stratum_dataset[h]
        share[h] = per_prompt[members, h].mean()
    return share


def _weights(
    layout: Layout,
    values: np.ndarray,
    observed: np.ndarray,
    axes: Sequence[str],
    states: Mapping[str, AxisState],
    target: Mapping[str, float],
    prompts: Mapping[str, PromptEstimates],
) -> np.ndarray:
    """Prompts x strata: a_ih summed over the axes still being narrowed."""
    share = _shares(layout)
    weight = np.zeros(layout.sizes.shape)
    for a_index, axis in enumerate(axes):
        state = states[axis]
        if state.estimate is None:
            continue
        if target:
            if axis not in target or state.met:
                continue
            w = 1.0 / target[axis] ** 2
        else:
            w = 1.0 / max(state.estimate.value, 1e-6) ** 2
        column = np.where(observed, values[:, a_index], np.nan)
        spread = stratum_spread(layout, column, prompts[axis])
        weight += w * share[None, :] ** 2 * spread**2
    if not weight.any():
        weight = np.broadcast_to(share**2, layout.sizes.shape).copy()
    return weight
