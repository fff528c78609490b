"""How many cells each round asks for, and at which stratum level.

The budget B (cells) is spent in at most R rounds; the first round must give every sampled
prompt two cells in every stratum (design.minimum_counts). The level is the finest
(design.LEVELS) whose minimum round fits B; the first round is that minimum or B / R,
whichever is larger, and the rest of B is spread in equal steps over the other rounds. A
budget of the whole grid is one round asking every cell, so ``--budget 1.0`` gives the full
run's numbers exactly.
Finer strata come before more rounds: at 20% of the synthetic paper grid, two rounds at
family strata (which mix strengths whose deltas differ tenfold) covered 0.895-0.955, under
0.91 on Act, Prob and Ent, where one round at family x subtype covered 0.93-0.965 (200
replays each, bench/budget.py).
Subtypes come before prompts: where only family strata fit every prompt, the design takes
family x subtype strata over fewer prompts (a first-stage simple random sample) while that
keeps at least ``SUBTYPE_PROMPTS`` of each dataset's. A family's subtypes are different
perturbations whose cells differ by an order of magnitude: on a real run's cells the 15
capitalization kinds hold a median 79% of a prompt's sum of squared Prob deltas (64% on
Ent), and a family stratum of 45 noise kinds decides a prompt's estimate by whether its
few cells include them. On those cells at 8 prompts per dataset and 10%, family strata
over all 8 prompts covered 0.842 on a dataset's Prob and 0.875 on its Ent; subtype strata
over 4 covered at least 0.933 on every axis and dataset (120 replays,
docs/guide/budget-validation.md).
A B below one round at the coarsest level with every prompt samples fewer prompts per
dataset (a first-stage simple random sample, at least ``MIN_PROMPTS``, the fewest a t-test
takes); below that it is refused, naming the key. The dry run prints this schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sago_core.budget.design import LEVELS, Grid, Layout, index_grid, minimum_round

MIN_PROMPTS = 2
# The fewest prompts per dataset subtype strata may subsample to: at 2 of 8 the pooled
# interval's degrees of freedom fall to a few and it covered 0.63-0.78 on MR and BERT.
SUBTYPE_PROMPTS = 4


class BudgetTooSmall(ValueError):
    """A budget below one round's minimum."""


@dataclass(frozen=True)
class Schedule:
    layout: Layout
    totals: tuple[int, ...]  # cumulative cells after each round; the last is the budget
    minimum: int  # one round's minimum at this level
    full: int  # cells of the full grid
    prompts: tuple[int, ...]  # sampled prompts per dataset (all, unless the budget is small)

    @property
    def rounds(self) -> int:
        return len(self.totals)

    @property
    def budget(self) -> int:
        return self.totals[-1]


def budget_cells(full: int, fraction: float | None, generations: int | None) -> int:
    """Cells a budget allows: ``fraction`` of the grid (rounded, at least 1) or
    ``generations`` (capped at the grid)."""
    if fraction is not None:
        return max(1, round(fraction * full))
    if generations is not None:
        return min(generations, full)
    return full


def make_schedule(grid: Grid, cells: int, rounds: int, key: str = "budget") -> Schedule:
    layouts = [index_grid(grid, level) for level in LEVELS]
    everyone = layouts[0].prompts_per_dataset
    prompts = everyone.copy()
    coarsest = minimum_round(layouts[-1], prompts)
    if cells < coarsest:
        # fewer prompts, each still with two cells per stratum (a first-stage sample)
        prompts = np.maximum(MIN_PROMPTS, (everyone * cells) // coarsest)
        prompts = np.minimum(prompts, everyone)
        coarsest = minimum_round(layouts[-1], prompts)
    if cells < coarsest:
        raise BudgetTooSmall(
            f"{key}: {cells} cells is below one round's minimum of {coarsest} (two cells per "
            f"stratum for {MIN_PROMPTS} prompts of each dataset; {len(layouts[-1].strata)} "
            f"strata over {len(layouts[-1].datasets)} datasets)"
        )
    # the finest strata one round affords (coarse strata mix strengths and positions, and
    # their intervals came out too narrow: docs/guide/budget-validation.md), then the rounds
    layout = next(layout for layout in layouts if minimum_round(layout, prompts) <= cells)
    if layout is layouts[-1] and cells < grid.cells:
        layout, prompts = _subtypes_first(layouts[-2], layout, everyone, prompts, cells)
    if cells >= grid.cells:  # the whole grid: every cell in one round, the full run's numbers
        return Schedule(
            layout,
            (grid.cells,),
            minimum_round(layout, prompts),
            grid.cells,
            tuple(int(n) for n in prompts),
        )
    first = max(minimum_round(layout, prompts), round(cells / rounds))
    rest = cells - first
    used = 1 + min(rounds - 1, rest // max(1, int(min(prompts))))
    steps = (
        [first + round(rest * k / max(used - 1, 1)) for k in range(used)] if used > 1 else [cells]
    )
    totals = tuple(sorted({min(cells, t) for t in steps}))
    minimum = minimum_round(layout, prompts)
    return Schedule(layout, totals, minimum, grid.cells, tuple(int(n) for n in prompts))


def finer_floor(prompts: np.ndarray) -> np.ndarray:
    """The fewest of a dataset's ``prompts`` that strata finer than family are taken over
    when prompts are sampled: ``SUBTYPE_PROMPTS``, or all it has. The planner lists the
    same designs (planner.py)."""
    return np.minimum(SUBTYPE_PROMPTS, prompts)


def _subtypes_first(
    subtype: Layout, family: Layout, everyone: np.ndarray, prompts: np.ndarray, cells: int
) -> tuple[Layout, np.ndarray]:
    """Subtype strata over the prompts one round affords, if each dataset keeps at least
    ``SUBTYPE_PROMPTS`` (or all it has); else family strata over ``prompts``."""
    fewer = np.minimum(everyone, (everyone * cells) // minimum_round(subtype, everyone))
    if (fewer >= finer_floor(everyone)).all() and (minimum_round(subtype, fewer) <= cells):
        return subtype, fewer
    return family, prompts
