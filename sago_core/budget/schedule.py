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
A B below one round at the coarsest level with every prompt samples fewer prompts per
dataset (a first-stage simple random sample, at least ``MIN_PROMPTS``, the fewest a t-test
takes); below that it is refused, naming the key. The dry run prints this schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sago_core.budget.design import LEVELS, Grid, Layout, index_grid, minimum_round

MIN_PROMPTS = 2


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
