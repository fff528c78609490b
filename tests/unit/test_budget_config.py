"""The ``budget`` section: absent = every run id as before; bad input refused in
one line naming the key; ``--budget`` on ``sago run``; the dry run's budgeted schedule; and
the cells read from a real ``deltas.parquet`` frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from sago_cli.main import build_parser
from sago_cli.run import config_from_args
from sago_core.budget.cells import grid_from_deltas
from sago_core.config import PRESETS, RunConfig, build_config
from sago_core.errors import ConfigError
from tests.fakes import PROMPTS


def test_an_absent_budget_changes_no_run_id() -> None:
    # the ids these presets had before the budget section existed (the demo's since its
    # structural variants come from rules with the embedded rewriter: other variants, another id)
    assert PRESETS["demo"].resolved_run_id() == "demo-c30dbf3a6301"
    assert PRESETS["paper"].resolved_run_id() == "paper-0d88d51f349c"
    assert "budget" not in PRESETS["paper"].model_dump(mode="json")


def test_a_budget_is_its_own_run_and_reads_back() -> None:
    budgeted = build_config("demo", overrides={"budget": {"fraction": 0.2, "target": {"mr": 0.05}}})
    assert budgeted.resolved_run_id() != PRESETS["demo"].resolved_run_id()
    dumped = budgeted.model_dump(mode="json")
    assert dumped["budget"]["target"] == {"mr": 0.05}
    assert RunConfig.model_validate(dumped) == budgeted


@pytest.mark.parametrize(
    ("budget", "key", "says"),
    [
        ({"fraction": 0.0}, "budget.fraction", "must be in (0, 1]"),
        ({"fraction": 1.5}, "budget.fraction", "must be in (0, 1]"),
        ({"generations": 0}, "budget.generations", "must be >= 1"),
        ({"fraction": 0.2, "target": {"blue": 0.1}}, "budget.target", "unknown axis 'blue'"),
        ({"fraction": 0.2, "target": {"bleu": -0.1}}, "budget.target", "must be > 0"),
        ({"fraction": 0.2, "generations": 9}, "budget", "exactly one of"),
    ],
)
def test_bad_budgets_are_refused_in_one_line(budget: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config("demo", overrides={"budget": budget})
    message = str(caught.value)
    assert "\n" not in message and f"{key}: " in message and says in message


def test_budget_on_the_command_line() -> None:
    args = build_parser().parse_args(["run", "--budget", "0.2", "--dry-run"])
    config = config_from_args(args)
    assert config.budget is not None and config.budget.fraction == 0.2
    # K > 1 samples per prompt text under a budget: accepted (a cell costs K generations)
    sampled = config_from_args(
        build_parser().parse_args(["run", "--budget", "0.2", "--preset", "sampling"])
    )
    assert sampled.budget is not None and sampled.generation.samples == 8


def noise_config(tmp_path: Path, budget: dict[str, Any], samples: int = 1) -> RunConfig:
    grid = {
        "register": None,
        "structural": None,
        "noise": {
            "spacing": [1, 5, 20],
            "punctuation": [1, 3, 5],
            "capitalization": [],
            "positions": ["prefix", "global"],
        },
    }
    return RunConfig.model_validate(
        {
            "models": ["mock:m"],
            "runs_dir": tmp_path,
            "variants": grid,
            "budget": budget,
            "generation": {"temperature": 0.7, "samples": samples} if samples > 1 else {},
        }
    )


def test_the_dry_run_prints_the_rounds_the_worst_case_and_the_full_grid(tmp_path: Path) -> None:
    from sago_core.artifacts.layout import RunLayout
    from sago_core.backends.target import run_targets
    from sago_core.run_plan import plan_run, render_plan
    from sago_core.run_start import start_line

    # 2 prompts x 12 noise kinds = 24 cells. The finest strata (subtype x position: 4 of 3
    # kinds each) take 4 x 2 cells x 2 prompts = 16 cells in a first round, which 20 cells
    # afford; the other 4 go in two steps of 2 (one more cell per prompt): 16, 18, 20
    config = noise_config(tmp_path, {"generations": 20, "rounds": 3})
    layout = RunLayout.of(config.runs_dir, config.resolved_run_id())
    plan = plan_run(config, PROMPTS, run_targets(config), layout, {})
    assert plan.budgeted is not None
    schedule = plan.budgeted.schedule
    assert (schedule.totals, schedule.full, schedule.layout.level) == ((16, 18, 20), 24, "position")
    assert tuple(schedule.prompts) == (2,)
    text = render_plan(plan, config)
    assert "up to 20 of 24 variant cells (83%) in at most 3 round(s)" in text
    assert "round 2: up to 2 cells (cumulative 18)" in text
    # worst case 20 cells + 2 x 2 base and replay answers = 24; full grid 24 + 4 = 28
    assert "worst case: 24 generations per model" in text and "full grid: 28" in text
    too_small = noise_config(tmp_path, {"generations": 3})
    with pytest.raises(ConfigError, match=r"^budget\.generations: 3 cells is below"):
        plan_run(too_small, PROMPTS, run_targets(too_small), layout, {})
    # at K = 4 a cell costs 4 generations: 80 of them buy the same 20 cells, 4 times the cost
    sampled = noise_config(tmp_path, {"generations": 80, "rounds": 3}, samples=4)
    plan = plan_run(sampled, PROMPTS, run_targets(sampled), layout, {})
    assert plan.budgeted is not None and plan.budgeted.schedule.totals == (16, 18, 20)
    assert "worst case: 96 generations per model" in render_plan(plan, sampled)
    assert "up to 96 generations" in start_line(plan, sampled)
    small = noise_config(tmp_path, {"generations": 12}, samples=4)
    with pytest.raises(ConfigError, match=r"^budget\.generations at 4 generations per cell: 3 "):
        plan_run(small, PROMPTS, run_targets(small), layout, {})


def test_cells_read_from_a_deltas_frame() -> None:
    rows = []
    for variant, family, value in (
        ("noise:spacing:5:global", "noise", -0.5),
        ("noise:spacing:20:global", "noise", float("nan")),
        ("replay:base:0:global", "replay", -0.1),
    ):
        for axis in ("bleu", "mr"):
            rows.append(
                {
                    "model": "m",
                    "dataset": "d",
                    "prompt_id": "p",
                    "variant_id": variant,
                    "family": family,
                    "subtype": "spacing" if family == "noise" else "base",
                    "strength": 5.0 if "5:" in variant else 20.0,
                    "position": "global",
                    "axis": axis,
                    "delta": value,
                    "delta_norm": value if axis == "bleu" else None,
                    "missing_reason": None,
                }
            )
    cells = grid_from_deltas(pl.DataFrame(rows))
    assert cells.axes == ("bleu", "mr") and cells.grid.cells == 2  # the replay is no cell
    assert cells.values[0, 0] == -0.5
    assert np.isnan(cells.values[1, 0]) and np.isnan(cells.values[:, 1]).all()
    with pytest.raises(ValueError, match="no rows of model 'x'"):
        grid_from_deltas(pl.DataFrame(rows), "x")
