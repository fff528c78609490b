"""Budgeted rounds: the alpha-spending levels, the greedy Neyman allocation by
hand, the stopping rule's false-positive rate by simulation, and the planner's formula."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from sago_core.budget.design import Grid, draw_design
from sago_core.budget.planner import Components, best_designs, predicted_half_width
from sago_core.budget.schedule import BudgetTooSmall, make_schedule
from sago_core.budget.sequential import INTERIM_ALPHA, allocate, look_levels, run_budgeted

KINDS = [("register", "politeness", float(s), "prefix") for s in (-8, -6, -4, -2, 2, 4, 6, 8)]
KINDS += [("noise", "spacing", float(s), "prefix") for s in (1, 5, 10, 20, 50, 100)]


def null_grid(rng: np.random.Generator, mu: float, prompts: int = 12) -> tuple[Grid, np.ndarray]:
    """Two datasets whose prompts' true scores s_i are mu x Gamma(50)/50 (population mean
    exactly mu); each prompt's deltas are rescaled so their RMS is exactly s_i."""
    cells: list[tuple[str, str, tuple[str, str, float, str]]] = []
    values: list[float] = []
    for j in range(2):
        for i in range(prompts):
            s = mu * rng.gamma(50.0, 1 / 50)
            raw = rng.normal(0, 1, len(KINDS)) * (1 + np.arange(len(KINDS)) % 3)
            values.extend(raw * s / np.sqrt(np.mean(raw**2)))
            cells.extend((f"d{j}", f"d{j}p{i}", k) for k in KINDS)
    grid = Grid(tuple(c[0] for c in cells), tuple(c[1] for c in cells), tuple(c[2] for c in cells))
    return grid, np.array(values)[:, None]


def test_look_levels_spend_alpha() -> None:
    levels = look_levels(3, 0.05)
    assert levels[:2] == (INTERIM_ALPHA, INTERIM_ALPHA)
    assert levels[2] == pytest.approx(0.05 - 2 * 0.0013498980316301)
    assert sum(levels) == pytest.approx(0.05)
    assert look_levels(1, 0.05) == (0.05,)


def test_greedy_neyman_by_hand() -> None:
    """a = (4, 1), each step costs 1, from (1, 1) with 3 more cells: gains a/(m(m+1)) are
    2 vs 0.5, then 0.67 vs 0.5, then 0.33 vs 0.5, so (3, 2); continuous Neyman says
    sqrt(a) = 2:1 of 5 cells, 3.3:1.7."""
    counts = allocate(np.array([1, 1]), np.array([4.0, 1.0]), np.array([10, 10]), 3)
    assert counts.tolist() == [3, 2]
    # a stratum at its ceiling takes no more
    assert allocate(np.array([1, 1]), np.array([4.0, 1.0]), np.array([2, 10]), 3).tolist() == [2, 3]


def test_budget_below_one_round_is_refused_naming_the_key() -> None:
    grid, _ = null_grid(np.random.default_rng(0), 0.1)
    # 2 datasets x 2 strata x 2 cells x at least 2 prompts = 16 cells is one round's least
    with pytest.raises(BudgetTooSmall, match=r"^budget\.generations: 15 cells is below"):
        make_schedule(grid, 15, 3, key="budget.generations")
    small = make_schedule(grid, 16, 3)
    assert small.prompts == (2, 2) and small.totals == (16,)
    full = make_schedule(grid, grid.cells, 3)
    assert full.prompts == (12, 12) and full.totals[-1] == grid.cells


def sequential_rejections(
    mu: float, eps: float, runs: int, levels: Sequence[float] | None = None
) -> float:
    rng = np.random.default_rng(2024)
    hits = 0
    grid, _ = null_grid(rng, mu)
    schedule = make_schedule(grid, grid.cells, 3)  # the same cells every run: one layout
    for seed in range(runs):
        _, values = null_grid(rng, mu)
        design = draw_design(schedule.layout, seed)

        def oracle(mask: np.ndarray, v: np.ndarray = values) -> np.ndarray:
            return v[mask]

        result = run_budgeted(
            design,
            schedule.totals,
            oracle,
            ("bleu",),
            epsilons=(eps,),
            levels=levels,
            resamples=40,
        )
        hits += result.axes["bleu"].verdicts[eps].decision == "above"
    return hits / runs


def test_stopping_rule_false_positive_rate_at_the_boundary() -> None:
    """True mean exactly eps (the hardest null): over 200 budgeted runs of 3 looks the rule
    says "exceeds eps" at most alpha of the time (+ 2 simulation SE); and it has power.
    (Measured once at 300 runs: 0.017; testing at the full alpha after every look, 0.037;
    the looks are strongly correlated because every prompt is in from the first round.)"""
    runs = 200
    rate = sequential_rejections(mu=0.2, eps=0.2, runs=runs)
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / runs)
    assert sequential_rejections(mu=0.3, eps=0.2, runs=40) > 0.8


def test_planner_formula_by_hand() -> None:
    """between 0.04, within 0.09, 10 prompts, 20 variants; n = 10, m = 5:
    grid: 0.09 (1/5 - 1/20) / 10 = 0.00135 -> 1.96 x 0.036742 = 0.0720;
    population: (0.04 + 0.0135) / 10 = 0.00535 -> 1.96 x 0.073144 = 0.1434."""
    parts = [Components(between=0.04, within=0.09, prompts=10, variants=20, sgs=0.5)]
    assert predicted_half_width(parts, 10, 5, "grid") == pytest.approx(0.0720, abs=1e-4)
    assert predicted_half_width(parts, 10, 5, "population") == pytest.approx(0.1434, abs=1e-4)


def test_planner_trades_prompts_for_variants() -> None:
    """Prompts that differ a lot (between >> within) want many prompts with few variants;
    variants that differ a lot want fewer prompts with more variants each."""
    spread_prompts = {"bleu": [Components(0.05, 0.001, 16, 80, 0.5)]}
    spread_variants = {"bleu": [Components(0.0005, 0.5, 16, 80, 0.5)]}
    budget = 640
    a = best_designs(spread_prompts, budget, scope="population", max_prompts=200)[0]
    b = best_designs(spread_variants, budget, scope="population", max_prompts=200)[0]
    assert a.prompts > b.prompts and a.variants < b.variants
    assert a.generations <= budget and b.generations <= budget
