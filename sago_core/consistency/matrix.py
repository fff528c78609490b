"""Partial correlations between OOD datasets across checkpoints, and sign agreement.

For each family and metric and each pair of OOD datasets (a, b): the partial correlation,
across the family's checkpoints, of the metric on a and on b, controlling for the metric on
the in-distribution dataset (``sago_core.statistics.partial_correlation``: regress both on ID,
correlate the residuals; t-test with n - 3 df). Checkpoints missing any of the three values
are left out and ``n`` says how many remain; fewer than 4, or a constant score, gives a null r
with the reason.

Sign agreement: for two families, the share of (metric, pair) cells where both have a
non-zero r and the signs match. It answers "do families agree on which OOD sets move
together?".
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import PARTIAL_CORRELATIONS, SIGN_AGREEMENT, conform
from sago_core.statistics.partial_correlation import partial_correlation


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


def _reason(x: np.ndarray, y: np.ndarray, z: np.ndarray, n: int) -> str:
    if n < 4:
        return f"{n} checkpoints with all three scores; at least 4 are needed"
    for name, values in (("first OOD", x), ("second OOD", y), ("ID", z)):
        if np.ptp(values) == 0:
            return f"the {name} score is the same for every checkpoint"
    return "the residuals after controlling for ID are constant"


def partial_correlation_table(
    scores: pl.DataFrame, in_distribution: str, out_of_distribution: list[str]
) -> pl.DataFrame:
    rows = []
    datasets = [in_distribution, *out_of_distribution]
    for (family, metric), frame in scores.group_by(["family", "metric"], maintain_order=True):
        matrix = _aligned(frame.select("position", "dataset", "value"), datasets)
        for a, b in combinations(range(1, len(datasets)), 2):
            x, y, z = matrix[:, a], matrix[:, b], matrix[:, 0]
            keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
            result = partial_correlation(x[keep], y[keep], z[keep])
            rows.append(
                {
                    "family": family,
                    "metric": metric,
                    "ood_a": datasets[a],
                    "ood_b": datasets[b],
                    "r": result.r,
                    "p_value": result.p_value,
                    "n": result.n,
                    "missing_reason": None
                    if result.r is not None
                    else _reason(x[keep], y[keep], z[keep], result.n),
                }
            )
    frame = pl.DataFrame(rows, schema=PARTIAL_CORRELATIONS)
    return conform(frame, PARTIAL_CORRELATIONS).sort(["metric", "family", "ood_a", "ood_b"])


def sign_agreement(table: pl.DataFrame) -> pl.DataFrame:
    rows = []
    families = sorted(table["family"].unique().to_list())
    for metric in sorted(table["metric"].unique().to_list()):
        for fa, fb in combinations(families, 2):
            left = table.filter((pl.col("metric") == metric) & (pl.col("family") == fa))
            right = table.filter((pl.col("metric") == metric) & (pl.col("family") == fb))
            both = left.join(right, on=["ood_a", "ood_b"], suffix="_b").filter(
                pl.col("r").is_not_null()
                & pl.col("r_b").is_not_null()
                & (pl.col("r") != 0)
                & (pl.col("r_b") != 0)
            )
            agreeing = int((both["r"].sign() == both["r_b"].sign()).sum())
            rows.append(
                {
                    "metric": metric,
                    "family_a": fa,
                    "family_b": fb,
                    "pairs_compared": both.height,
                    "agreeing": agreeing,
                    "share": agreeing / both.height if both.height else None,
                }
            )
    frame = pl.DataFrame(rows, schema=SIGN_AGREEMENT)
    return conform(frame, SIGN_AGREEMENT)
