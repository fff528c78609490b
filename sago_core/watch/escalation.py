"""A watch under a budget: each new release is run budgeted, compared with the last release
of its family, and rerun with a larger budget only while that verdict is undecided.

The ladder: the config's own ``budget`` first, then each fraction of ``ladder`` above it
(default 0.5, then 1.0: the full grid). After each rung the pooled paired verdict of every
watched axis (``axes``; empty: every axis) against the last release is read
(``statistics/paired_runs.py``); the release stops at the first rung where none is
``inconclusive`` (or missing), and at the full grid in any case. A comparison the paired
tests refuse (other prompts, other settings) stops it too: a larger budget cannot fix that.

Reading a verdict at every rung and climbing while it is undecided is a sequential test,
so the rungs are the looks of the budget's own spending rule (``budget/sequential.py``,
Haybittle-Peto): each rung but the last reads its verdicts at 0.00135, the last at 0.05
less what those spent. The chance of any false verdict over the ladder is then at most
0.05 whichever rung the release stops at (Bonferroni over the rungs); a verdict at each
rung's 0.05 would have given a release up to three chances at a false "b_worse".

A family's first release runs on the full grid: nothing to compare it with, and its cells
are the control variate (``budget.baseline``, ``sago_core/budget/baseline.py``) of every
later release's budgeted runs, which then need a fraction of the cells for the same
interval (``releases.baseline_run``: the newest full run of the family, of this design).

Both releases run at each rung: the last release is rerun with the same config at the same
budget, so the two runs are one design (same seed, grid and schedule). Their first round
asks the same cells, and the paired comparison pairs them on the cells both asked
(``statistics/paired_design.py``), which keeps the power of common random numbers; a larger
budget for the new release alone would leave the comparison no more cells in common. The
row cache (``artifacts/row_cache.py``) answers every cell a run on this runs folder already
asked, so a rung pays only the cells it adds, for either release; the last release's run at
the rung it was itself recorded at asks nothing. When the last release's weights are no
longer at its spec (a new identity there), it is not rerun: the new release is compared with
its recorded run, and the comparison line says what the two runs asked.

``escalate`` is Prefect-free: the flow hands it ``run_at(spec, budget) -> run folder``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import Field, ValidationError, field_validator

from sago_core.artifacts.layout import BUDGET_FILE, VARIANTS_FILE
from sago_core.budget.sequential import look_levels
from sago_core.config import BudgetSettings, RunConfig, build_config
from sago_core.config.base import StrictModel
from sago_core.config.errors import describe_errors
from sago_core.errors import ConfigError, SagoError
from sago_core.statistics.paired import ALPHA, DEFAULT_MARGIN
from sago_core.vocabulary import AXES, POOLED
from sago_core.watch.registry import Entry
from sago_core.watch.steps import Step

UNDECIDED = "inconclusive"
FULL_GRID = "full grid"

RunAt = Callable[[str, BudgetSettings | None], Path]


class EscalationSettings(StrictModel):
    """The watch's ``escalation`` parameter: the budgets (fractions of the grid, increasing;
    1.0 is the full grid) a release is rerun at after the config's own budget while its
    verdict against the last release is undecided; the watched axes (empty: every axis);
    the paired comparison's equivalence margin (SGS units)."""

    ladder: tuple[float, ...] = (0.5, 1.0)
    axes: tuple[str, ...] = ()
    margin: float = Field(default=DEFAULT_MARGIN, gt=0)

    @field_validator("ladder")
    @classmethod
    def _increasing(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        for fraction in value:
            if not 0 < fraction <= 1:
                raise ValueError(f"every budget must be in (0, 1], got {fraction}")
        if any(b <= a for a, b in pairwise(value)):
            raise ValueError(f"must increase, got {list(value)}")
        return value

    @field_validator("axes")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [a for a in value if a not in AXES]
        if unknown:
            raise ValueError(f"unknown axis {unknown[0]!r}; choose from {list(AXES)}")
        return value


def parse_escalation(values: dict[str, Any] | None) -> EscalationSettings:
    """The flow parameter, strictly: one line naming the key when it is wrong."""
    try:
        return EscalationSettings.model_validate(values or {})
    except ValidationError as exc:
        problems = describe_errors(exc, EscalationSettings)
        raise ConfigError(f"invalid watch escalation: {problems}") from None


def rungs(budget: BudgetSettings, settings: EscalationSettings) -> list[BudgetSettings | None]:
    """The config's budget, then every ladder budget above it (1.0: None, the full grid)."""
    out: list[BudgetSettings | None] = [budget]
    for fraction in settings.ladder:
        if budget.fraction is not None and fraction <= budget.fraction:
            continue
        if fraction >= 1.0:
            out.append(None)
            break
        values = {**budget.model_dump(), "fraction": fraction, "generations": None}
        out.append(BudgetSettings.model_validate(values))
    return out


def release_config(
    preset: str,
    overrides: dict[str, Any] | None,
    runs_dir: str,
    model: str,
    budget: BudgetSettings | None,
    source: str,
) -> RunConfig:
    """The watch's config for one release at one budget (None: the full grid): the
    watch's overrides with its model and this budget in place of the config's."""
    values = {**(overrides or {}), "models": [model], "runs_dir": runs_dir}
    values.pop("budget", None)
    if budget is not None:
        values["budget"] = budget.model_dump()
    return build_config(preset, values, source=source)


def budget_label(budget: BudgetSettings | None) -> str:
    if budget is None:
        return FULL_GRID
    if budget.fraction is not None:
        return f"{budget.fraction:.0%}"
    return f"{budget.generations:,} cells"


def run_cells_asked(run_dir: Path) -> tuple[int | None, int | None]:
    """(cells asked, the full grid's cells): ``budget.json``, or a full run's kept cells."""
    record = run_dir / BUDGET_FILE
    if record.is_file():
        loaded = json.loads(record.read_text(encoding="utf-8"))
        return loaded.get("cells"), loaded.get("full_cells")
    variants = run_dir / VARIANTS_FILE
    if not variants.is_file():
        return None, None
    from sago_core.budget.run_cells import run_cells

    try:
        full = len(run_cells(pl.read_parquet(variants)).ids)
    except (pl.exceptions.PolarsError, ValueError):
        return None, None
    return full, full


def pooled_verdicts(
    against: Path, run_dir: Path, margin: float, alpha: float
) -> tuple[dict[str, str | None], str | None]:
    """The pooled paired verdict per axis of ``run_dir`` (B) against ``against`` (A) at
    level ``alpha``, and the comparison's design line."""
    from sago_core.statistics.paired_runs import compare_paired

    comparison = compare_paired(against, run_dir, margin, alpha=alpha)
    pooled = comparison.table.filter(pl.col("dataset") == POOLED)
    verdicts = dict(zip(pooled["axis"].to_list(), pooled["verdict"].to_list(), strict=True))
    return verdicts, comparison.design


def _step(budget: BudgetSettings | None, run_dir: Path, against: Path | None, **rest: Any) -> Step:
    cells, full = run_cells_asked(run_dir)
    return Step(
        budget_label(budget),
        str(run_dir),
        cells,
        full,
        None if against is None else str(against),
        baseline=None if budget is None else budget.baseline,
        **rest,
    )


def compare_step(
    budget: BudgetSettings | None,
    run_dir: Path,
    against: Path,
    settings: EscalationSettings,
    alpha: float,
) -> Step:
    """One rung's record: the verdicts against the last release at the rung's level and
    which stay undecided."""
    try:
        verdicts, design = pooled_verdicts(against, run_dir, settings.margin, alpha)
    except SagoError as exc:
        return _step(budget, run_dir, against, note=f"not compared: {exc}")
    watched = settings.axes or tuple(a for a in AXES if a in verdicts)
    undecided = tuple(a for a in watched if verdicts.get(a) in (None, UNDECIDED))
    return _step(
        budget, run_dir, against, verdicts=verdicts, undecided=undecided, design=design, alpha=alpha
    )


def escalate(
    spec: str,
    previous: Entry | None,
    budget: BudgetSettings,
    settings: EscalationSettings,
    run_at: RunAt,
    rerun_previous: bool = True,
    baseline: Path | None = None,
) -> tuple[Path, Entry | None, list[Step]]:
    """Run ``spec`` up the ladder until its verdicts against ``previous`` are decided, its
    budgeted runs with ``baseline`` (a full run of its family, ``releases.baseline_run``) as
    their control variate. Returns the release's last run, the previous release as compared
    at that rung (its ``run_dir`` the run it was compared with; None: the first release of
    its family, run on the full grid) and the steps."""
    control = {"baseline": str(baseline)} if baseline else {}
    if previous is None:  # the full grid: the control variate of the releases after it
        run_dir = run_at(spec, None)
        note = "first release of its family: the full grid, the baseline of the releases after it"
        return run_dir, None, [_step(None, run_dir, None, note=note)]
    steps: list[Step] = []
    ladder = rungs(budget, settings)
    for rung, alpha in zip(ladder, look_levels(len(ladder), ALPHA), strict=True):
        budget_now = rung and rung.model_copy(update=control)
        run_dir = run_at(spec, budget_now)
        against = run_at(previous.spec, rung) if rerun_previous else Path(previous.run_dir)
        step = compare_step(budget_now, run_dir, against, settings, alpha)
        steps.append(step)
        if step.note is not None or not step.undecided:
            break
    return run_dir, replace(previous, run_dir=str(against)), steps
