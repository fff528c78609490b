"""``python -m bench.budget_baseline``: budgeted runs with the last release as a control
variate (sago_core/budget/baseline.py), replayed beside the plain design.

The new release is a finished full grid (``--run``, else the synthetic paper grid of
bench/budget.py); its baseline a second full grid of the same cells (``--baseline``, a
recorded run of the last release) or, without one, releases made from the new one's cells:

- ``strong``: each cell the same as the new release's with probability 0.85, else the value
  of another cell of the same prompt and stratum (the release answers that variant as it
  answers a sibling), every cell of a prompt then scaled by a per-prompt drift exp(N(0,
  0.1)): a release of the same family;
- ``strong, other prompts``: the same share kept, the rest from a cell of the same stratum
  at any prompt of the dataset (a harsher release: what changed is unrelated to the prompt);
- ``weak``: 10% of the cells kept, the rest as in the line above (correlation ~0.1);

and ``none (plain)``, the plain design on the same seeded designs.

Per baseline, budget and axis, over the same seeded designs as the plain replay: ``rho``
the correlation of the linearised cells between the two full grids (what the planner
uses), ``cover`` the share of intervals holding the full grid's pooled SGS, ``bias/SE``
|the mean error| over the mean standard error, ``agree`` the share of runs whose verdict at
each eps (the stopping rule's) equals the full grid's t-test verdict (the lowest over the
eps), ``width`` the mean half-width over the plain design's, and ``pred/real`` the
planner's predicted half-width with the baseline over the realised one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

from bench.budget import ALPHA, full_truth, load_grid
from sago_core.artifacts.layout import DELTAS_FILE
from sago_core.budget.baseline import measured_control
from sago_core.budget.cells import GridValues, grid_from_deltas
from sago_core.budget.design import Layout, draw_design
from sago_core.budget.estimate import Estimate, full_scores
from sago_core.budget.planner import allocated_half_widths, planned_components, variance_components
from sago_core.budget.schedule import BudgetTooSmall, budget_cells, make_schedule
from sago_core.budget.sequential import BudgetResult, run_budgeted
from sago_core.vocabulary import EPSILONS, Z95

COLUMNS = ("baseline", "budget", "axis", "rho", "cover", "bias/SE", "agree", "width", "pred/real")


def release(
    values: np.ndarray, layout: Layout, keep: float, rng: np.random.Generator, same_prompt: bool
) -> np.ndarray:
    """A baseline made from the new release's cells (module docstring)."""
    group = layout.stratum + (layout.prompt_code * len(layout.strata) if same_prompt else 0)
    order = np.argsort(group, kind="stable")
    start = np.searchsorted(group[order], group, side="left")
    size = np.searchsorted(group[order], group, side="right") - start
    donor = order[start + (rng.random(len(group)) * size).astype(np.int64)]
    out = np.where((rng.random(len(group)) < keep)[:, None], values, values[donor])
    if same_prompt:
        out = out * np.exp(rng.normal(0, 0.1, len(layout.prompts)))[layout.prompt_code, None]
    return out


def replay(
    gv: GridValues, fraction: float, rounds: int, replays: int, baseline: np.ndarray | None
) -> list[BudgetResult]:
    schedule = make_schedule(gv.grid, budget_cells(gv.grid.cells, fraction, None), rounds)
    return [
        run_budgeted(
            draw_design(schedule.layout, seed, schedule.prompts),
            schedule.totals,
            lambda m: gv.values[m],
            gv.axes,
            alpha=ALPHA,
            baseline=baseline,
        )
        for seed in range(replays)
    ]


