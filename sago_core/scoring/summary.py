"""Dataset and pooled SGS with t-tests at eps = 0.01, 0.05 (main) and 0.10, plus intervals,
corrected p-values and a power note.

SGS per dataset = mean of per-prompt scores; pooled = equal-weight mean of dataset SGS. The
pooled t-test runs over all of a model's per-prompt scores (with equal N per dataset this
agrees with the equal-weight mean). ``t_stat`` is the statistic at the main eps, 0.05.

Beyond the paper: ``ci_low``/``ci_high`` are 95% bootstrap intervals resampling prompts
(stratified by dataset for the pooled row, seeded by the row's identity); ``p_holm`` and
``p_bh`` adjust ``p_eps_0_05`` over the family of all rows in the summary (Holm,
Benjamini-Hochberg); ``mde`` is the smallest excess over eps (in SGS units: standardised
effect x the scores' standard deviation) the test detects with 80% power at this N.
"""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl

from sago_core.analysis.intervals import bootstrap_pooled_ci
from sago_core.analysis.multiple_testing import benjamini_hochberg, holm
from sago_core.analysis.power import minimum_detectable_effect
from sago_core.artifacts.schemas import SUMMARY, conform
from sago_core.scoring.axes import EPSILONS, MAIN_EPSILON, POOLED
from sago_core.scoring.significance import one_sided_t_test


def _seed(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def _row(model: str, dataset: str, axis: str, groups: list[np.ndarray]) -> dict:
    values = np.concatenate(groups) if groups else np.array([])
    means = [float(g.mean()) for g in groups if len(g)]
    sgs = float(np.mean(means)) if means else None
    row: dict = {"model": model, "dataset": dataset, "axis": axis, "sgs": sgs, "n": len(values)}
    row["missing_reason"] = None if len(values) else "no per-prompt scores on this axis"
    for eps in EPSILONS:
        test = one_sided_t_test(values, eps)
        row[f"p_eps_{eps:.2f}".replace(".", "_")] = test.p_value
        if eps == MAIN_EPSILON:
            row["t_stat"] = test.t_stat
    row["ci_low"], row["ci_high"] = bootstrap_pooled_ci(groups, _seed(model, dataset, axis))
    effect = minimum_detectable_effect(len(values))
    row["mde"] = effect * float(values.std(ddof=1)) if effect is not None else None
    return row


def summarize(scores: pl.DataFrame) -> pl.DataFrame:
    rows = []
    valid = scores.filter(pl.col("s").is_not_null())
    for (model, axis), frame in scores.group_by(["model", "axis"], maintain_order=True):
        have = valid.filter((pl.col("model") == model) & (pl.col("axis") == axis))
        groups = []
        for dataset in sorted(frame["dataset"].unique().to_list()):
            values = have.filter(pl.col("dataset") == dataset)["s"].to_numpy()
            rows.append(_row(str(model), dataset, str(axis), [values] if len(values) else []))
            if len(values):
                groups.append(values)
        rows.append(_row(str(model), POOLED, str(axis), groups))
    main = [r["p_eps_0_05"] for r in rows]
    for row, p_holm, p_bh in zip(rows, holm(main), benjamini_hochberg(main), strict=True):
        row["p_holm"], row["p_bh"] = p_holm, p_bh
    frame = pl.DataFrame(rows, schema_overrides=dict(SUMMARY.items()))
    return conform(frame, SUMMARY).sort(["model", "dataset", "axis"])
