"""Budgeted rounds: the alpha-spending levels, the greedy Neyman allocation by
hand, the stopping rule's false-positive rate by simulation, and the planner's formula."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from sago_core.budget.design import LEVELS, Grid, draw_design, index_grid
from sago_core.budget.estimate import dataset_estimates, full_scores
from sago_core.budget.planner import Components, Pilot, plan, predicted_half_width
from sago_core.budget.schedule import BudgetTooSmall, make_schedule
from sago_core.budget.sequential import INTERIM_ALPHA, allocate, look_levels, run_budgeted
from sago_core.scoring.significance import one_sided_t_test

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


def test_subtype_strata_come_before_prompts() -> None:
    """One dataset of 8 prompts; family strata: register (6 kinds), noise (two subtypes of
    5 kinds): 2 x 2 cells a prompt, 32 for all 8. Subtype strata: 3 x 2 = 6 a prompt, so
    32 cells give them 32 // 6 = 5 prompts; 24 cells only 4 (8 x 24 // 48); 20 cells 3,
    below the 4 a dataset keeps, so family strata over 20 // 4 = 5 prompts."""
    kinds = [("register", "politeness", float(s), "prefix") for s in range(1, 7)]
    kinds += [("noise", sub, float(s), "prefix") for sub in ("spacing", "case") for s in range(5)]
    cells = [(f"p{i}", k) for i in range(8) for k in kinds]
    grid = Grid(("d",) * len(cells), tuple(c[0] for c in cells), tuple(c[1] for c in cells))
    assert [
        (s.layout.level, s.prompts) for s in (make_schedule(grid, b, 3) for b in (48, 32, 24, 20))
    ] == [
        ("position", (8,)),  # every prompt affords the finest strata: as before
        ("subtype", (5,)),
        ("subtype", (4,)),
        ("family", (5,)),
    ]
    # families of one subtype each (positions apart): a family's strata over every prompt
    kinds = [("register", "politeness", float(s), p) for s in (1, 2, 3) for p in ("a", "b")]
    kinds += [("noise", "spacing", float(s), "a") for s in range(5)]
    cells = [(f"p{i}", k) for i in range(8) for k in kinds]
    grid = Grid(("d",) * len(cells), tuple(c[0] for c in cells), tuple(c[1] for c in cells))
    schedule = make_schedule(grid, 32, 3)
    assert (len(schedule.layout.strata), schedule.prompts) == (2, (8,))


def sequential_verdicts(
    mu: float, eps: float, runs: int, levels: Sequence[float] | None = None
) -> dict[str, float]:
    """Shares of runs whose rule said "above" and "below", pooled and (over the runs and
    both datasets) per dataset."""
    rng = np.random.default_rng(2024)
    hits = dict.fromkeys(("above", "below", "dataset above", "dataset below"), 0.0)
    grid, _ = null_grid(rng, mu)
    schedule = make_schedule(grid, grid.cells // 2, 3)  # the same cells every run: one layout
    for seed in range(runs):
        _, values = null_grid(rng, mu)
        design = draw_design(schedule.layout, seed)

        def oracle(mask: np.ndarray, v: np.ndarray = values) -> np.ndarray:
            return v[mask]

        result = run_budgeted(
            design,
            schedule.totals,
            oracle,
            ("ent",),  # normal cells: an axis that declares continuous cells
            epsilons=(eps,),
            levels=levels,
        )
        state = result.axes["ent"]
        for way in ("above", "below"):
            hits[way] += (state.verdicts[eps].decision == way) / runs
            for tests in state.by_dataset.values():
                hits[f"dataset {way}"] += (tests[eps].decision == way) / (2 * runs)
    return hits


def test_stopping_rule_false_positive_rate_at_the_boundary() -> None:
    """True mean exactly eps (the hardest null): over 200 budgeted runs of 3 looks the rule
    says "exceeds eps", and says "below eps", at most alpha of the time (+ 2 simulation SE),
    pooled and in each dataset's own tests; and it has power. (Measured at 300 runs: above
    0.003 pooled, 0.005 per dataset; below 0.013 and 0.028. With the empirical-Bayes root
    these normal cells' roots ran low: below 0.13 pooled, 0.105 per dataset.)"""
    runs = 200
    rates = sequential_verdicts(mu=0.2, eps=0.2, runs=runs)
    for way in ("above", "below"):
        assert rates[way] <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / runs)
        assert rates[f"dataset {way}"] <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / (2 * runs))
    power = sequential_verdicts(mu=0.3, eps=0.2, runs=40)
    # 12 prompts per dataset at half the grid: a dataset's own test has less power
    assert power["above"] > 0.8 and power["dataset above"] > 0.15


