"""What a budgeted run would ask for, for the dry run (``sago run --dry-run --budget 0.2``).

The grid is the candidate variants (before the semantic filter, so its counts are upper
bounds, like the rest of the plan) plus each prompt's structural rewrites, the replay left
out (it is not a cell: every sampled prompt is asked its base and its replay). The schedule
(schedule.py) gives the cells after each round; the worst case is the whole budget, printed
beside the full grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sago_core.budget.design import Grid, Kind
from sago_core.budget.schedule import BudgetTooSmall, Schedule, budget_cells, make_schedule
from sago_core.config import BudgetSettings
from sago_core.errors import ConfigError
from sago_core.vocabulary import REPLAY_FAMILY

# generations a sampled prompt costs besides its cells: its base answer and its replay
PER_PROMPT = 2


@dataclass(frozen=True)
class BudgetPlan:
    schedule: Schedule
    settings: BudgetSettings
    prompts: int  # every prompt of the run

    @property
    def sampled_prompts(self) -> int:
        return sum(self.schedule.prompts)


def candidate_grid(candidates: pl.DataFrame, structural: dict[str, list[Kind]]) -> Grid:
    """``candidates``: variants.parquet's candidate rows; ``structural``: per prompt_id,
    its rewrite kinds (not yet written, so not among the candidates)."""
    rows = candidates.filter(pl.col("family") != REPLAY_FAMILY)
    dataset = list(rows["dataset"])
    prompt = list(rows["prompt_id"])
    kinds: list[Kind] = [
        (f, s, float(g), p)
        for f, s, g, p in zip(
            rows["family"], rows["subtype"], rows["strength"], rows["position"], strict=True
        )
    ]
    owners = candidates.select("dataset", "prompt_id").unique(maintain_order=True)
    for d, p in zip(owners["dataset"], owners["prompt_id"], strict=True):
        for kind in structural.get(p, []):
            dataset.append(d)
            prompt.append(p)
            kinds.append(kind)
    return Grid(tuple(dataset), tuple(prompt), tuple(kinds))


def plan_budget(grid: Grid, settings: BudgetSettings, samples: int = 1) -> BudgetPlan:
    """The schedule (a cell costs ``samples`` of ``budget.generations``), or a ConfigError
    naming the key when the budget is below one round."""
    key = "budget.fraction" if settings.fraction is not None else "budget.generations"
    if samples > 1 and settings.generations:
        key += f" at {samples} generations per cell"
    generations = settings.generations and settings.generations // samples
    cells = budget_cells(grid.cells, settings.fraction, generations)
    try:
        schedule = make_schedule(grid, cells, settings.rounds, key=key)
    except BudgetTooSmall as exc:
        raise ConfigError(str(exc)) from None
    prompts = len(set(zip(grid.dataset, grid.prompt, strict=True)))
    return BudgetPlan(schedule, settings, prompts)


def budget_lines(plan: BudgetPlan, samples: int) -> list[str]:
    """The dry run's lines: cells per round, the worst case and the full grid beside it."""
    s = plan.schedule
    share = s.budget / s.full
    sampled = plan.sampled_prompts
    which = "all" if sampled == plan.prompts else f"{sampled} of {plan.prompts}"
    lines = [
        f"Budgeted design: up to {s.budget:,} of {s.full:,} variant cells "
        f"({share:.0%}) in at most {s.rounds} round(s); strata per dataset at level "
        f"{s.layout.level!r}; prompts sampled: {which}"
    ]
    previous = 0
    for k, total in enumerate(s.totals, start=1):
        lines.append(f"  round {k}: up to {total - previous:,} cells (cumulative {total:,})")
        previous = total
    each = f" x {samples} samples" if samples > 1 else ""
    worst = (s.budget + PER_PROMPT * sampled) * samples
    full = (s.full + PER_PROMPT * plan.prompts) * samples
    lines.append(
        f"  worst case: {worst:,} generations per model ({s.budget:,} cells + "
        f"{PER_PROMPT * sampled:,} base and replay answers{each}); full grid: {full:,} "
        f"({worst / full:.0%} of it)"
    )
    target = dict(plan.settings.target)
    stop = (
        "every target met (" + ", ".join(f"{a} +-{h:g}" for a, h in target.items()) + ")"
        if target
        else "every axis' one-sided test decided at each eps"
    )
    lines.append(f"  stops early when {stop}, alpha spent Haybittle-Peto")
    return lines
