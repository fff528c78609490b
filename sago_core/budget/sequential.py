"""Rounds: allocate each round's cells, estimate, test, and stop when the answer is known.

Allocation. After the first round (the pilot), each sampled prompt i gets a weight per
stratum h of its dataset, a_ih = sum over the watched axes of W_h^2 S_h(-i)^2 / sum_h' (the
same), W_h the stratum's share of the prompt's variants and S_h(-i) the within-prompt spread
of the linearised score z = d^2 / (2 s) (the root's first-order term, so the allocation is
for SGS, not for the mean square) pooled over the dataset's OTHER prompts, each axis' weights
scaled to sum to one so no axis' units dominate. The variance of the prompt's estimate is
then, up to a constant, sum_h a_ih (1/M_ih - 1/V_ih), and adding cells one at a time to the
stratum with the largest drop a_ih (1/M - 1/(M+1)) is the integer Neyman allocation (Cochran
1977 section 5.5; greedy steps are optimal because the objective is convex and separable).
Each sampled prompt gets an equal share of the round's cells.

The weights are computed once, from the pilot, and frozen: prompt i's counts in every later
round are then a function of the seed and the OTHER prompts' pilot cells, which do not depend
on which of i's cells were drawn (design.py: each prompt reads its own kind order), so i's
realised counts are fixed given them and the realised-count estimator (estimate.py) keeps
its exact inclusion probabilities. Weights recomputed after every round from every observed
cell (the earlier rule) let i's round-1 values steer the others' round-2 counts, which
steered i's round-3 weights: the per-prompt mean square came out 2-4% low (dataset z -4.5
over 1,500 replays of a 3-round design); frozen leave-one-out weights: within simulation
error of 0 (tests/unit/test_budget_sequential.py). For the same reason an axis' weight does
not fall to 0 once its target is met (whether it is met depends on every prompt's values).
The first round, with nothing observed, is proportional. Prompts vs variants per prompt is
decided once, before the first round, by the schedule (schedule.py); ``sago design``
(planner.py) predicts the same designs' intervals from a pilot's variance components.

Stopping. An axis is done when its design half-width meets its target, or when its pooled
one-sided test at each eps (H0 E[s] <= eps, a t-test over every sampled prompt's root whose
variance over prompts is the roots' spread plus their mean posterior variance, since the
empirical-Bayes roots are shrunk towards their dataset's mean) is decided at the look's
level: rejected (the axis exceeds eps) or its mirror rejected (the axis is below eps). The
watched axes are the target's axes, or every axis without a target. The run stops
when every watched axis is done, or the budget is spent.

Looking between rounds: a Haybittle-Peto alpha-spending rule (Haybittle 1971, Br J Radiol
44:793; Peto et al. 1976, Br J Cancer 34:585): every interim look tests at the fixed small
level ``INTERIM_ALPHA`` (one-sided z = 3, 0.00135) and the last planned look at alpha minus
what the interim looks spent. By the Bonferroni inequality the chance of any false rejection
over all looks is at most the sum of the looks' levels, alpha, whatever the correlation
between looks and whenever the run stops; the final look keeps nearly the whole alpha, so
verdicts at the end are nearly as powerful as a single test. A run stopped early by its
targets reports an undecided test as not significant at the level of the look it stopped at.
Each dataset's own tests are decided at the same looks and levels (each with the same error
control), but the run does not wait for them. These verdicts, with the rule's p-values
(``Verdict``), are the ones the run's summary and report show (scoring/summary.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from sago_core.budget.baseline import baseline_estimates
from sago_core.budget.design import Design, Layout, minimum_counts, select_cells
from sago_core.budget.estimate import Estimate, PromptEstimates, axis_estimates, prompt_spread
from sago_core.registry.axes import axis_spec
from sago_core.vocabulary import EPSILONS

INTERIM_ALPHA = 0.0013498980316301  # one-sided P(Z > 3)


def look_levels(rounds: int, alpha: float) -> tuple[float, ...]:
    """Each look's one-sided level: interim looks at z = 3, the last at what is left."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    interim = min(INTERIM_ALPHA, alpha / (2 * rounds))
    return (interim,) * (rounds - 1) + (alpha - interim * (rounds - 1),)