def test_the_interval_is_the_spending_rules_at_the_look_the_run_stopped_after() -> None:
    """A run whose every verdict is decided at the first look stops there, and its interval
    is z = 3 wide (0.00135 a side), a t quantile at its degrees of freedom; one that runs to
    the last look gets what is left of 0.025 a side. Every prompt of the two datasets of 12
    is sampled: each dataset's variance has 11 degrees of freedom, the pooled one
    Satterthwaite's 11 (v1 + v2)^2 / (v1^2 + v2^2)."""
    from scipy import stats

    from sago_core.budget.sequential import interval_level

    assert interval_level(1, 1) == pytest.approx(0.95)
    assert stats.norm.ppf(0.5 + interval_level(1, 3) / 2) == pytest.approx(3.0)
    assert interval_level(3, 3) == pytest.approx(1 - 2 * (0.025 - 2 * INTERIM_ALPHA))
    rng = np.random.default_rng(3)
    grid, values = null_grid(rng, 0.3)
    schedule = make_schedule(grid, grid.cells // 2, 3)
    design = draw_design(schedule.layout, 0)
    for eps, looks in (((0.01, 2.0), 1), ((0.3,), 3)):  # far from 0.3: decided at once
        result = run_budgeted(design, schedule.totals, lambda m: values[m], ("ent",), epsilons=eps)
        assert len(result.rounds) == looks
        assert result.level == pytest.approx(interval_level(looks, 3))
        estimate = result.axes["ent"].estimate
        v1, v2 = (
            e.variance
            for e in dataset_estimates(
                schedule.layout, result.prompts["ent"], design.sampled_prompts
            )
            if e
        )
        assert estimate is not None and estimate.df == pytest.approx(
            11 * (v1 + v2) ** 2 / (v1**2 + v2**2)
        )
        t = stats.t.ppf(0.5 + result.level / 2, estimate.df)
        assert estimate.half_width(result.level) == pytest.approx(t * np.sqrt(estimate.variance))


def test_planner_formula_by_hand() -> None:
    """between 0.04, within 0.09, 10 prompts, 20 variants; n = 10, m = 5, t(9) = 2.262157
    (the interval the run states takes n - 1 degrees of freedom):
    grid: 0.09 (1/5 - 1/20) / 10 = 0.00135 -> 2.262157 x 0.036742 = 0.083116;
    population: (0.04 + 0.0135) / 10 = 0.00535 -> 2.262157 x 0.073144 = 0.165463."""
    parts = [Components(between=0.04, within=0.09, prompts=10, variants=20, sgs=0.5)]
    assert predicted_half_width(parts, 10, 5, "grid") == pytest.approx(0.083116, abs=1e-5)
    assert predicted_half_width(parts, 10, 5, "population") == pytest.approx(0.165463, abs=1e-5)


def test_planner_trades_prompts_for_variants() -> None:
    """Prompts that differ a lot (between >> within) want many prompts with few variants;
    variants that differ a lot want fewer prompts with more variants each."""

    def pilot(parts: Components) -> Pilot:  # one stratum at every level
        return Pilot({lv: {"bleu": [parts]} for lv in LEVELS}, dict.fromkeys(LEVELS, 2), 80)

    spread_prompts = pilot(Components(0.05, 0.001, 16, 80, 0.5))
    spread_variants = pilot(Components(0.0005, 0.5, 16, 80, 0.5))
    budget = 640
    a = plan(spread_prompts, budget, scope="population", max_prompts=200)[0]
    b = plan(spread_variants, budget, scope="population", max_prompts=200)[0]
    assert a.prompts > b.prompts and a.variants < b.variants
    assert a.generations <= budget and b.generations <= budget


@pytest.mark.parametrize("axis", ["bleu", "ent"])  # the events root and the gamma root
def test_a_budget_of_the_whole_grid_is_the_full_run(axis: str) -> None:
    """Every cell in one round, each prompt's score the RMS of its measured cells, the
    pooled SGS the mean of the datasets' means, no variance, and the verdicts of the full
    run's t-test (a missing cell left out, as the full run leaves it)."""
    rng = np.random.default_rng(7)
    grid, values = null_grid(rng, 0.2)
    values[3, 0] = np.nan
    schedule = make_schedule(grid, grid.cells, 3)
    assert schedule.totals == (grid.cells,)
    epsilons = (0.15, 0.2, 0.25)
    result = run_budgeted(
        draw_design(schedule.layout, 0),
        schedule.totals,
        lambda m: values[m],
        (axis,),
        epsilons=epsilons,
    )
    assert result.cells == grid.cells and len(result.rounds) == 1
    layout = schedule.layout
    rms = np.array(
        [np.sqrt(np.nanmean(values[layout.prompt_code == i, 0] ** 2)) for i in range(24)]
    )
    estimates = result.prompts[axis]
    assert np.allclose(estimates.s, rms, rtol=0, atol=1e-12)
    pooled = result.axes[axis].estimate
    assert pooled is not None and pooled.variance == 0.0
    assert pooled.value == pytest.approx(np.mean([rms[:12].mean(), rms[12:].mean()]), abs=1e-12)
    for eps in epsilons:
        p = one_sided_t_test(rms, eps).p_value
        above = p is not None and p < 0.05
        assert (result.axes[axis].verdicts[eps].decision == "above") == above
        # one look at the whole alpha: the rule's p-value is the t-test's, per dataset too
        assert result.axes[axis].verdicts[eps].p_above == pytest.approx(p, rel=1e-9)
        for j, tests in result.axes[axis].by_dataset.items():
            own = one_sided_t_test(rms[12 * j : 12 * (j + 1)], eps).p_value
            assert tests[eps].p_above == pytest.approx(own, rel=1e-9)
            assert (tests[eps].decision == "above") == (own is not None and own < 0.05)


def audit_grid(seed: int) -> tuple[Grid, np.ndarray]:
    """2 datasets x 8 prompts x 32 kinds (register, spacing; 2 positions x 8 strengths),
    a BLEU-like delta whose chance rises with strength and a per-prompt scale."""
    rng = np.random.default_rng(seed)
    politeness = (-10, -8, -6, -4, -2, 2, 4, 6)
    spacing = (1, 5, 10, 20, 30, 50, 75, 100)
    kinds = [
        ("register", "politeness", float(s), p) for p in ("prefix", "global") for s in politeness
    ]
    kinds += [("noise", "spacing", float(s), p) for p in ("prefix", "global") for s in spacing]
    cells = [(f"d{j}", f"d{j}p{i}", k) for j in range(2) for i in range(8) for k in kinds]
    scale = rng.lognormal(0, 0.5, 16).repeat(len(kinds))
    strength = np.array([abs(k[2]) / (100 if k[0] == "noise" else 10) for _, _, k in cells])
    changed = rng.random(len(cells)) < 0.05 + 0.5 * strength**2
    values = np.where(changed, rng.beta(5, 2, len(cells)), 0.0) * scale
    grid = Grid(tuple(c[0] for c in cells), tuple(c[1] for c in cells), tuple(c[2] for c in cells))
    return grid, values


def adaptive_run(layout_grid: Grid, values: np.ndarray, seed: int):  # type: ignore[no-untyped-def]
    layout = index_grid(layout_grid, "subtype")
    return run_budgeted(
        draw_design(layout, seed),
        (64, 112, 160),
        lambda m: values[m][:, None],
        ("x",),
        epsilons=(0.5,),
        levels=(0.0, 0.0, 0.0),  # never decided: all three rounds run
        correct=False,
    )


def test_a_prompts_counts_do_not_depend_on_its_own_values() -> None:
    """Adaptive rounds: rescaling one prompt's deltas (its own values only) leaves its
    cells in every round unchanged; what it sees steers only the other prompts."""
    grid, values = audit_grid(3)
    mine = np.array([p == "d0p2" for p in grid.prompt])
    changed = np.where(mine, values * 7.0 + 0.3, values)
    for seed in range(3):
        before = adaptive_run(grid, values, seed)
        after = adaptive_run(grid, changed, seed)
        assert (before.observed[mine] == after.observed[mine]).all()
        assert (before.observed != after.observed).any() or seed > 0


def test_adaptive_rounds_leave_the_mean_square_unbiased() -> None:
    """3 rounds of Neyman allocation: each prompt's realised-count MS^ averages to its full
    mean square within simulation error over 1,500 designs (6 s). Weights recomputed each
    round from every observed cell left it 2% low (dataset z -4.5 over these designs)."""
    grid, values = audit_grid(3)
    layout = index_grid(grid, "subtype")
    full_ms = full_scores(layout, values) ** 2
    ms = np.array([adaptive_run(grid, values, seed).prompts["x"].ms for seed in range(1500)])
    se = ms.std(axis=0, ddof=1) / np.sqrt(len(ms))
    z = (ms.mean(axis=0) - full_ms) / se
    assert np.abs(z).max() < 4
    dataset = ms.mean(axis=1)
    assert abs(dataset.mean() - full_ms.mean()) < 3 * dataset.std(ddof=1) / np.sqrt(len(ms))
