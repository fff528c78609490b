"""Partial correlations between OOD datasets across checkpoints, and sign agreement.

For each series, metric and ID adjustment (``method``: linear and spline, both always) and
each pair of OOD datasets (a, b): the partial correlation, across the series' checkpoints,
of the metric on a and on b, controlling for the metric on the in-distribution dataset
(``sago_core.statistics.partial_correlation``; the spline's knots chosen by the number of
checkpoints unless ``knots`` fixes them), with its t-test p (the adjustment's own df)
and its block-permutation p in checkpoint order. Checkpoints missing any of the three values
are left out and ``n`` says how many remain; too few for the adjustment or the permutation
test, or a constant score, gives NA with the reason.

Holm and BH correct the chosen p (``corrected_test``: the permutation p by default) over all
pairs of one series, metric and method; ``significant`` is Holm's p <= alpha.

Sign agreement, per metric and method, for two series: over all pairs where both r are
non-zero, and separately over the pairs significant in both after correction.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import PARTIAL_CORRELATIONS, SIGN_AGREEMENT, conform
from sago_core.statistics.intervals import stable_seed
from sago_core.statistics.multiple_testing import benjamini_hochberg, holm
from sago_core.statistics.partial_correlation import (
    ADJUSTMENTS,
    Adjustment,
    block_permutation_p,
    partial_correlation,
)


def _aligned(frame: pl.DataFrame, datasets: list[str]) -> np.ndarray:
    """Rows = checkpoints (by position), columns = datasets; NaN where missing."""
    wide = frame.pivot(on="dataset", index="position", values="value").sort("position")
    columns = [
        wide[d].cast(pl.Float64).fill_null(np.nan).to_numpy()
        if d in wide.columns
        else np.full(wide.height, np.nan)
        for d in datasets
    ]
    return np.column_stack(columns) if columns else np.empty((0, 0))


def _cell(
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    method: Adjustment,
    knots: int | None,
    block_length: int,
    alpha: float,
    draws: int,
    seed: int,
    contiguous: bool,
) -> dict[str, Any]:
    """``contiguous``: the kept checkpoints are consecutive in the series (a gap inside it
    would make blocks of non-neighbours, so the permutation test is NA then)."""
    result = partial_correlation(x, y, z, method, knots)
    row: dict[str, Any] = {
        "r": result.r,
        "p_value": result.p_value,
        "df": result.df,
        "n": result.n,
        "missing_reason": result.reason,
        "p_perm": None,
        "perm_reason": result.reason,
    }
    if result.rx is not None and result.ry is not None and not contiguous:
        row["perm_reason"] = (
            "checkpoints without a score inside the series: blocks would not be neighbours"
        )
    elif result.rx is not None and result.ry is not None:
        perm = block_permutation_p(result.rx, result.ry, block_length, alpha, draws, seed)
        row["p_perm"], row["perm_reason"] = perm.p_value, perm.reason
    return row


def _corrected(rows: list[dict[str, Any]], column: str, alpha: float) -> None:
    """Holm and BH over one series/metric/method's pairs, in place."""
    pvalues = [r[column] for r in rows]
    for row, p_holm, p_bh in zip(rows, holm(pvalues), benjamini_hochberg(pvalues), strict=True):
        row["p_holm"], row["p_bh"] = p_holm, p_bh
        row["significant"] = None if p_holm is None else p_holm <= alpha