def interval_level(look: int, rounds: int) -> float:
    """The two-sided level of the intervals reported after ``look`` of ``rounds``: the
    repeated confidence interval of the spending rule at 0.025 a side (an interim look's at
    z = 3). Where the run stops depends on the data (every verdict decided), so an interval
    at 95% whatever the look covered 0.87 on Act at 200 prompts per dataset; these cover
    at 95% jointly over the looks (Bonferroni), so at whichever look the run stops."""
    return 1 - 2 * look_levels(rounds, 0.025)[look - 1]


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
    sizes = design.layout.sizes
    if cells >= int((sizes[sampled] - np.minimum(counts[sampled], sizes[sampled])).sum()):
        full = counts.copy()  # every cell left fits: ask them all (a budget of the grid)
        full[sampled] = sizes[sampled]
        return full
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
    (undecided), with the look that decided it (1-based). ``p_above`` / ``p_below``: the
    rule's p-value of each direction, min over the looks taken of p_k x alpha / level_k,
    so that it is below alpha exactly when the rule decided that way, and a valid p-value
    at any level (Bonferroni over the looks with weights level_k / alpha)."""

    decision: str | None
    look: int | None
    p_above: float | None = None
    p_below: float | None = None


@dataclass
class AxisState:
    """``verdicts``: the pooled tests, which the stopping rule waits for; ``by_dataset``:
    each dataset's own tests (dataset index -> eps -> verdict), decided at the same looks
    and levels, not waited for."""

    estimate: Estimate | None = None
    verdicts: dict[float, Verdict] = field(default_factory=dict)
    met: bool = False
    by_dataset: dict[int, dict[float, Verdict]] = field(default_factory=dict)


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
    level: float = 0.95  # the intervals' two-sided level at the look it stopped after

    @property
    def cells(self) -> int:
        return int(self.observed.sum())


def _t_pvalues(
    layout: Layout, prompts: PromptEstimates, eps: float, dataset: int | None = None
) -> tuple[float, float] | None:
    """(p of H0 E[s] <= eps, p of its mirror E[s] >= eps), one-sided t-tests over the
    sampled prompts' roots (of one ``dataset``, or all), n - 1 degrees of freedom. The
    standard error is s_1 (``prompt_spread``) over sqrt(n), plus the error each dataset's
    fitted prior shares among its prompts (estimate.py); at a budget of the whole grid both
    are 0 and this is the full run's t-test. Where the estimate took the baseline's prompts
    (``PromptEstimates.tests``), its own mean, variance and degrees of freedom."""
    if prompts.tests is not None:
        if dataset not in prompts.tests:
            return None
        mean, variance, dof = prompts.tests[dataset]
        return _t_test(mean, float(np.sqrt(max(variance, 0.0))), dof, eps)
    keep = np.isfinite(prompts.s)
    if dataset is not None:
        keep &= layout.prompt_dataset == dataset
    values = prompts.s[keep]
    n = len(values)
    if n < 2:
        return None
    spread = prompt_spread(values, np.nan_to_num(prompts.s_var[keep]), prompts.shrunk)
    share = np.bincount(layout.prompt_dataset[keep], minlength=len(layout.datasets)) / n
    sd = float(np.sqrt(spread + n * float((share**2 * prompts.prior_var).sum())))
    return _t_test(float(values.mean()), sd / np.sqrt(n), n - 1, eps)


def _t_test(mean: float, se: float, dof: float, eps: float) -> tuple[float, float]:
    if se == 0:
        return (0.0, 1.0) if mean > eps else (1.0, 0.0 if mean < eps else 1.0)
    from scipy import stats

    t = (mean - eps) / se
    return float(stats.t.sf(t, dof)), float(stats.t.cdf(t, dof))


def _decide(
    state: AxisState,
    layout: Layout,
    prompts: PromptEstimates,
    epsilons: Sequence[float],
    levels: Sequence[float],
    look: int,
) -> None:
    """Each undecided test (pooled, then each dataset's) at this look's level."""
    level = levels[look - 1]
    # a look at level 0 decides nothing, and its p-value on the alpha scale is 1
    scale = sum(levels) / level if level > 0 else np.inf
    groups: list[tuple[dict[float, Verdict], int | None]] = [(state.verdicts, None)]
    groups += [(state.by_dataset.setdefault(j, {}), j) for j in range(len(layout.datasets))]
    for verdicts, dataset in groups:
        for eps in epsilons:
            before = verdicts.get(eps, Verdict(None, None))
            if before.decision is not None:
                continue
            p = _t_pvalues(layout, prompts, eps, dataset)
            if p is None:
                verdicts[eps] = before
                continue
            up, down = (
                min(_lowest(old, x * scale if np.isfinite(scale) else 1.0), 1.0)
                for old, x in zip((before.p_above, before.p_below), p, strict=True)
            )
            decision = "above" if p[0] < level else "below" if p[1] < level else None
            verdicts[eps] = Verdict(decision, look if decision else None, up, down)


def _lowest(old: float | None, new: float) -> float:
    return new if old is None else min(old, new)


Oracle = Callable[[np.ndarray], np.ndarray]


def run_budgeted(
    design: Design,
    totals: Sequence[int],
    oracle: Oracle,
    axes: Sequence[str],
    *,
    target: Mapping[str, float] | None = None,
    epsilons: Sequence[float] | Mapping[str, Sequence[float]] = EPSILONS,
    alpha: float = 0.05,
    correct: bool = True,
    levels: Sequence[float] | None = None,
    baseline: np.ndarray | None = None,
) -> BudgetResult:
    """Run the rounds (``totals``: cumulative cells after each, schedule.py).
    ``oracle(mask)`` returns the normalised deltas (cells x axes, NaN
    where missing) of the newly asked cells in ``mask``: a replay reads a finished grid, a
    run generates them. ``epsilons``: the tolerances tested, for every axis or per axis.
    ``levels``: each look's level instead of the spending rule's (a test of the rule).
    ``baseline``: a baseline run's deltas (cells x axes), the estimator's control variate."""
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
            per_prompt, _, pooled = (
                axis_estimates(layout, column, n, correct, observed, _continuous(axis))
                if baseline is None
                else baseline_estimates(
                    layout,
                    column,
                    baseline[:, a_index],
                    n,
                    correct,
                    observed,
                    _continuous(axis),
                )
            )
            prompts[axis] = per_prompt
            state = states[axis]
            state.estimate = pooled
            width = None if pooled is None else pooled.half_width(interval_level(k, rounds))
            widths[axis] = width
            estimates[axis] = None if pooled is None else pooled.value
            state.met = axis in target and width is not None and width <= target[axis]
            _decide(state, layout, per_prompt, tolerances[axis], levels, k)
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
        if k == 1:  # frozen after the pilot (module docstring)
            weight = _weights(layout, values, observed, watched, axes, prompts)
    level = interval_level(len(records), rounds)
    return BudgetResult(records, states, prompts, observed, reason, int(totals[-1]), values, level)


def _continuous(axis: str) -> bool:
    """Whether the axis declares continuous cells (the estimator's root, estimate.py); a
    name no axis is registered under gets the default root."""
    try:
        return axis_spec(axis).continuous
    except KeyError:
        return False


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
    watched: Sequence[str],
    axes: Sequence[str],
    prompts: Mapping[str, PromptEstimates],
) -> np.ndarray:
    """Prompts x strata: a_ih summed over the watched axes, each axis' weights over a
    prompt's strata scaled to sum to one (module docstring)."""
    share = _shares(layout)
    weight = np.zeros(layout.sizes.shape)
    for a_index, axis in enumerate(axes):
        if axis not in watched or axis not in prompts:
            continue
        column = np.where(observed, values[:, a_index], np.nan)
        spread = stratum_spread(layout, column, prompts[axis])
        a = share[None, :] ** 2 * spread**2
        total = a.sum(axis=1, keepdims=True)
        weight += np.divide(a, total, out=np.zeros_like(a), where=total > 0)
    if not weight.any():
        weight = np.broadcast_to(share**2, layout.sizes.shape).copy()
    return weight
