"""``python -m bench.budget``: replay budgeted runs on a finished full grid.

Given a run folder (its ``deltas.parquet``, one model) or, without one, a synthetic paper
grid with realistic variance components (bench/budget_synthetic.py), replay seeded
budgeted runs at each budget with no new generation (the grid answers every cell asked
for) and print, per budget and axis:

- ``cover``: share of runs whose final interval holds the full grid's pooled SGS;
- ``|err|/hw``: mean |estimate - full| over the full run's own 95% half-width (its
  stratified prompt bootstrap, statistics/intervals.py);
- ``agree@eps``: share of runs whose one-sided verdict (H0 E[s] <= eps, significant at
  alpha = 0.05 under the alpha-spending rule) equals the full grid's t-test verdict;
- ``stop``: mean share of the budget used, and mean rounds run;
- ``pred hw``: the planner's predicted half-width (planner.py, from the full grid's
  variance components at the replay's strata, sampled prompts and mean cells per prompt,
  each stratum at the design's own allocation: planner.allocated_half_widths);
  ``real hw``: the mean realised half-width of the budgeted runs' intervals; ``pred/real``
  their ratio; ``1.96 rmse``: 1.96 x the root mean square error of the estimates against the
  full grid's value, the half-width an interval would need (real hw below it: intervals too
  narrow, the coverage shortfall's measure).

Then the false-positive rate of the sequential rule on a null family: grids whose prompts
are drawn with replacement from the full grid's prompts (per dataset), so the population
mean of s is exactly the full grid's pooled SGS; testing at eps = that value, any
"exceeds eps" verdict is false. Beside it: the same grids tested at the full alpha after
every round (the looking the spending rule guards against) and the full grid's single test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

from bench.budget_synthetic import synthetic_grid
from sago_core.artifacts.layout import DELTAS_FILE
from sago_core.budget.cells import GridValues, grid_from_deltas
from sago_core.budget.design import Grid, draw_design
from sago_core.budget.estimate import full_scores
from sago_core.budget.planner import allocated_half_widths, variance_components
from sago_core.budget.schedule import BudgetTooSmall, budget_cells, make_schedule
from sago_core.budget.sequential import BudgetResult, run_budgeted
from sago_core.scoring.significance import one_sided_t_test
from sago_core.statistics.intervals import bootstrap_pooled_ci
from sago_core.vocabulary import EPSILONS, Z95

ALPHA = 0.05


def load_grid(
    run: Path | None, model: str | None, prompts: int, seed: int, sparse_mr: bool = False
) -> GridValues:
    if run is None:
        return synthetic_grid(prompts, seed, sparse_mr=sparse_mr)
    path = run / DELTAS_FILE
    if not path.is_file():
        raise SystemExit(f"bench.budget: {path} does not exist (a finished run folder holds it)")
    return grid_from_deltas(pl.read_parquet(path), model)


def full_truth(gv: GridValues) -> dict[str, dict]:
    """Per axis: pooled SGS, the full run's half-width and its verdict at each eps."""
    layout = make_schedule(gv.grid, gv.grid.cells, 1).layout
    truth = {}
    for a, axis in enumerate(gv.axes):
        s = full_scores(layout, gv.values[:, a])
        groups = [s[layout.prompt_dataset == j] for j in range(len(layout.datasets))]
        sgs = float(np.mean([np.nanmean(g) for g in groups if np.isfinite(g).any()]))
        low, high = bootstrap_pooled_ci(groups, seed=0)
        half = None if low is None or high is None else (high - low) / 2
        verdicts, pvalues = {}, {}
        for eps in EPSILONS:
            p = one_sided_t_test(s[np.isfinite(s)], eps).p_value
            verdicts[eps] = p is not None and p < ALPHA
            pvalues[eps] = p
        truth[axis] = {"sgs": sgs, "half": half, "verdicts": verdicts, "p": pvalues, "s": s}
    return truth