def partial_correlation_table(
    scores: pl.DataFrame,
    in_distribution: str,
    out_of_distribution: list[str],
    knots: int | None = None,
    block_length: int = 2,
    alpha: float = 0.05,
    corrected_test: str = "permutation",
    draws: int = 9999,
) -> pl.DataFrame:
    column = "p_perm" if corrected_test == "permutation" else "p_value"
    rows = []
    datasets = [in_distribution, *out_of_distribution]
    for (series, metric), frame in scores.group_by(["series", "metric"], maintain_order=True):
        matrix = _aligned(frame.select("position", "dataset", "value"), datasets)
        for method in ADJUSTMENTS:
            group = []
            for a, b in combinations(range(1, len(datasets)), 2):
                x, y, z = matrix[:, a], matrix[:, b], matrix[:, 0]
                keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
                kept = np.flatnonzero(keep)
                contiguous = kept.size == 0 or kept[-1] - kept[0] + 1 == kept.size
                seed = stable_seed(str(series), str(metric), method, datasets[a], datasets[b])
                cell = _cell(
                    x[keep],
                    y[keep],
                    z[keep],
                    method,
                    knots,
                    block_length,
                    alpha,
                    draws,
                    seed,
                    contiguous,
                )
                group.append(
                    {
                        "series": series,
                        "metric": metric,
                        "method": method,
                        "ood_a": datasets[a],
                        "ood_b": datasets[b],
                        **cell,
                    }
                )
            _corrected(group, column, alpha)
            rows.extend(group)
    frame = pl.DataFrame(rows, schema=PARTIAL_CORRELATIONS)
    return conform(frame, PARTIAL_CORRELATIONS).sort(
        ["metric", "series", "method", "ood_a", "ood_b"]
    )


def _agreement(both: pl.DataFrame) -> tuple[int, int, float | None]:
    agreeing = int((both["r"].sign() == both["r_b"].sign()).sum())
    return both.height, agreeing, agreeing / both.height if both.height else None


def sign_agreement(table: pl.DataFrame) -> pl.DataFrame:
    rows = []
    names = sorted(table["series"].unique().to_list())
    for (metric, method), frame in table.group_by(["metric", "method"], maintain_order=True):
        for sa, sb in combinations(names, 2):
            left = frame.filter(pl.col("series") == sa)
            right = frame.filter(pl.col("series") == sb)
            both = left.join(right, on=["ood_a", "ood_b"], suffix="_b").filter(
                pl.col("r").is_not_null()
                & pl.col("r_b").is_not_null()
                & (pl.col("r") != 0)
                & (pl.col("r_b") != 0)
            )
            significant = both.filter(
                pl.col("significant").fill_null(False) & pl.col("significant_b").fill_null(False)
            )
            pairs, agreeing, share = _agreement(both)
            sig_pairs, sig_agreeing, sig_share = _agreement(significant)
            rows.append(
                {
                    "metric": metric,
                    "method": method,
                    "series_a": sa,
                    "series_b": sb,
                    "dataset_pairs": pairs,
                    "agreeing": agreeing,
                    "share": share,
                    "significant_pairs": sig_pairs,
                    "significant_agreeing": sig_agreeing,
                    "significant_share": sig_share,
                }
            )
    frame = pl.DataFrame(rows, schema=SIGN_AGREEMENT)
    return conform(frame, SIGN_AGREEMENT).sort(["metric", "method", "series_a", "series_b"])


def method_disagreements(table: pl.DataFrame) -> pl.DataFrame:
    """Cells where linear and spline adjustment differ in the sign of r or in significance."""
    keys = ["series", "metric", "ood_a", "ood_b"]
    linear = table.filter(pl.col("method") == "linear").select(*keys, "r", "significant")
    spline = table.filter(pl.col("method") == "spline").select(*keys, "r", "significant")
    both = linear.join(spline, on=keys, suffix="_spline").filter(
        pl.col("r").is_not_null() & pl.col("r_spline").is_not_null()
    )
    sign = both["r"].sign() != both["r_spline"].sign()
    significance = both["significant"].fill_null(False) != both["significant_spline"].fill_null(
        False
    )
    return (
        both.with_columns(sign_differs=sign, significance_differs=significance)
        .filter(pl.col("sign_differs") | pl.col("significance_differs"))
        .rename({"r": "r_linear", "significant": "significant_linear"})
        .sort(keys)
    )
