"""One-sided one-sample t-test, H0: E[s] <= eps against H1: E[s] > eps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TTest:
    t_stat: float | None
    p_value: float | None


def one_sided_t_test(scores: np.ndarray, eps: float) -> TTest:
    """scipy's test, with the degenerate cases decided explicitly.

    n < 2: no test (None). Zero variance: the mean is known exactly, so p = 0 when it exceeds
    eps and 1 otherwise (scipy would return NaN), and t = +-inf. A non-finite score (callers
    drop them first) or a statistic that comes out NaN gives no test (None), never a NaN p.
    """
    values = np.asarray(scores, dtype=np.float64)
    if values.size < 2 or not np.isfinite(values).all():
        return TTest(None, None)
    if np.all(values == values[0]):
        above = values[0] > eps
        return TTest(float("inf") if above else float("-inf"), 0.0 if above else 1.0)
    from scipy import stats  # lazy: a fully cached rerun never pays for scipy

    result = stats.ttest_1samp(values, popmean=eps, alternative="greater")
    t_stat, p_value = float(result.statistic), float(result.pvalue)
    if np.isnan(p_value) or np.isnan(t_stat):
        return TTest(None, None)
    return TTest(t_stat, p_value)
