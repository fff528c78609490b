"""``python -m bench.budget_scale``: is the budgeted estimator valid as the prompt set grows?

Synthetic paper grids (bench/budget_synthetic.py: 6 datasets x 81 variant kinds, per-cell
distributions shaped like a real run's, MR a sparse 0/1 event at the real run's per-prompt
rates) at N = 8, 48 and 200 prompts per dataset, replayed as budgeted runs at 5%, 10% and
20% of the grid (seeded designs, the grid answering every cell asked for). Per N, budget
and axis:

- ``cover``: share of runs whose final pooled interval holds the full grid's pooled SGS;
  ``min cover/ds`` and ``mean/ds``: the lowest and the mean such share over the datasets'
  own intervals (the lowest of six is drawn down by simulation error: about 0.025 below
  the mean at 120 replays when every dataset covers alike);
- ``bias/SE``: the mean error of the pooled estimate over its mean stated standard error;
  ``max abs/ds``: the largest |bias|/SE over the datasets (with R replays each figure carries
  a simulation error of about 1/sqrt(R), and the largest of six is drawn up by it);
  ``sd/SE``: the pooled estimate's realised spread over its mean stated standard error
  (above 1: the interval is too narrow);
- ``hw``: the mean pooled half-width.

Then null families, per N at ``--null-budget``: grids whose prompts are drawn with
replacement from the full grid's own (per dataset), so the population mean of s is exactly
the full grid's pooled SGS; tested at eps = that value, any verdict is false: ``above``
and ``below`` are the shares of runs whose stopping rule said so (alpha 0.05 one-sided each
way, Haybittle-Peto looks), ``per look`` the share decided at each look, and ``full``
the same grids' own full-grid t-tests (above/below), the rate no budget can beat; ``ds above``
and ``ds below`` the same for each dataset's own tests (held at that dataset's full-grid
SGS, over every grid and dataset): the verdicts the summary shows are these; ``ds full``
the full grid's own per-dataset t-tests on the same grids. The sparse MR
column is the sparse-MR null. Targets: cover >= 0.93 everywhere, |bias|/SE < 0.3, false
verdicts <= 0.05 each way; a line marks each miss. A second line marks the misses beyond
simulation error: at 120 replays an interval that covers exactly 0.95 shows below 0.93 in
15% of its levels (one dataset in six in 62% of the cells), so a level is marked there
only where a one-sided binomial test at 5% says its coverage (or its null rate) is below
0.93 (above 0.05), or where |bias|/SE less two of its simulation errors is 0.3 or more.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from bench.budget import resampled
from bench.budget_real import run_folder
from bench.budget_synthetic import drawn_grid, synthetic_grid
from sago_core.artifacts.layout import DELTAS_FILE
from sago_core.budget.cells import GridValues, grid_from_deltas
from sago_core.budget.design import Layout, draw_design
from sago_core.budget.estimate import dataset_estimates, full_scores
from sago_core.budget.schedule import BudgetTooSmall, budget_cells, make_schedule
from sago_core.budget.sequential import run_budgeted

ALPHA = 0.05
COVER, BIAS, FALSE = 0.93, 0.3, 0.05


@dataclass(frozen=True)
class Truth:
    per_dataset: np.ndarray  # axes x datasets: the full grid's SGS
    pooled: np.ndarray  # axes


def truth_of(gv: GridValues, layout: Layout) -> Truth:
    rows = []
    for a in range(len(gv.axes)):
        s = full_scores(layout, gv.values[:, a])
        rows.append(
            [np.nanmean(s[layout.prompt_dataset == j]) for j in range(len(layout.datasets))]
        )
    per = np.array(rows)
    return Truth(per, per.mean(axis=1))


def coverage_rows(gv: GridValues, fraction: float, rounds: int, reps: int) -> list[dict]:
    schedule = make_schedule(gv.grid, budget_cells(gv.grid.cells, fraction, None), rounds)
    layout = schedule.layout
    truth = truth_of(gv, layout)
    axes, datasets = len(gv.axes), len(layout.datasets)
    est = np.full((reps, axes, datasets + 1), np.nan)
    half = np.full_like(est, np.nan)
    se = np.full_like(est, np.nan)
    cells = []
    for seed in range(reps):
        design = draw_design(layout, seed, schedule.prompts)
        result = run_budgeted(design, schedule.totals, lambda m: gv.values[m], gv.axes, alpha=ALPHA)
        cells.append(result.cells / gv.grid.cells)
        for a, axis in enumerate(gv.axes):
            per = dataset_estimates(layout, result.prompts[axis], design.sampled_prompts)
            pooled = result.axes[axis].estimate
            for j, e in enumerate([*per, pooled]):
                if e is not None:
                    est[seed, a, j], half[seed, a, j] = e.value, e.half_width(result.level)
                    se[seed, a, j] = np.sqrt(max(e.variance, 0.0))
    target = np.concatenate([truth.per_dataset, truth.pooled[:, None]], axis=1)
    error = est - target[None]
    held = np.isfinite(error).sum(axis=0)
    cover = (np.abs(error) <= half).sum(axis=0) / held
    with np.errstate(invalid="ignore", divide="ignore"):
        bias = np.nanmean(error, axis=0) / np.nanmean(se, axis=0)
        spread = np.nanstd(error, axis=0, ddof=1) / np.nanmean(se, axis=0)
    # beyond simulation error: coverage below COVER by a one-sided binomial test at 5%, or
    # |bias|/SE at least BIAS less two of its simulation errors (spread / sqrt(replays))
    low = stats.binom.cdf(np.round(cover * held), held, COVER) < 0.05
    clear = low | (np.abs(bias) - 2 * spread / np.sqrt(held) >= BIAS)
    return [
        {
            "axis": axis,
            "cover": float(cover[a, -1]),
            "cover_ds": float(cover[a, :-1].min()),
            "cover_ds_mean": float(cover[a, :-1].mean()),
            "bias": float(bias[a, -1]),
            "bias_ds": float(np.nanmax(np.abs(bias[a, :-1]))),
            "sd": float(spread[a, -1]),
            "hw": float(np.nanmean(half[:, a, -1])),
            "clear": bool(clear[a].any()),
            "share": float(np.mean(cells)),
            "level": layout.level,
        }
        for a, axis in enumerate(gv.axes)
    ]


@dataclass(frozen=True)
class NullRates:
    """Shares of null grids with a false verdict: the rule's pooled tests (``above``,
    ``below``, and the share decided at each look), the full grid's own pooled t-tests
    (``full_*``), the rule's per-dataset tests (``ds_*``) and the full grid's own
    per-dataset t-tests (``ds_full_*``), the last two over every (grid, dataset): ``cases``."""

    above: float
    below: float
    looks: list[float]
    full_above: float
    full_below: float
    ds_above: float
    ds_below: float
    ds_full_above: float
    ds_full_below: float
    cases: int


def _one_sided(scores: np.ndarray, eps: float) -> tuple[bool, bool]:
    """(the full grid's t-test says above eps, says below), at ALPHA each way."""
    t = stats.ttest_1samp(scores[np.isfinite(scores)], eps)
    p_above = t.pvalue / 2 if t.statistic > 0 else 1 - t.pvalue / 2
    return bool(p_above < ALPHA), bool(1 - p_above < ALPHA)


def null_rates(gv: GridValues, fraction: float, rounds: int, reps: int) -> dict[str, NullRates]:
    """Per axis. Each dataset's prompts are drawn from its own, so its population mean of s
    is its full-grid SGS, the eps its own tests are held to."""
    layout = make_schedule(gv.grid, gv.grid.cells, 1).layout
    truth = truth_of(gv, layout)
    # the pooled tests at the pooled SGS, each dataset's at its own (the run also tests
    # the pooled SGS at the datasets' values and waits for them, so it stops no earlier)
    eps = {
        axis: (float(truth.pooled[a]), *(float(x) for x in truth.per_dataset[a]))
        for a, axis in enumerate(gv.axes)
    }
    rng = np.random.default_rng(12345)
    above = dict.fromkeys(gv.axes, 0)
    below = dict.fromkeys(gv.axes, 0)
    looks = {axis: np.zeros(rounds) for axis in gv.axes}
    full = {axis: [0, 0] for axis in gv.axes}
    own = {axis: [0, 0, 0, 0] for axis in gv.axes}
    datasets = len(layout.datasets)
    for seed in range(reps):
        null = resampled(gv, rng)
        schedule = make_schedule(null.grid, budget_cells(null.grid.cells, fraction, None), rounds)
        design = draw_design(schedule.layout, seed, schedule.prompts)
        values = null.values
        result = run_budgeted(
            design,
            schedule.totals,
            lambda m: values[m],  # noqa: B023 (called before the loop moves on)
            gv.axes,
            epsilons=eps,
            alpha=ALPHA,
        )
        for a, axis in enumerate(gv.axes):
            s = full_scores(schedule.layout, null.values[:, a])
            up, down = _one_sided(s, eps[axis][0])
            full[axis][0] += up
            full[axis][1] += down
            verdict = result.axes[axis].verdicts[eps[axis][0]]
            above[axis] += verdict.decision == "above"
            below[axis] += verdict.decision == "below"
            if verdict.look is not None:
                looks[axis][verdict.look - 1] += 1
            for j, name in enumerate(schedule.layout.datasets):
                mine = eps[axis][1 + layout.datasets.index(name)]
                verdict = result.axes[axis].by_dataset[j][mine]
                own[axis][0] += verdict.decision == "above"
                own[axis][1] += verdict.decision == "below"
                up, down = _one_sided(s[schedule.layout.prompt_dataset == j], mine)
                own[axis][2] += up
                own[axis][3] += down
    cases = reps * datasets
    return {
        a: NullRates(
            above[a] / reps,
            below[a] / reps,
            list(looks[a] / reps),
            full[a][0] / reps,
            full[a][1] / reps,
            own[a][0] / cases,
            own[a][1] / cases,
            own[a][2] / cases,
            own[a][3] / cases,
            cases,
        )
        for a in gv.axes
    }


HEAD: tuple[str, ...] = ("N", "budget", "axis", "share", "cover", "min cover/ds", "mean/ds")
HEAD += ("bias/SE",)
HEAD += ("max abs/ds", "sd/SE", "hw")


def _row(n: int, fraction: float, r: dict) -> list[str]:
    return [
        str(n),
        f"{fraction:.0%}",
        r["axis"],
        f"{r['share']:.3f}",
        f"{r['cover']:.3f}",
        f"{r['cover_ds']:.3f}",
        f"{r['cover_ds_mean']:.3f}",
        f"{r['bias']:+.2f}",
        f"{r['bias_ds']:.2f}",
        f"{r['sd']:.2f}",
        f"{r['hw']:.4g}",
    ]


def _line(cells: list[str] | tuple[str, ...]) -> str:
    widths = (4, 6, 5, 6, 6, 12, 7, 8, 9, 6, 9)
    return " ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budget_scale", description=__doc__)
    parser.add_argument("--prompts", default="8,48,200", help="prompts per dataset")
    parser.add_argument("--budgets", default="0.05,0.1,0.2")
    parser.add_argument("--reps", type=int, default=30, help="replays per N and budget")
    parser.add_argument("--null-reps", type=int, default=30, help="null grids per N")
    parser.add_argument("--null-budget", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grid-seed", type=int, default=1)
    parser.add_argument(
        "--from-run",
        type=Path,
        help="a finished run (one model; its folder, or a runs folder holding it): the grids "
        "drawn from its cells instead "
        "(its own prompts, then new ones redrawn from them; bench/budget_synthetic.py)",
    )
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sizes = [int(n) for n in args.prompts.split(",")]
    budgets = [float(b) for b in args.budgets.split(",")]
    source = "synthetic paper grid with sparse MR"
    if args.from_run:
        run = run_folder(args.from_run)
        real = grid_from_deltas(pl.read_parquet(run / DELTAS_FILE))
        source = f"grids drawn from {run}'s cells"
    print(
        f"budget at scale: {source}, {args.reps} replays per N and budget, at most "
        f"{args.rounds} rounds, alpha {ALPHA}"
    )
    bar = "|" if args.markdown else ""
    fmt = (lambda c: "|" + "|".join(c) + "|") if args.markdown else _line
    print(fmt(HEAD))
    if args.markdown:
        print("|" + "---|" * len(HEAD))
    misses, clear = [], []
    grids = {
        n: drawn_grid(real, n, args.grid_seed)
        if args.from_run
        else synthetic_grid(n, args.grid_seed, sparse_mr=True)
        for n in sizes
    }
    for n in sizes:
        for fraction in budgets:
            try:
                rows = coverage_rows(grids[n], fraction, args.rounds, args.reps)
            except BudgetTooSmall as exc:
                print(f"N {n} at {fraction:.0%} refused: {exc}")
                continue
            for r in rows:
                print(fmt(_row(n, fraction, r)), flush=True)
                if (
                    min(r["cover"], r["cover_ds"]) < COVER
                    or max(abs(r["bias"]), r["bias_ds"]) >= BIAS
                ):
                    misses.append(f"N {n} {fraction:.0%} {r['axis']}")
                if r["clear"]:
                    clear.append(f"N {n} {fraction:.0%} {r['axis']}")
    if args.null_reps:
        print(
            f"\nnull families at {args.null_budget:.0%}, {args.null_reps} grids per N "
            "(eps = the full pooled SGS; any verdict is false)"
        )
        head: tuple[str, ...] = ("N", "axis", "above", "below", "per look", "full above")
        head += ("full below", "ds above", "ds below", "ds full above", "ds full below")
        print(
            fmt(head)
            if args.markdown
            else f"{'N':>4} {'axis':>5} {'above':>6} {'below':>6}  "
            "per look  (the full grid's own tests: above below) datasets' tests: above below "
            "(the full grid's: above below)"
        )
        if args.markdown:
            print("|" + "---|" * len(head))
        for n in sizes:
            rates = null_rates(grids[n], args.null_budget, args.rounds, args.null_reps)
            for axis, q in rates.items():
                per_look = " ".join(f"{x:.3f}" for x in q.looks)
                cells = [str(n), axis, f"{q.above:.3f}", f"{q.below:.3f}", per_look]
                rest = (q.full_above, q.full_below, q.ds_above, q.ds_below)
                cells += [f"{x:.3f}" for x in (*rest, q.ds_full_above, q.ds_full_below)]
                text = f"{n:>4} {axis:>5} {q.above:>6.3f} {q.below:>6.3f}  {per_look}"
                text += f"  ({cells[5]} {cells[6]}) {cells[7]} {cells[8]} ({cells[9]} {cells[10]})"
                print(fmt(cells) if args.markdown else text)
                if max(q.above, q.below, q.ds_above, q.ds_below) > FALSE:
                    misses.append(f"null N {n} {axis}")
                shares = [(q.above, args.null_reps), (q.below, args.null_reps)]
                shares += [(q.ds_above, q.cases), (q.ds_below, q.cases)]
                if any(stats.binom.sf(round(x * k) - 1, k, FALSE) < 0.05 for x, k in shares):
                    clear.append(f"null N {n} {axis}")
    print(bar + ("\ntargets missed: " + ", ".join(misses) if misses else "\nevery target met"))
    print(
        "beyond simulation error: " + ", ".join(clear)
        if clear
        else "every miss within simulation error"
    )
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
