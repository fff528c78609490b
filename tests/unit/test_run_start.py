"""The first line a run prints: what it will do, and roughly how long where sago knows."""

from __future__ import annotations

from sago_core.config import build_config
from sago_core.run_plan import RunPlan
from sago_core.run_start import rough_time, start_line


def plan(model: str, generations: int, api: bool = False) -> RunPlan:
    return RunPlan(
        prompts={"builtin_triviaqa": 3, "builtin_nq_open": 3},
        candidates={"noise": 108, "structural": 18},
        kept_exact={"noise": 108},
        kept_up_to={"structural": 18},
        rewrites_cached=0,
        generations={model: generations},
        teacher_forced={} if api else {model: generations},
    )


def test_the_embedded_model_gets_a_rough_time_from_the_measured_pace() -> None:
    config = build_config("demo", {"models": ["hf:smollm2-135m"]})
    line = start_line(plan("hf:smollm2-135m", 630), config)
    tokens = 630 * config.generation.max_new_tokens
    assert line.startswith(f"Run {config.resolved_run_id()}: 6 prompts, 1 model, up to 630 ")
    assert f"({tokens:,} new tokens) and 630 scored sequences; roughly " in line
    # The demo's plan (25,200 new tokens) took 258 s on 2 idle cores: 4 min.
    assert rough_time(plan("hf:smollm2-135m", 630), 25_200, gpu=False).startswith(
        "roughly 4 min on 2 CPU cores"
    )


def test_no_time_is_guessed_for_another_model_a_gpu_or_an_api() -> None:
    unknown = "how long: the progress lines say once the first batches are done"
    assert rough_time(plan("hf:/models/llama", 630), 25_200, gpu=False) == unknown
    assert rough_time(plan("hf:smollm2-135m", 630), 25_200, gpu=True) == unknown
    api = plan("litellm:openai/gpt-4o-mini", 630, api=True)
    config = build_config("demo", {"models": ["litellm:openai/gpt-4o-mini"]})
    assert "scored sequences" not in start_line(api, config)


def test_a_budgeted_run_says_its_worst_case_not_the_full_grid() -> None:
    from sago_core.budget.design import Grid
    from sago_core.budget.dry_run import plan_budget
    from sago_core.config import BudgetSettings

    # 2 prompts x 10 noise kinds in one stratum: a budget of 10 cells, all prompts kept
    kinds = tuple(("noise", "spacing", float(g), "global") for g in range(10))
    grid = Grid(("d",) * 20, ("p1",) * 10 + ("p2",) * 10, kinds * 2)
    config = build_config("demo", {"models": ["hf:smollm2-135m"], "budget": {"fraction": 0.5}})
    budgeted = plan("hf:smollm2-135m", 24)
    budgeted.budgeted = plan_budget(grid, BudgetSettings(fraction=0.5))
    line = start_line(budgeted, config)
    # 10 cells + a base and a replay for each of the 2 prompts = 14, not the grid's 24
    assert ", up to 14 generations " in line
    assert " and 14 scored sequences" in line  # the asked answers, not the grid's 24
    assert "(budgeted: at most 10 of 20 cells)" in line