def replay(gv: GridValues, fraction: float, rounds: int, replays: int) -> list[BudgetResult]:
    schedule = make_schedule(gv.grid, budget_cells(gv.grid.cells, fraction, None), rounds)
    results = []
    for seed in range(replays):
        design = draw_design(schedule.layout, seed, schedule.prompts)
        results.append(
            run_budgeted(design, schedule.totals, lambda m: gv.values[m], gv.axes, alpha=ALPHA)
        )
    return results


def budget_rows(
    gv: GridValues, truth: dict, fraction: float, rounds: int, results: list
) -> list[dict]:
    """Per axis: the columns of the validation table (module docstring)."""
    schedule = make_schedule(gv.grid, budget_cells(gv.grid.cells, fraction, None), rounds)
    layout = schedule.layout
    rows = []
    cells = np.mean([r.cells for r in results])
    sampled = min(schedule.prompts)
    per_prompt = cells / sum(schedule.prompts)
    components = {
        axis: variance_components(layout, gv.values[:, a]) for a, axis in enumerate(gv.axes)
    }
    allocated = allocated_half_widths(components, sampled, per_prompt, rounds=schedule.rounds)
    for axis in gv.axes:
        t = truth[axis]
        est = np.array([r.axes[axis].estimate.value for r in results])
        hw = np.array([r.axes[axis].estimate.half_width(r.level) for r in results])
        agree = []
        for eps in EPSILONS:
            said = [r.axes[axis].verdicts[eps].decision == "above" for r in results]
            agree.append(float(np.mean([v == t["verdicts"][eps] for v in said])))
        predicted = allocated[axis]
        real = float(np.mean(hw))
        rows.append(
            {
                "budget": fraction,
                "axis": axis,
                "cover": float(np.mean(np.abs(est - t["sgs"]) <= hw)),
                "err": float(np.mean(np.abs(est - t["sgs"]))) / t["half"] if t["half"] else None,
                "agree": agree,
                "stop": float(np.mean([r.cells / r.budget_cells for r in results])),
                "rounds": float(np.mean([len(r.rounds) for r in results])),
                "pred": predicted,
                "real": real,
                "rmse": Z95 * float(np.sqrt(np.mean((est - t["sgs"]) ** 2))),
                "ratio": predicted / real if real > 0 else None,
            }
        )
    return rows


COLUMNS = ("budget", "axis", "cover", "|err|/hw", *(f"agree@{e}" for e in EPSILONS))
COLUMNS += ("stop", "rounds", "pred hw", "real hw", "1.96 rmse", "pred/real")


def _cells(row: dict) -> list[str]:
    def number(x: float | None, form: str) -> str:
        return "NA" if x is None else format(x, form)

    return [
        f"{row['budget']:.0%}",
        row["axis"],
        f"{row['cover']:.3f}",
        number(row["err"], ".3f"),
        *(f"{x:.3f}" for x in row["agree"]),
        f"{row['stop']:.2f}",
        f"{row['rounds']:.2f}",
        f"{row['pred']:.4g}",
        f"{row['real']:.4g}",
        f"{row['rmse']:.4g}",
        number(row["ratio"], ".2f"),
    ]


def text_line(cells: list[str] | tuple[str, ...]) -> str:
    widths = [6, 5, 6, 8, *(9 for _ in EPSILONS), 6, 6, 9, 9, 9, 9]
    pairs = enumerate(zip(cells, widths, strict=True))
    return " ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in pairs)


def markdown_table(rows: list[dict]) -> str:
    head = ["|".join(["", *(c.replace("|", "\\|") for c in COLUMNS), ""])]
    head.append("|" + "---|" * len(COLUMNS))
    return "\n".join([*head, *("|".join(["", *_cells(r), ""]) for r in rows)]) + "\n"


