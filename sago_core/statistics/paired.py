"""Paired comparison of two models (or releases) on the same prompts: is B less stable than A?

Per prompt the difference d = s_B - s_A (s is instability: above 0 means B moved more on its
variants). On those differences: a two-sided paired t-test, a Wilcoxon signed-rank test, a
percentile bootstrap interval of the mean difference (prompts resampled; a pooled row
resamples all its prompts in one stratum, not within each dataset; the resampled means'
spread rescaled by sqrt(n / (n - 1)), ``intervals.bootstrap_pooled_ci``), and an equivalence
test, two one-sided t-tests (TOST) of H0: |E[d]| >= margin. A row's mean difference and its
interval are those of the mean over every prompt's difference, the mean the tests test and
the verdict reads (a pooled row's bootstrap resamples all its prompts together, as the
t-test treats them as one sample). Beside it, labelled, a pooled row keeps the equal-weight
mean over datasets (``mean_diff_datasets``, the difference of pooled SGS; with the same N
per dataset the two agree). The interval is drawn only from at least
``intervals.MIN_PROMPTS`` differences (else null, ``ci_missing_reason`` says why).

Degenerate samples are decided explicitly, as ``scoring.significance`` does: with fewer than
two differences there is no test (None); when every difference is the same value c (two
identical runs, an axis that is 0 on every prompt of both) the mean is known exactly, so
p_paired_t is 0 when c != 0 and 1 when c == 0, p_tost is 0 when |c| < margin and 1
otherwise, and p_wilcoxon is 1 when c == 0 (no signed difference at all).

The verdict reads the family-corrected p-values (Holm), so a table of many axes and
datasets does not find regressions by chance: ``equivalent`` when the equivalence test
rejects (B is as stable as A within the margin, even if a difference smaller than the
margin is detectable), else ``b_worse`` / ``b_better`` when the paired t-test rejects, with
the sign of the mean difference, else ``inconclusive``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sago_core.statistics.intervals import bootstrap_mean_ci, interval_refusal
from sago_core.vocabulary import Z95

ALPHA = 0.05
DEFAULT_MARGIN = 0.02  # in SGS units (s is a normalised RMS)
VERDICTS = ("equivalent", "b_worse", "b_better", "inconclusive")


@dataclass(frozen=True)
class PairedTest:
    n: int
    mean_diff: float | None  # over all prompts: what the tests test
    mean_diff_datasets: float | None  # equal weight per dataset, as pooled SGS
    p_paired_t: float | None
    p_wilcoxon: float | None
    ci_low: float | None  # of mean_diff
    ci_high: float | None
    p_tost: float | None
    ci_missing_reason: str | None = None


def _finite(p: float) -> float | None:
    return None if np.isnan(p) else float(p)


def paired_t_p(diffs: np.ndarray, shared: float = 0.0) -> float | None:
    """Two-sided p of H0: E[d] = 0; ``shared``: variance of the mean difference that every
    prompt shares (two budgeted runs' fitted priors), added to the prompts' own."""
    if diffs.size < 2:
        return None
    if np.all(diffs == diffs[0]) and shared <= 0:
        return 1.0 if diffs[0] == 0 else 0.0
    from scipy import stats  # lazy: imported only when a test is run

    t = float(diffs.mean()) / _standard_error(diffs, shared)
    return _finite(float(2 * stats.t.sf(abs(t), diffs.size - 1)))


def _standard_error(diffs: np.ndarray, shared: float) -> float:
    return float(np.sqrt(float(diffs.var(ddof=1)) / diffs.size + shared))


def wilcoxon_p(diffs: np.ndarray) -> float | None:
    """Two-sided Wilcoxon signed-rank p (scipy's defaults: zero differences dropped)."""
    if diffs.size < 2:
        return None
    if np.all(diffs == 0):
        return 1.0
    from scipy import stats

    return _finite(float(stats.wilcoxon(diffs).pvalue))


def tost_p(diffs: np.ndarray, margin: float, shared: float = 0.0) -> float | None:
    """p of H0: |E[d]| >= margin, the larger of the two one-sided t-tests' p-values."""
    if diffs.size < 2:
        return None
    if np.all(diffs == diffs[0]) and shared <= 0:
        return 0.0 if abs(float(diffs[0])) < margin else 1.0
    from scipy import stats

    df = diffs.size - 1
    se = _standard_error(diffs, shared)
    mean = float(diffs.mean())
    above_lower = float(stats.t.sf((mean + margin) / se, df))  # H0: E[d] <= -margin
    below_upper = float(stats.t.cdf((mean - margin) / se, df))  # H0: E[d] >= margin
    return _finite(max(above_lower, below_upper))


def paired_test(
    groups: Sequence[np.ndarray],
    margin: float,
    seed: int,
    shared: Sequence[float] | None = None,
) -> PairedTest:
    """The tests on per-prompt differences, one array per dataset (one array: one dataset).
    Non-finite differences (a missing measurement on either side) are left out.
    ``shared``: per dataset, the variance of its mean difference that its prompts share
    (budgeted runs of different samples): the t-tests and the interval carry it, each
    dataset weighted by its share of the prompts; the Wilcoxon test cannot and does not."""
    arrays = [np.asarray(g, dtype=np.float64) for g in groups]
    kept = [np.isfinite(a) for a in arrays]
    extra = 0.0
    total = sum(int(k.sum()) for k in kept)
    if shared is not None and total:
        extra = sum(float(k.sum()) ** 2 * v for k, v in zip(kept, shared, strict=True)) / total**2
    arrays = [a[k] for a, k in zip(arrays, kept, strict=True)]
    arrays = [a for a in arrays if a.size]
    diffs = np.concatenate(arrays) if arrays else np.array([], dtype=np.float64)
    by_dataset = float(np.mean([a.mean() for a in arrays])) if arrays else None
    low, high = bootstrap_mean_ci(diffs, seed)
    if extra > 0 and low is not None and high is not None:
        # each side of the prompts' interval widened as a normal one would be: z^2 extra
        centre, z2 = float(diffs.mean()), Z95**2 * extra
        low = centre - float(np.sqrt((centre - low) ** 2 + z2))
        high = centre + float(np.sqrt((high - centre) ** 2 + z2))
    return PairedTest(
        n=int(diffs.size),
        mean_diff=float(diffs.mean()) if diffs.size else None,
        mean_diff_datasets=by_dataset,
        p_paired_t=paired_t_p(diffs, extra),
        p_wilcoxon=wilcoxon_p(diffs),
        ci_low=low,
        ci_high=high,
        p_tost=tost_p(diffs, margin, extra),
        ci_missing_reason=interval_refusal(int(diffs.size)),
    )


def verdict(
    mean_diff: float | None,
    p_difference: float | None,
    p_equivalence: float | None,
    alpha: float = ALPHA,
) -> str | None:
    """One of VERDICTS from (corrected) p-values at level ``alpha``; None when there is no
    test at all. ``mean_diff``: the mean the tests tested (over all prompts), so the sign of
    a difference verdict always agrees with its test."""
    if p_difference is None and p_equivalence is None:
        return None
    if p_equivalence is not None and p_equivalence < alpha:
        return "equivalent"
    if p_difference is not None and p_difference < alpha and mean_diff:
        return "b_worse" if mean_diff > 0 else "b_better"
    return "inconclusive"
