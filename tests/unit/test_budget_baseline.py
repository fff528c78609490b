"""The last release as a control variate (budget/baseline.py): lambda and R by hand, a
baseline equal to the new release leaves no design error, one that moves against it is the
plain design estimator exactly, and a baseline of another design is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.budget.baseline import (
    _across_prompts,
    baseline_estimates,
    measured_control,
    read_baseline,
)
from sago_core.budget.design import Grid, draw_design, index_grid, select_cells
from sago_core.budget.estimate import axis_estimates, full_scores
from sago_core.budget.planner import (
    planned_components,
    predicted_estimate,
    variance_components,
)
from sago_core.budget.run_cells import RunCells
from sago_core.errors import ConfigError

KINDS = [("register", "politeness", float(s), "prefix") for s in (-8, -6, -4, -2, 2, 4, 6, 8)]
KINDS += [("noise", "spacing", float(s), "prefix") for s in (1, 5, 10, 20, 50, 100)]


def sampled_grid(seed: int = 0) -> tuple[Grid, np.ndarray, np.ndarray]:
    """Two datasets x 6 prompts x 14 kinds of positive-mean deltas, and 4 cells per prompt
    and stratum asked (every prompt sampled)."""
    rng = np.random.default_rng(seed)
    cells = [(f"d{j}", f"d{j}p{i}", k) for j in range(2) for i in range(6) for k in KINDS]
    grid = Grid(*(tuple(c[n] for c in cells) for n in range(3)))  # type: ignore[arg-type]
    values = rng.normal(0, 1, len(cells)) * rng.gamma(4, 0.25, 12).repeat(len(KINDS))
    layout = index_grid(grid, "family")
    asked = select_cells(draw_design(layout, seed), np.full(len(layout.strata), 4))
    return grid, values, asked


def test_lambda_and_the_variance_ratio_by_hand() -> None:
    """One prompt, one stratum, z = d^2 (roots 0.5): z_new 1, 2, 3, 4 and z_old 1, 3, 2, 4
    have centred sums of squares 5 and 5 and cross-product 4: lambda 0.8, R = (5 - 2 x 0.8
    x 4 + 0.64 x 5) / 5 = 0.36 = 1 - rho^2, rho 0.8."""
    layout = index_grid(Grid(("d",) * 4, ("p",) * 4, tuple(KINDS[:4])), "family")
    new, old = np.sqrt([1.0, 2, 3, 4]), np.sqrt([1.0, 3, 2, 4])
    half = np.array([0.5])
    control = measured_control(layout, new, old, np.ones(4, dtype=bool), (half, half))
    assert control.lam.tolist() == pytest.approx([0.8])
    assert control.ratio.tolist() == pytest.approx([0.36])
    assert control.rho == pytest.approx(0.8)


def test_a_baseline_equal_to_the_new_release_leaves_no_design_error() -> None:
    grid, values, asked = sampled_grid()
    layout = index_grid(grid, "family")
    column = np.where(asked, values, np.nan)
    prompts, _, pooled = baseline_estimates(layout, column, values, np.array([6, 6]), True, asked)
    full = full_scores(layout, values)
    assert np.allclose(prompts.s, full, rtol=1e-12)
    assert np.all(prompts.s_var <= 1e-15)
    assert pooled is not None and pooled.variance <= 1e-15
    plain = axis_estimates(layout, column, np.array([6, 6]), True, asked)[2]
    assert plain is not None and plain.variance > 1e-4
    # the planner predicts the same: no second-stage variance left
    parts = {"a": variance_components(layout, values)}
    planned = planned_components(parts, layout, values[:, None], values[:, None], ["a"])
    assert (
        predicted_estimate(planned["a"], 6, 4).variance
        < 0.5 * predicted_estimate(parts["a"], 6, 4).variance
    )


def test_the_baseline_knows_the_prompts_a_budget_leaves_out() -> None:
    """3 of 6 prompts per dataset sampled, the new release equal to the baseline: the plain
    design carries the prompts' sampling error; over the baseline's prompts the estimate is
    every prompt's mean exactly, with no error left."""
    grid, values, _ = sampled_grid()
    layout = index_grid(grid, "family")
    design = draw_design(layout, 0, [3, 3])
    asked = select_cells(design, np.full(layout.sizes.shape, 4))
    column = np.where(asked, values, np.nan)
    n = np.array([3, 3])
    prompts, per_dataset, pooled = baseline_estimates(layout, column, values, n, True, asked)
    full = full_scores(layout, values)
    means = [full[layout.prompt_dataset == j].mean() for j in range(2)]
    assert [e.value for e in per_dataset if e] == pytest.approx(means, abs=1e-12)
    assert pooled is not None and pooled.variance <= 1e-20
    assert pooled.value == pytest.approx(np.mean(means), abs=1e-12)
    plain = axis_estimates(layout, column, n, True, asked)[2]
    assert plain is not None and plain.variance > 1e-4
    assert prompts.tests is not None and set(prompts.tests) == {0, 1, None}


