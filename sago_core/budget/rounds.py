"""A budgeted run's design, fixed before its first round: the schedule (cells per round,
the stratum level, the sampled prompts per dataset), the random design drawn from the seed,
the measured columns (every model x every axis: one design for every model, so their cells
are common), the targets per column and K, the answers per prompt text (a cell's cost)."""

from __future__ import annotations

from dataclasses import dataclass

from sago_core.budget.design import Design, draw_design
from sago_core.budget.dry_run import plan_budget
from sago_core.budget.run_cells import RunCells
from sago_core.budget.schedule import Schedule
from sago_core.config import BudgetSettings
from sago_core.vocabulary import AXES

SEPARATOR = " :: "


def column_name(model: str, axis: str) -> str:
    return f"{model}{SEPARATOR}{axis}"


def split_column(name: str) -> tuple[str, str]:
    model, _, axis = name.rpartition(SEPARATOR)
    return model, axis


@dataclass(frozen=True)
class BudgetedDesign:
    cells: RunCells
    settings: BudgetSettings
    schedule: Schedule
    design: Design
    columns: list[tuple[str, str]]  # (model, axis)
    target: dict[str, float]  # column name -> half-width
    samples: int = 1  # K: a cell costs K generations, a sampled prompt's base and replay 2 K

    @property
    def sampled(self) -> list[tuple[str, str]]:
        """The sampled prompts' (dataset, prompt_id), in the layout's order."""
        layout = self.design.layout
        mask = self.design.prompt_sampled()
        return [p for p, keep in zip(layout.prompts, mask, strict=True) if keep]


def budgeted_design(
    cells: RunCells, settings: BudgetSettings, run_seed: int, models: list[str], samples: int = 1
) -> BudgetedDesign:
    """The schedule of ``settings`` over the run's kept cells (a budget below one round is
    a ConfigError naming the key) and the design drawn from ``settings.seed`` (null: the
    run's seed)."""
    plan = plan_budget(cells.grid, settings, samples)
    seed = run_seed if settings.seed is None else settings.seed
    design = draw_design(plan.schedule.layout, seed, plan.schedule.prompts)
    columns = [(m, a) for m in models for a in AXES]
    target = {column_name(m, a): hw for m in models for a, hw in settings.target}
    return BudgetedDesign(cells, settings, plan.schedule, design, columns, target, samples)
