"""The last release as a control variate: a budgeted run's per-prompt scores estimated with
the help of a finished full run of the same grid (the baseline), whose every cell is known.

A release and the one before it answer the same cells alike, so the design's error on the
new release's sampled cells is largely the error the same estimator makes on the baseline's
values of those cells, which is known: the baseline's full-grid root s_old_i is in hand.
The difference estimator (prediction-powered inference's power-tuned form, Angelopoulos et
al. 2023, "PPI++") is, per sampled prompt i,

    s^_i = s^new_i - lambda (s^old_i - s_old_i),

s^new_i and s^old_i the same estimator (estimate.py) on the new and the baseline's values
of the cells the new run asked. It is unbiased as s^new is, for any fixed lambda (the
baseline's term has mean 0 up to the estimator's own bias, which then cancels in part). Its
design variance, through the root's first-order term z = d^2 / (2 s), is the new release's
times R = (V_new - 2 lambda C + lambda^2 V_old) / V_new, V and C the within-(prompt,
stratum) variances and covariance of z on the cells both measured, pooled over a dataset's
prompts (the strata are sampled without replacement within a prompt, so one pooled ratio
scales the stratified variance). lambda = C / V_old minimises R (1 - rho^2 there), clipped
to [0, 1]; a dataset with fewer than ``MIN_DF`` degrees of freedom takes the axis' lambda,
and a dataset where that lambda would not lower R takes 0. lambda = 0 is the plain design
estimator exactly, so a baseline that does not track the new release costs nothing but the
noise of a lambda estimated near 0. Each root's variance is Var(new) + lambda^2 Var(old) -
2 lambda r sqrt(Var(new) Var(old)), each side's own posterior variance and r the dataset's
correlation of z. Scaling the new side's variance by R alone left the estimates' spread 1.8
and 1.4 times their standard error on Act and Ent (20% of the synthetic grid, a baseline
whose other cells came from another grid, so some prompts' baselines are the noisier side);
this formula 1.5 and 1.2 there, 0.8-1.0 on the other axes.
The fitted prior's error is scaled by R. The rest (the dataset's interval, the stopping
rule's tests) reads the adjusted scores as it reads the plain ones.

That narrows the within-prompt error only, while the baseline knows every prompt, the ones
a budget leaves out included. Over its prompts (``_across_prompts``) a dataset's SGS is the
baseline's, known, plus the mean difference of the two releases' plain roots on the same
cells: the roots' Jensen gap, alike on both sides, cancels with no correction to trust, and
the variance is the differences' observed spread over n (the ultimate cluster: cells and
prompts in one spread). An axis takes it where its variance is below the design's without
a baseline. On the real pair at 5% (4 of 8 prompts per dataset) the control variate above
alone covered 0.805 on MR and agreed with the full grid's Act verdict in 0.71 of 200
replays; with this estimate, 0.945 and 1.00 (docs/guide/budget-validation.md). An earlier
version over the prompts used the empirical-Bayes roots and their stated variances and
covered 0.905-0.94 on the synthetic grid: a shrunk root's spread understates its error.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import BUDGET_FILE, DELTAS_FILE
from sago_core.artifacts.store import read_parquet
from sago_core.budget.design import Layout
from sago_core.budget.estimate import (
    Estimate,
    PromptEstimates,
    dataset_estimates,
    estimate_prompts,
    full_scores,
    pooled_estimate,
)
from sago_core.budget.run_cells import CELL_ID, RunCells, cell_values

# Degrees of freedom (cells less one per (prompt, stratum)) a dataset needs for its own
# lambda; below, the axis' pooled lambda (a covariance from a few cells is noise).
MIN_DF = 30


@dataclass(frozen=True)
class Control:
    """One axis' control variate: per dataset lambda, the variance ratio R and the cells'
    correlation; ``rho`` the correlation over every dataset (NaN: not measured)."""

    lam: np.ndarray
    ratio: np.ndarray
    corr: np.ndarray
    rho: float
    paired: np.ndarray  # per dataset, R at lambda = 1 (the difference's)


def measured_control(
    layout: Layout,
    values: np.ndarray,
    baseline: np.ndarray,
    asked: np.ndarray,
    roots: tuple[np.ndarray, np.ndarray],
) -> Control:
    """lambda, R and rho from the cells both releases measured (module docstring);
    ``roots``: each release's plain per-prompt root sqrt(MS^) on these cells."""
    code = layout.prompt_code
    z = [
        np.where(np.isfinite(v) & asked, v, np.nan) ** 2 / (2 * np.where(r > 0, r, np.nan)[code])
        for v, r in zip((values, baseline), roots, strict=True)
    ]
    both = np.isfinite(z[0]) & np.isfinite(z[1])
    at = (code, layout.stratum)
    sums = np.zeros((6, *layout.sizes.shape))
    for k, term in enumerate((both, z[0], z[1], z[0] * z[0], z[1] * z[1], z[0] * z[1])):
        np.add.at(sums[k], at, np.where(both, term, 0.0))
    count, new, old = sums[0], sums[1], sums[2]
    with np.errstate(invalid="ignore", divide="ignore"):
        keep = count >= 2
        centred = [
            np.where(keep, sums[k] - a * b / count, 0.0)
            for k, (a, b) in zip((3, 4, 5), ((new, new), (old, old), (new, old)), strict=True)
        ]
    dof = np.where(keep, count - 1, 0.0)
    per_dataset = np.array(
        [
            [float(m[:, layout.stratum_dataset == j].sum()) for m in (*centred, dof)]
            for j in range(len(layout.datasets))
        ]
    )  # datasets x (V_new, V_old, C, dof), as sums of squares
    v_new, v_old, cov, _ = per_dataset.sum(axis=0)
    lam_axis = float(np.clip(cov / v_old, 0.0, 1.0)) if v_old > 0 else 0.0
    lam, ratio = np.zeros(len(per_dataset)), np.ones(len(per_dataset))
    for j, (vn, vo, c, df) in enumerate(per_dataset):
        mine = float(np.clip(c / vo, 0.0, 1.0)) if df >= MIN_DF and vo > 0 else lam_axis
        r = (vn - 2 * mine * c + mine**2 * vo) / vn if vn > 0 else 1.0
        if r < 1.0:
            lam[j], ratio[j] = mine, r
    v_n, v_o, c_no = per_dataset[:, 0], per_dataset[:, 1], per_dataset[:, 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where((v_n > 0) & (v_o > 0), c_no / np.sqrt(v_n * v_o), 0.0)
    rho = float(cov / np.sqrt(v_new * v_old)) if v_new > 0 and v_old > 0 else float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        paired = np.where(v_n > 0, (v_n - 2 * c_no + v_o) / v_n, 1.0)
    return Control(lam, ratio, corr, rho, paired)


def baseline_estimates(
    layout: Layout,
    values: np.ndarray,
    baseline: np.ndarray,
    sampled_prompts: np.ndarray,
    correct: bool = True,
    asked: np.ndarray | None = None,
    continuous: bool = False,
) -> tuple[PromptEstimates, list[Estimate | None], Estimate | None]:
    """``estimate.axis_estimates`` by the difference estimator (module docstring):
    ``baseline`` holds the baseline's deltas of every grid cell."""
    asked = np.isfinite(values) if asked is None else asked
    plain, old = (
        estimate_prompts(layout, v, correct, asked, continuous)
        for v in (values, np.where(asked, baseline, np.nan))
    )
    control = measured_control(layout, values, baseline, asked, (plain.root, old.root))
    full = full_scores(layout, baseline)
    lam, corr = control.lam[layout.prompt_dataset], control.corr[layout.prompt_dataset]
    # a prompt the baseline did not measure keeps the design's own estimate
    held = np.isfinite(old.s - full) & np.isfinite(plain.s)

    def variance(new: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Var(new - lambda old): each side's own variance, their correlation the cells'."""
        both = new + lam**2 * base - 2 * lam * corr * np.sqrt(new * base)
        return np.where(held, np.maximum(both, 0.0), new)

    ms = np.where(held, plain.ms - lam * (old.ms - full**2), plain.ms)
    prompts = PromptEstimates(
        ms=ms,
        ms_var=variance(plain.ms_var, old.ms_var),
        root=np.sqrt(np.maximum(ms, 0.0)),
        s=np.where(held, plain.s - lam * (old.s - full), plain.s),
        s_var=variance(plain.s_var, old.s_var),
        prior_var=plain.prior_var * control.ratio,
        shrunk=plain.shrunk,
    )
    per_dataset = dataset_estimates(layout, prompts, sampled_prompts)
    across = _across_prompts(layout, plain.root - old.root, full)
    alone = dataset_estimates(layout, plain, sampled_prompts)
    if across is not None and _total(across[0]) < _total(alone):
        prompts = replace(prompts, datasets=tuple(across[0]), tests=across[1])
        per_dataset = across[0]
    return prompts, per_dataset, pooled_estimate(per_dataset)


def _total(estimates: list[Estimate | None]) -> float:
    return sum(e.variance for e in estimates if e is not None)


def _across_prompts(
    layout: Layout, diff: np.ndarray, full: np.ndarray
) -> tuple[list[Estimate | None], dict[int | None, tuple[float, float, float]]] | None:
    """The difference estimator over prompts: a dataset's SGS is the baseline's, known on
    every prompt, plus the mean over the sampled prompts of ``diff`` (the plain roots' of
    the two releases on the same cells, so the roots' Jensen gap, alike on both sides,
    cancels), its variance the spread of ``diff`` over n (the ultimate cluster: the cells'
    error and the prompts' sampling in one observed spread, no stated variance trusted).
    With the tests' (mean, variance, degrees of freedom): the prompts' spread of the new
    release over every prompt (the full run's t-test, which sees them all) plus that
    error; pooled, every prompt in one sample, as the full run's test pools them. None
    where a dataset holds fewer than two sampled prompts."""
    known = np.isfinite(full)
    sampled = np.isfinite(diff) & known
    estimates: list[Estimate | None] = []
    tests: dict[int | None, tuple[float, float, float]] = {}
    levels = [(j, layout.prompt_dataset == j) for j in range(len(layout.datasets))]
    for j, mine in [*levels, (None, np.ones(len(full), dtype=bool))]:
        every, seen = mine & known, mine & sampled
        n = int(seen.sum())
        if n < 2:
            if j is None or every.any():
                return None
            estimates.append(None)
            continue
        d, base = diff[seen], full[seen]
        error = float(np.var(d, ddof=1)) / n
        spread = float(np.var(full[every], ddof=1) + np.var(d, ddof=1))
        spread += 2 * float(np.cov(base, d)[0, 1])
        if j is None:  # the pooled error: each dataset's, weighted by its prompts
            shares = [(m & known).sum() / known.sum() for _, m in levels]
            error = sum(w**2 * e.variance for w, e in zip(shares, estimates, strict=True) if e)
            value = float(sum(w * e.value for w, e in zip(shares, estimates, strict=True) if e))
        else:
            value = float(full[every].mean() + d.mean())
            estimates.append(Estimate(value, error, n, n - 1))
        tests[j] = (value, max(spread, 0.0) / int(every.sum()) + error, n - 1)
    return estimates, tests


def correlation(
    layout: Layout, values: np.ndarray, baseline: np.ndarray, asked: np.ndarray
) -> Control:
    """The control a run's final cells measured (what budget.json records)."""
    new, old = (
        estimate_prompts(layout, np.where(asked, v, np.nan), False, asked).root
        for v in (values, baseline)
    )
    return measured_control(layout, values, baseline, asked, (new, old))


def read_baseline(
    run: Path, config: dict[str, Any], cells: RunCells, columns: list[tuple[str, str]]
) -> np.ndarray:
    """The baseline's deltas of every cell of this run's grid (cells x (model, axis)
    ``columns``: its one model's value under every model of this run), after ``check_baseline``
    and refusing a run that lacks some of this grid's cells."""
    from sago_core.errors import ConfigError

    check_baseline(run, config)
    where = f"budget.baseline {run}"
    deltas = read_parquet(run / DELTAS_FILE)
    absent = cells.frame().join(deltas.select(CELL_ID).unique(), on=CELL_ID, how="anti")
    if absent.height:
        first = "/".join(absent.row(0))
        raise ConfigError(f"{where}: {absent.height} of this run's cells not in it ({first}, ...)")
    every = np.ones(len(cells.ids), dtype=bool)
    return np.column_stack(
        [
            cell_values(deltas.with_columns(model=pl.lit(m)), cells, [(m, a)], every)[:, 0]
            for m, a in columns
        ]
    )


def check_baseline(run: Path, config: dict[str, Any]) -> None:
    """Refuse, in one line naming what differs, a run that is not a finished full run of
    one model over the same design (``config``: this run's, as run_config.json holds it).
    Reads the deltas' model column only: the watch checks every candidate with it."""
    from sago_core.config.saved import config_differences, read_run_config, sampling_differences
    from sago_core.errors import ConfigError

    where = f"budget.baseline {run}"
    if (run / BUDGET_FILE).is_file():
        raise ConfigError(f"{where}: a budgeted run; the baseline must be a full run")
    if not (run / DELTAS_FILE).is_file():
        raise ConfigError(f"{where}: no {DELTAS_FILE} (not a finished run)")
    saved = read_run_config(run)
    differ = [*sampling_differences(saved, config), *config_differences(saved, config)]
    if differ:
        named = "; ".join(d.describe() for d in differ)
        raise ConfigError(f"{where}: not this run's design: {named}")
    models = read_parquet(run / DELTAS_FILE, columns=["model"])["model"].unique().to_list()
    if len(models) != 1:
        raise ConfigError(f"{where}: holds models {sorted(models)}; name a run of one model")