def test_the_estimate_over_the_baseline_prompts_by_hand() -> None:
    """Dataset d0: the baseline's roots 1, 2, 3, 4, the sampled prompts' differences 0.1,
    0.3, 0.2 (the fourth not sampled): SGS 2.5 + 0.2 = 2.7, error var(d) / 3 = 0.01 / 3; the
    test's variance (var of the roots 5/3 + var(d) 0.01 + 2 cov 0.05) / 4 + 0.01 / 3 =
    0.4475 on 2 degrees of freedom. d1 the same shifted by 10 (its own mean, same error);
    pooled, every prompt in one sample."""
    kinds = tuple(KINDS[:1]) * 8
    grid = Grid(("d0",) * 4 + ("d1",) * 4, tuple(f"p{i}" for i in range(8)), kinds)
    layout = index_grid(grid, "family")
    full = np.array([1.0, 2, 3, 4, 11, 12, 13, 14])
    diff = np.array([0.1, 0.3, 0.2, np.nan] * 2)
    found = _across_prompts(layout, diff, full)
    assert found is not None
    estimates, tests = found
    assert [e.value for e in estimates if e] == pytest.approx([2.7, 12.7])
    assert [e.variance for e in estimates if e] == pytest.approx([0.01 / 3] * 2)
    assert [e.df for e in estimates if e] == [2, 2]
    assert tests[0] == pytest.approx((2.7, 0.4475, 2))
    # pooled: mean 7.7; the roots' spread over the 8 prompts 210 / 7 = 30, d's over the 6
    # sampled 0.008, their covariance with the roots 0.2 / 5 = 0.04; each dataset's error
    # at a quarter
    assert tests[None] == pytest.approx((7.7, (30 + 0.008 + 0.08) / 8 + 0.01 / 6, 5))
    assert _across_prompts(layout, np.array([0.1, np.nan, np.nan, np.nan] * 2), full) is None


def test_a_baseline_moving_against_the_new_release_is_the_plain_estimator_exactly() -> None:
    """d_old^2 = 9 - d_new^2 (clipped): their covariance is negative, lambda 0."""
    grid, values, asked = sampled_grid(1)
    layout = index_grid(grid, "family")
    baseline = np.sqrt(np.maximum(9 - values**2, 0.0))
    column = np.where(asked, values, np.nan)
    n = np.array([6, 6])
    got = baseline_estimates(layout, column, baseline, n, True, asked)
    plain = axis_estimates(layout, column, n, True, asked)
    for field in ("ms", "ms_var", "root", "s", "s_var", "prior_var"):
        assert np.array_equal(getattr(got[0], field), getattr(plain[0], field), equal_nan=True)
    assert got[2] == plain[2]