def diagnosis(gv: GridValues, truth: dict, row: dict, results: list) -> str:
    """Why an axis misses (coverage < 0.93 or agreement < 0.95): the estimate's bias in
    standard errors, the realised half-width over the one it needed, and per prompt the
    roots' relative bias, the share of sampled prompts whose root came out 0 while the full
    grid's is not (an event none of its cells showed), and the prompts' stated over their
    realised variance; beside the full grid's p-values, as near alpha as agreement is low."""
    axis, t = row["axis"], truth[row["axis"]]
    est = np.array([r.axes[axis].estimate.value for r in results])
    sd = float(np.std(est, ddof=1)) if len(est) > 1 else float("nan")
    bias = (float(np.mean(est)) - t["sgs"]) / sd if sd > 0 else float("nan")
    true_s = t["s"]
    roots = np.array([r.prompts[axis].s for r in results])  # replays x prompts (NaN: not sampled)
    stated = np.array([r.prompts[axis].s_var for r in results])
    seen = np.isfinite(roots) & np.isfinite(true_s)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(seen & (true_s > 0), roots / true_s - 1, np.nan)
        zero = float(np.mean((roots == 0)[seen & (true_s > 0)])) if seen.any() else float("nan")
        realised = np.nanvar(np.where(seen, roots, np.nan), axis=0, ddof=1)
        mean_stated = np.nanmean(np.where(seen, stated, np.nan), axis=0)
        calib = float(np.nansum(mean_stated) / np.nansum(realised))
    pvals = ", ".join(
        f"p@{e} {'NA' if t['p'][e] is None else format(t['p'][e], '.3g')}" for e in EPSILONS
    )
    need = row["real"] / row["rmse"] if row["rmse"] > 0 else float("nan")
    return (
        f"{'':>6} {axis}: bias {bias:+.2f} se, real hw / (1.96 rmse) {need:.2f}; prompts: "
        f"root bias {np.nanmean(rel):+.1%}, root 0 where the grid's is not {zero:.1%}, "
        f"stated/realised variance {calib:.2f}; full grid {pvals}"
    )


def resampled(gv: GridValues, rng: np.random.Generator) -> GridValues:
    """A null grid: each dataset's prompts drawn with replacement from its own."""
    layout = make_schedule(gv.grid, gv.grid.cells, 1).layout
    picks: list[tuple[int, int]] = []
    for j in range(len(layout.datasets)):
        members = np.flatnonzero(layout.prompt_dataset == j)
        picks.extend((int(p), slot) for slot, p in enumerate(rng.choice(members, len(members))))
    cells_of = [np.flatnonzero(layout.prompt_code == p) for p in range(len(layout.prompts))]
    index = np.concatenate([cells_of[p] for p, _ in picks])
    names = [f"{layout.prompts[p][1]}#{slot}" for p, slot in picks for _ in cells_of[p]]
    grid = Grid(
        tuple(gv.grid.dataset[i] for i in index),
        tuple(names),
        tuple(gv.grid.kind[i] for i in index),
    )
    return GridValues(grid, gv.axes, gv.values[index])


