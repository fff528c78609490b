"""Dataset and pooled SGS with t-tests at eps = 0.01, 0.05 (main) and 0.10, plus intervals,
corrected p-values and a power note.

SGS per dataset = mean of per-prompt scores; pooled = equal-weight mean of dataset SGS. The
pooled t-test runs over all of a model's per-prompt scores (with equal N per dataset this
agrees with the equal-weight mean). ``t_stat`` is the statistic at the main eps, 0.05.

Beyond the paper: ``ci_low``/``ci_high`` are 95% bootstrap intervals resampling prompts
(stratified by dataset for the pooled row, each dataset's spread corrected for its size,
seeded by the row's identity), drawn only from at least ``intervals.MIN_PROMPTS`` prompts
with a score and, for the pooled row, at least ``intervals.MIN_PER_STRATUM`` in every pooled
dataset (else null, with ``ci_missing_reason``; ``intervals.pooled_refusal``); ``p_holm``
and ``p_bh`` adjust ``p_reference`` over the family of all rows in the summary (Holm,
Benjamini-Hochberg); ``mde`` is the smallest excess over eps (in SGS units: standardised
effect x the scores' standard deviation) the test detects with 80% power at this N.

Noise floor: ``floor`` is the mean per-prompt replay |delta_norm| (equal-weight over datasets
when pooled) and ``p_floor`` a one-sided paired t-test of s - floor > 0 over the prompts that
have both. ``test_against`` picks which of p_eps_0_05 and p_floor is ``p_reference``, the
p-value the Holm/BH corrections adjust; the report's significance marks read ``p_holm``.

A budgeted run's p-values are its stopping rule's (``with_budget_verdicts``).

Only finite numbers enter: a non-finite s or floor (deltas.py already makes non-finite
measurements missing) is left out like a null one, and a row without a p-value (too few
prompts, no floor) keeps a null p_holm/p_bh and is not part of the correction family.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from sago_core.artifacts.rows import from_rows
from sago_core.artifacts.schemas import SUMMARY
from sago_core.scoring.significance import one_sided_t_test
from sago_core.statistics.intervals import bootstrap_pooled_ci, pooled_refusal, stable_seed
from sago_core.statistics.multiple_testing import benjamini_hochberg, holm
from sago_core.statistics.power import minimum_detectable_effect
from sago_core.vocabulary import EPSILONS, MAIN_EPSILON, POOLED

REFERENCES = {"eps": "eps 0.05", "floor": "noise floor"}


def _floor_stats(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float | None, float | None]:
    """Mean floor (equal weight per dataset) and the paired test of s over its floor."""
    means, diffs = [], []
    for s, floor in pairs:
        have = np.isfinite(floor) & np.isfinite(s)
        if have.any():
            means.append(float(floor[have].mean()))
            diffs.append(s[have] - floor[have])
    if not means:
        return None, None
    return float(np.mean(means)), one_sided_t_test(np.concatenate(diffs), 0.0).p_value


def _row(model: str, dataset: str, axis: str, groups: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    values = np.concatenate([s for s, _ in groups]) if groups else np.array([])
    means = [float(s.mean()) for s, _ in groups if len(s)]
    sgs = float(np.mean(means)) if means else None
    row: dict = {"model": model, "dataset": dataset, "axis": axis, "sgs": sgs, "n": len(values)}
    row["missing_reason"] = None if len(values) else "no per-prompt scores on this axis"
    for eps in EPSILONS:
        test = one_sided_t_test(values, eps)
        row[f"p_eps_{eps:.2f}".replace(".", "_")] = test.p_value
        if eps == MAIN_EPSILON:
            row["t_stat"] = test.t_stat
    row["ci_low"], row["ci_high"] = bootstrap_pooled_ci(
        [s for s, _ in groups], stable_seed(model, dataset, axis)
    )
    row["ci_missing_reason"] = pooled_refusal([len(s) for s, _ in groups])
    row["floor"], row["p_floor"] = _floor_stats(groups)
    effect = minimum_detectable_effect(len(values))
    mde = effect * float(values.std(ddof=1)) if effect is not None else None
    row["mde"] = mde if mde is not None and np.isfinite(mde) else None
    return row


def _scores_and_floors(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    if "floor" not in frame.columns:  # scores written before the noise floor existed
        return frame["s"].to_numpy(), np.full(len(frame), np.nan)
    floors = frame["floor"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    return frame["s"].to_numpy(), floors


def summarize(scores: pl.DataFrame, test_against: str = "eps") -> pl.DataFrame:
    rows = []
    valid = scores.filter(pl.col("s").is_not_null() & pl.col("s").is_finite())
    for (model, axis), frame in scores.group_by(["model", "axis"], maintain_order=True):
        have = valid.filter((pl.col("model") == model) & (pl.col("axis") == axis))
        groups = []
        for dataset in sorted(frame["dataset"].unique().to_list()):
            pair = _scores_and_floors(have.filter(pl.col("dataset") == dataset))
            rows.append(_row(str(model), dataset, str(axis), [pair] if len(pair[0]) else []))
            if len(pair[0]):
                groups.append(pair)
        rows.append(_row(str(model), POOLED, str(axis), groups))
    chosen = "p_floor" if test_against == "floor" else "p_eps_0_05"
    for row in rows:
        row["reference"], row["p_reference"] = REFERENCES[test_against], row[chosen]
    main = [r["p_reference"] for r in rows]
    for row, p_holm, p_bh in zip(rows, holm(main), benjamini_hochberg(main), strict=True):
        row["p_holm"], row["p_bh"] = p_holm, p_bh
    return from_rows(rows, SUMMARY).sort(["model", "dataset", "axis"])


def with_budget_verdicts(
    summary: pl.DataFrame, tests: list[dict], estimates: pl.DataFrame | None = None
) -> pl.DataFrame:
    """A budgeted run's summary: each row's p-values at the tested eps are the stopping
    rule's (budget.json ``tests``: sequential.Verdict's p_above, below alpha exactly when
    the rule said "above"), not a fixed-alpha t-test over the design's roots, which would
    leave out their posterior variance and the looks already taken. Where the reference is
    eps 0.05, ``p_reference``, ``p_holm`` and ``p_bh`` are that same p-value: the rule
    controls each test's error over its looks, pooled and per dataset, and the marks show
    its verdicts, with no second correction over the rows. A test the rule did not run
    (too few prompts) leaves the row's p-values null. The noise-floor reference is not a
    test of the rule and keeps the summary's own p-values. ``estimates``
    (budget_estimates.parquet): each row's SGS and interval are the design's estimate of
    the full grid's, the ones the rule tested (with a baseline, not always the mean of the
    prompts' scores: budget/baseline.py), not a bootstrap over the sampled prompts."""
    rule = {(t["model"], t["dataset"], t["axis"], round(t["eps"], 6)): t for t in tests}
    design = {
        (r["model"], r["dataset"], r["axis"]): r
        for r in (estimates.iter_rows(named=True) if estimates is not None else [])
    }
    rows = summary.to_dicts()
    for row in rows:
        key = (row["model"], row["dataset"], row["axis"])
        if key in design:
            found = design[key]
            row["sgs"], half = found["sgs"], found["half_width"]
            row["ci_low"], row["ci_high"] = row["sgs"] - half, row["sgs"] + half
            row["ci_missing_reason"] = None
        for eps in EPSILONS:
            test = rule.get((*key, round(eps, 6)))
            row[f"p_eps_{eps:.2f}".replace(".", "_")] = test["p_above"] if test else None
        if row["reference"] == REFERENCES["eps"]:
            row["p_reference"] = row["p_eps_0_05"]
            row["p_holm"] = row["p_bh"] = row["p_reference"]
    return from_rows(rows, SUMMARY).sort(["model", "dataset", "axis"])