def test_a_baseline_of_another_design_or_a_budgeted_one_is_refused(tmp_path: Path) -> None:
    ids = (("d", "p", "v1"), ("d", "p", "v2"))
    cells = RunCells(Grid(("d", "d"), ("p", "p"), tuple(KINDS[:2])), ids)
    run = tmp_path / "last"
    run.mkdir()
    (run / "run_config.json").write_text(json.dumps({"seed": 1}), encoding="utf-8")
    deltas = pl.DataFrame(
        {
            "model": ["m", "m"],
            "dataset": ["d", "d"],
            "prompt_id": ["p", "p"],
            "variant_id": ["v1", "v2"],
            "axis": ["bleu", "bleu"],
            "delta_norm": [0.5, -0.25],
        }
    )
    deltas.write_parquet(run / "deltas.parquet")
    assert read_baseline(run, {"seed": 1}, cells, [("new", "bleu")])[:, 0].tolist() == [0.5, -0.25]
    with pytest.raises(ConfigError, match=r"not this run's design: seed \(seed\): 1 vs 2"):
        read_baseline(run, {"seed": 2}, cells, [("new", "bleu")])
    deltas.filter(pl.col("variant_id") == "v1").write_parquet(run / "deltas.parquet")
    with pytest.raises(ConfigError, match="1 of this run's cells not in it"):
        read_baseline(run, {"seed": 1}, cells, [("new", "bleu")])
    (run / "budget.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match="a budgeted run; the baseline must be a full run"):
        read_baseline(run, {"seed": 1}, cells, [("new", "bleu")])


def test_budget_json_and_its_line_name_the_baseline_and_the_correlation() -> None:
    """A run whose baseline answered every cell alike: correlation 1 on every axis, lambda
    1, and the line that the report, summary.md and the card show says so."""
    from sago_core.budget.record import budget_line, budget_summary
    from sago_core.budget.rounds import budgeted_design, column_name
    from sago_core.budget.run_cells import run_cells
    from sago_core.budget.sequential import run_budgeted
    from sago_core.config import BudgetSettings

    names = ["dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position"]
    rows = [
        ("d", f"p{i}", f"v{s}", "noise", "spacing", float(s), "global")
        for i in range(3)
        for s in range(1, 7)
    ]
    variants = pl.DataFrame(rows, schema=names, orient="row").with_columns(kept=pl.lit(True))
    cells = run_cells(variants)
    settings = BudgetSettings(fraction=0.5, rounds=1, baseline="runs/last")
    design = budgeted_design(cells, settings, 0, ["m"])
    values = np.random.default_rng(3).normal(0, 1, (len(cells.ids), len(design.columns)))
    result = run_budgeted(
        design.design,
        design.schedule.totals,
        lambda m: values[m],
        [column_name(m, a) for m, a in design.columns],
        baseline=values,
    )
    record = budget_summary(result, design, values)
    assert record["baseline"]["run"] == "runs/last"
    assert list(record["baseline"]["correlation"].values()) == pytest.approx([1.0] * 6)
    assert record["baseline"]["lambda"][column_name("m", "bleu")] == {"d": pytest.approx(1.0)}
    # every prompt's difference 0: the estimate over the baseline's prompts, on every axis
    assert set(record["baseline"]["estimate"].values()) == {"over the baseline's prompts"}
    assert budget_line(record).endswith(
        "; baseline runs/last (correlation of the cells: act 1.00, "
        "bleu 1.00, bert 1.00, prob 1.00, ent 1.00, mr 1.00)"
    )
    assert budget_summary(result, design)["baseline"] is None


def test_the_replay_prints_every_baseline_and_axis_beside_the_plain_design(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.budget_baseline import main

    out = tmp_path / "table.md"
    args = ["--prompts", "3", "--replays", "2", "--budgets", "0.2", "--rounds", "1"]
    assert main([*args, "--markdown", str(out)]) == 0
    table = out.read_text(encoding="utf-8").splitlines()
    assert len(table) == 2 + 4 * 6  # header, rule, the plain design and three baselines x six axes
    rho = {r.split("|")[1]: float(r.split("|")[4]) for r in table[2:] if "|bleu|" in r}
    assert rho["strong"] > 0.7 and rho["weak"] < 0.3
    assert "baseline replay: synthetic paper grid, 3 prompts/dataset" in capsys.readouterr().out


def test_the_baseline_on_the_command_line_needs_a_budget() -> None:
    from sago_cli.main import build_parser
    from sago_cli.run import config_from_args

    parse = build_parser().parse_args
    config = config_from_args(parse(["run", "--budget", "0.05", "--baseline", "runs/last"]))
    assert config.budget is not None and config.budget.baseline == "runs/last"
    assert config.model_dump(mode="json")["budget"]["baseline"] == "runs/last"
    # without one, the budget serialises as before the key existed: its run id stays
    plain = config_from_args(parse(["run", "--budget", "0.05"]))
    assert plain.budget is not None and "baseline" not in plain.model_dump(mode="json")["budget"]
    with pytest.raises(ConfigError, match="--baseline runs/last: give --budget too"):
        config_from_args(parse(["run", "--baseline", "runs/last"]))