def rows(
    gv: GridValues,
    truth: dict,
    name: str,
    fraction: float,
    rounds: int,
    baseline: np.ndarray | None,
    plain: list[BudgetResult],
    runs: list[BudgetResult],
) -> list[tuple]:
    schedule = make_schedule(gv.grid, budget_cells(gv.grid.cells, fraction, None), rounds)
    layout = schedule.layout
    components = {a: variance_components(layout, gv.values[:, k]) for k, a in enumerate(gv.axes)}
    planned = (
        components
        if baseline is None
        else planned_components(components, layout, gv.values, baseline, gv.axes)
    )
    per_prompt = float(np.mean([r.cells for r in runs])) / sum(schedule.prompts)
    predicted = allocated_half_widths(
        planned, min(schedule.prompts), per_prompt, rounds=schedule.rounds
    )
    every = np.ones(len(layout.stratum), dtype=bool)
    out = []
    for k, axis in enumerate(gv.axes):
        rho = float("nan")
        if baseline is not None:
            roots = (full_scores(layout, gv.values[:, k]), full_scores(layout, baseline[:, k]))
            rho = measured_control(layout, gv.values[:, k], baseline[:, k], every, roots).rho
        t = truth[axis]
        est = np.array([_estimate(r, axis).value for r in runs])
        hw = np.array([_estimate(r, axis).half_width(r.level) for r in runs])
        plain_hw = np.mean([_estimate(r, axis).half_width(r.level) for r in plain])
        agree = min(
            np.mean(
                [(r.axes[axis].verdicts[e].decision == "above") == t["verdicts"][e] for r in runs]
            )
            for e in EPSILONS
        )
        out.append(
            (
                name,
                f"{fraction:.0%}",
                axis,
                f"{rho:.2f}",
                f"{np.mean(np.abs(est - t['sgs']) <= hw):.3f}",
                f"{abs(est.mean() - t['sgs']) / (hw.mean() / Z95):.2f}",
                f"{agree:.3f}",
                f"{hw.mean() / plain_hw:.2f}",
                f"{predicted[axis] / hw.mean():.2f}",
            )
        )
    return out


def _estimate(result: BudgetResult, axis: str) -> Estimate:
    estimate = result.axes[axis].estimate
    assert estimate is not None, f"{axis}: no estimate"
    return estimate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budget_baseline", description=__doc__)
    parser.add_argument("--run", type=Path, help="the new release: a finished full-grid run")
    parser.add_argument("--baseline", type=Path, help="the last release: a full run of its grid")
    parser.add_argument("--prompts", type=int, default=8, help="synthetic: prompts per dataset")
    parser.add_argument("--budgets", default="0.05,0.1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--markdown", type=Path, help="also write the table here (Markdown)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    gv = load_grid(args.run, None, args.prompts, 1)
    truth = full_truth(gv)
    layout = make_schedule(gv.grid, gv.grid.cells, 1).layout
    rng = np.random.default_rng(7)
    if args.baseline is not None:
        recorded = grid_from_deltas(pl.read_parquet(args.baseline / DELTAS_FILE))
        if recorded.grid != gv.grid or recorded.axes != gv.axes:
            raise SystemExit("bench.budget_baseline: the baseline's grid is not the run's")
        baselines = {f"recorded {args.baseline.name}": recorded.values}
    else:
        baselines = {
            "strong": release(gv.values, layout, 0.85, rng, True),
            "strong, other prompts": release(gv.values, layout, 0.85, rng, False),
            "weak": release(gv.values, layout, 0.10, rng, False),
        }
    source = str(args.run) if args.run else f"synthetic paper grid, {args.prompts} prompts/dataset"
    print(f"baseline replay: {source}, {gv.grid.cells} cells, {args.replays} runs per budget")
    table = [COLUMNS]
    print("  ".join(f"{c:>10}" for c in COLUMNS), flush=True)
    for fraction in (float(f) for f in args.budgets.split(",")):
        try:
            plain = replay(gv, fraction, args.rounds, args.replays, None)
        except BudgetTooSmall as exc:  # a small grid's low budgets: no design to replay
            print(f"{fraction:>6.0%} refused: {exc}")
            continue
        every: dict[str, np.ndarray | None] = {"none (plain)": None, **baselines}
        for name, values in every.items():
            runs = (
                plain if values is None else replay(gv, fraction, args.rounds, args.replays, values)
            )
            found = rows(gv, truth, name, fraction, args.rounds, values, plain, runs)
            table.extend(found)
            print("\n".join("  ".join(f"{c:>10}" for c in r) for r in found), flush=True)
    if args.markdown:
        lines = ["|" + "|".join(r) + "|" for r in table]
        lines.insert(1, "|" + "---|" * len(COLUMNS))
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