def false_positives(
    gv: GridValues, truth: dict, fraction: float, rounds: int, replays: int
) -> dict[str, list[float]]:
    """Per axis, the share of null grids with a false "exceeds eps": the spending rule, the
    naive rule (full alpha at every look), the full grid's single test."""
    rng = np.random.default_rng(12345)
    hits = {a: [0, 0, 0] for a in gv.axes}
    null_eps = {axis: (truth[axis]["sgs"],) for axis in gv.axes}
    for seed in range(replays):
        null = resampled(gv, rng)
        schedule = make_schedule(null.grid, budget_cells(null.grid.cells, fraction, None), rounds)
        design = draw_design(schedule.layout, seed, schedule.prompts)

        def oracle(mask: np.ndarray, null: GridValues = null) -> np.ndarray:
            return null.values[mask]

        runs = [
            run_budgeted(
                design,
                schedule.totals,
                oracle,
                gv.axes,
                epsilons=null_eps,
                alpha=ALPHA,
                levels=levels,
            )
            for levels in (None, (ALPHA,) * schedule.rounds)
        ]
        for a, axis in enumerate(gv.axes):
            eps = null_eps[axis][0]
            for slot, result in enumerate(runs):
                hits[axis][slot] += result.axes[axis].verdicts[eps].decision == "above"
            s = full_scores(schedule.layout, null.values[:, a])
            p = one_sided_t_test(s[np.isfinite(s)], eps).p_value
            hits[axis][2] += p is not None and p < ALPHA
    return {axis: [count / replays for count in counts] for axis, counts in hits.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budget", description=__doc__)
    parser.add_argument("--run", type=Path, help="a finished full-grid run folder")
    parser.add_argument("--model", help="the model to replay (when the run holds several)")
    parser.add_argument("--prompts", type=int, default=8, help="synthetic: prompts per dataset")
    parser.add_argument("--grid-seed", type=int, default=1, help="synthetic grid's seed")
    parser.add_argument(
        "--sparse-mr",
        action="store_true",
        help="synthetic: MR a sparse 0/1 event at real per-prompt rates (mean 0.11)",
    )
    parser.add_argument("--budgets", default="0.05,0.1,0.2,0.4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--null-replays", type=int, default=200)
    parser.add_argument("--null-budget", type=float, default=0.2)
    parser.add_argument("--markdown", type=Path, help="also write the table here (Markdown)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    gv = load_grid(args.run, args.model, args.prompts, args.grid_seed, args.sparse_mr)
    source = str(args.run) if args.run else f"synthetic paper grid, {args.prompts} prompts/dataset"
    if args.run is None and args.sparse_mr:
        source += ", sparse MR"
    truth = full_truth(gv)
    print(
        f"budget replay: {source}, {gv.grid.cells} cells, {args.replays} runs per budget, "
        f"at most {args.rounds} rounds, alpha {ALPHA}"
    )
    print(
        "full grid: "
        + ", ".join(
            f"{a} {t['sgs']:.4f}" + ("" if t["half"] is None else f" +-{t['half']:.4f}")
            for a, t in truth.items()
        )
    )
    print(text_line(COLUMNS), flush=True)
    table: list[dict] = []
    for fraction in (float(f) for f in args.budgets.split(",")):
        clock = time.perf_counter()
        try:
            schedule = make_schedule(
                gv.grid, budget_cells(gv.grid.cells, fraction, None), args.rounds
            )
        except BudgetTooSmall as exc:  # a small grid's low budgets: no design to replay
            print(f"{fraction:>6.0%} refused: {exc}")
            continue
        results = replay(gv, fraction, args.rounds, args.replays)
        rows = budget_rows(gv, truth, fraction, args.rounds, results)
        table.extend(rows)
        print("\n".join(text_line(_cells(r)) for r in rows))
        for row in rows:
            if row["cover"] < 0.93 or min(row["agree"]) < 0.95:
                print(diagnosis(gv, truth, row, results))
        print(
            f"{'':>6} level {schedule.layout.level}, prompts {list(schedule.prompts)}, "
            f"rounds at {list(schedule.totals)} cells ({time.perf_counter() - clock:.0f} s)",
            flush=True,
        )
    if args.null_replays:
        print(
            f"\nfalse-positive rate, {args.null_replays} null grids at "
            f"{args.null_budget:.0%}, one-sided at alpha {ALPHA}:"
        )
        rates = false_positives(gv, truth, args.null_budget, args.rounds, args.null_replays)
        print(f"{'axis':<5} {'spending':>9} {'naive':>9} {'full':>9}   (null: eps = full SGS)")
        for axis, (seq, naive, full) in rates.items():
            print(f"{axis:<5} {seq:>9.3f} {naive:>9.3f} {full:>9.3f}")
    if args.markdown:
        text = markdown_table(table)
        if args.null_replays:
            text += "\n|axis|spending|naive|full|\n|---|---|---|---|\n" + "".join(
                f"|{axis}|" + "|".join(f"{x:.3f}" for x in r) + "|\n" for axis, r in rates.items()
            )
        args.markdown.write_text(text, encoding="utf-8")
        print(f"markdown tables: {args.markdown}")
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
