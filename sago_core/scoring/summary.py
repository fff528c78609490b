"""Dataset and pooled SGS with t-tests at eps = 0.01, 0.05 (main) and 0.10.

SGS per dataset = mean of per-prompt scores; pooled = equal-weight mean of dataset SGS. The
pooled t-test runs over all of a model's per-prompt scores (with equal N per dataset this
agrees with the equal-weight mean). ``t_stat`` is the statistic at the main eps, 0.05.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import SUMMARY, conform
from sago_core.scoring.axes import EPSILONS, MAIN_EPSILON, POOLED
from sago_core.scoring.significance import one_sided_t_test


def _row(model: str, dataset: str, axis: str, sgs: float | None, values: np.ndarray) -> dict:
    row: dict = {"model": model, "dataset": dataset, "axis": axis, "sgs": sgs, "n": len(values)}
    row["missing_reason"] = None if len(values) else "no per-prompt scores on this axis"
    for eps in EPSILONS:
        test = one_sided_t_test(values, eps)
        row[f"p_eps_{eps:.2f}".replace(".", "_")] = test.p_value
        if eps == MAIN_EPSILON:
            row["t_stat"] = test.t_stat
    return row


def summarize(scores: pl.DataFrame) -> pl.DataFrame:
    rows = []
    valid = scores.filter(pl.col("s").is_not_null())
    for (model, axis), frame in scores.group_by(["model", "axis"], maintain_order=True):
        have = valid.filter((pl.col("model") == model) & (pl.col("axis") == axis))
        dataset_sgs = []
        for dataset in sorted(frame["dataset"].unique().to_list()):
            values = have.filter(pl.col("dataset") == dataset)["s"].to_numpy()
            sgs = float(values.mean()) if len(values) else None
            if sgs is not None:
                dataset_sgs.append(sgs)
            rows.append(_row(str(model), dataset, str(axis), sgs, values))
        pooled = float(np.mean(dataset_sgs)) if dataset_sgs else None
        rows.append(_row(str(model), POOLED, str(axis), pooled, have["s"].to_numpy()))
    frame = pl.DataFrame(rows, schema_overrides={k: v for k, v in SUMMARY.items()})
    return conform(frame, SUMMARY).sort(["model", "dataset", "axis"])
