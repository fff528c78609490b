"""Analysis statistics, each checked against an independent computation or a known answer."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from sago_core.statistics.agreement import agreement
from sago_core.statistics.intervals import bootstrap_mean_ci, bootstrap_pooled_ci
from sago_core.statistics.multiple_testing import benjamini_hochberg, holm
from sago_core.statistics.partial_correlation import partial_correlation
from sago_core.statistics.power import minimum_detectable_effect
from sago_core.statistics.rankings import rank_agreement, rank_reversals


def test_partial_correlation_matches_the_precision_matrix_formula() -> None:
    rng = np.random.default_rng(3)
    n = 200
    z = rng.normal(size=n)
    shared = rng.normal(size=n)
    x = 2.0 * z + shared + 0.5 * rng.normal(size=n)
    y = -1.0 * z + shared + 0.5 * rng.normal(size=n)
    got = partial_correlation(x, y, z)
    precision = np.linalg.inv(np.cov(np.vstack([x, y, z])))
    independent = -precision[0, 1] / np.sqrt(precision[0, 0] * precision[1, 1])
    assert got.r == pytest.approx(independent, abs=1e-10)
    # known answer: residual correlation of two unit-variance signals plus 0.25-variance noise
    assert got.r == pytest.approx(1 / 1.25, abs=0.06)
    assert got.p_value is not None and got.p_value < 1e-10 and got.n == n


def test_partial_correlation_removes_a_shared_id_driver() -> None:
    rng = np.random.default_rng(4)
    z = rng.normal(size=300)
    x = z + 0.3 * rng.normal(size=300)
    y = z + 0.3 * rng.normal(size=300)
    assert stats.pearsonr(x, y).statistic > 0.8
    controlled = partial_correlation(x, y, z)
    assert controlled.r is not None and abs(controlled.r) < 0.15
    assert partial_correlation([1, 2, 3], [1, 2, 3], [0, 1, 0]).r is None


def test_holm_and_bh_golden() -> None:
    p = [0.01, 0.04, 0.03, None, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, None, 0.02])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, None, 0.02])
    assert holm([None]) == [None]


def test_bootstrap_interval_covers_the_mean_and_is_seeded() -> None:
    values = np.random.default_rng(0).normal(0.3, 0.1, size=40)
    low, high = bootstrap_mean_ci(values, seed=1)
    assert low is not None and high is not None and low < values.mean() < high
    assert (low, high) == bootstrap_mean_ci(values, seed=1)
    sem = values.std(ddof=1) / np.sqrt(len(values))
    assert high - low == pytest.approx(2 * 1.96 * sem, rel=0.2)
    pooled = bootstrap_pooled_ci([[0.1, 0.2, 0.3], [0.5, 0.6, 0.7, 0.5]], seed=2)
    assert pooled[0] is not None and pooled[0] < (0.2 + 0.575) / 2 < pooled[1]
    assert bootstrap_mean_ci([0.4], seed=0) == (None, None)


def test_intervals_need_five_prompts_with_a_value() -> None:
    """Two values gave the band [smaller, larger] (every resample's mean is one of three
    values); below MIN_PROMPTS finite values there is no interval, and the reason counts
    the values, not the prompts asked for."""
    from sago_core.statistics.intervals import MIN_PROMPTS, interval_refusal

    assert MIN_PROMPTS == 5
    assert bootstrap_mean_ci([0.1, 0.5], seed=0) == (None, None)
    assert bootstrap_mean_ci([0.1, 0.2, 0.3, np.nan, np.nan, np.nan], seed=0) == (None, None)
    assert bootstrap_pooled_ci([[0.1, 0.2], [0.3, 0.4]], seed=0) == (None, None)
    assert bootstrap_pooled_ci([[0.1, 0.2], [0.3, 0.4, 0.5]], seed=0)[0] is not None
    assert interval_refusal(4) == "4 prompt(s) with a value, fewer than 5: no bootstrap interval"
    assert interval_refusal(5) is None
    assert interval_refusal(1, "flip intervals").startswith("flip intervals: 1 prompt(s)")


def test_the_expanded_tail_matches_its_formula() -> None:
    from sago_core.statistics.intervals import expanded_tail

    # Hesterberg's expanded percentile: Phi(-sqrt(n / (n - 1)) t_{0.975, n - 1})
    assert expanded_tail(10) == pytest.approx(
        100 * stats.norm.cdf(-np.sqrt(10 / 9) * stats.t.ppf(0.975, 9))
    )
    assert expanded_tail(10) == pytest.approx(0.855, abs=0.001)
    assert expanded_tail(100_000) == pytest.approx(2.5, abs=0.001)  # plain percentile, large n


def test_minimum_detectable_effect_has_the_stated_power() -> None:
    d = minimum_detectable_effect(16)
    assert d is not None
    critical = stats.t.ppf(0.95, 15)
    assert stats.nct.sf(critical, 15, d * 4) == pytest.approx(0.8, abs=1e-6)
    assert minimum_detectable_effect(96) < d  # more prompts, smaller effects
    assert minimum_detectable_effect(1) is None


def test_rank_agreement_and_reversals() -> None:
    scores = {
        "a": {"m1": 0.1, "m2": 0.2, "m3": 0.3},
        "b": {"m1": 0.1, "m2": 0.2, "m3": 0.3},
        "c": {"m1": 0.3, "m2": 0.2, "m3": 0.1},
    }
    taus = {(r.dataset_a, r.dataset_b): r.tau for r in rank_agreement(scores)}
    assert taus[("a", "b")] == pytest.approx(1.0) and taus[("a", "c")] == pytest.approx(-1.0)
    flips = rank_reversals(scores)
    assert len(flips) == 6  # 3 model pairs flip between a-c and between b-c
    assert all(f.dataset_b == "c" for f in flips)


def test_correctness_uses_a_normalised_whole_word_match() -> None:
    from sago_core.statistics.correctness import is_correct, normalise_answer

    assert normalise_answer("The  Eiffel-Tower!") == "eiffel tower"
    assert is_correct("It is located in Paris, France.", ["Paris"]) is True
    assert is_correct("Parisian food is great.", ["Paris"]) is False
    assert is_correct("The answer is 1969.", ["20 July 1969", "1969"]) is True
    assert is_correct("No idea.", []) is None


def test_cohens_kappa_on_the_textbook_example() -> None:
    # 50 items: both yes 20, A yes / B no 5, A no / B yes 10, both no 15 -> p_o .7, p_e .5
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    result = agreement(a, b)
    assert result.n == 50 and result.percent == pytest.approx(70.0)
    assert result.kappa == pytest.approx(0.4)
    assert agreement([1, 1, None], [1, 1, 0]).kappa is None  # both constant: undefined
    assert agreement([], []).percent is None


def _summary_scores(values: list[list[float]]) -> pl.DataFrame:
    """Per-prompt scores of one model on one axis, one list per dataset."""
    return pl.DataFrame(
        [
            {"model": "m", "dataset": f"d{d}", "prompt_id": f"p{p}", "axis": "act", "s": s}
            for d, scores in enumerate(values)
            for p, s in enumerate(scores)
        ]
    )


def test_pooled_interval_needs_two_prompts_in_every_dataset() -> None:
    """Five datasets of one prompt each: a bootstrap within each dataset redraws every
    prompt whole, so the old band was the point [0.3, 0.3]. Now there is none, and the
    summary's pooled row says why; two prompts in every dataset draw one."""
    from sago_core.scoring.summary import summarize
    from sago_core.statistics.intervals import pooled_refusal
    from sago_core.vocabulary import POOLED

    singles = [[0.1], [0.2], [0.3], [0.4], [0.5]]
    assert bootstrap_pooled_ci(singles, seed=0) == (None, None)
    assert bootstrap_pooled_ci([[0.1, 0.2], [0.3], [0.4, 0.5]], seed=0) == (None, None)
    reason = (
        "1 of 3 pooled datasets hold fewer than 2 prompts with a value (a bootstrap within "
        "each dataset draws no spread from them): no bootstrap interval"
    )
    assert pooled_refusal([2, 1, 2]) == reason
    assert pooled_refusal([2, 0, 3]) is None  # a dataset without a value is not pooled
    assert pooled_refusal([4]) == "4 prompt(s) with a value, fewer than 5: no bootstrap interval"
    summary = summarize(_summary_scores(singles))
    pooled = summary.filter(pl.col("dataset") == POOLED).row(0, named=True)
    assert pooled["sgs"] == pytest.approx(0.3) and pooled["n"] == 5
    assert pooled["ci_low"] is None and pooled["ci_high"] is None
    assert pooled["ci_missing_reason"] == reason.replace("1 of 3", "5 of 5")
    pairs = summarize(_summary_scores([[0.1, 0.2], [0.3, 0.5], [0.4, 0.45]]))
    drawn = pairs.filter(pl.col("dataset") == POOLED).row(0, named=True)
    assert drawn["ci_low"] < drawn["sgs"] < drawn["ci_high"]
    assert drawn["ci_missing_reason"] is None


def test_pooled_band_has_the_unbiased_stratified_variance() -> None:
    """6 datasets x 2 prompts: the spread of the resampled pooled mean is the textbook
    stratified variance, sum_d s_d^2 / n_d / D^2 (s_d with n_d - 1); the plain stratified
    bootstrap gives (n_d - 1) / n_d of it, half at two prompts."""
    rng = np.random.default_rng(5)
    groups = [rng.normal(0.2, 0.05, 2) for _ in range(6)]
    low, high = bootstrap_pooled_ci(groups, seed=3, resamples=20000)
    assert low is not None and high is not None
    variance = sum(g.var(ddof=1) / len(g) for g in groups) / len(groups) ** 2
    assert (high - low) / 2 == pytest.approx(1.959964 * np.sqrt(variance), rel=0.1)


def test_pooled_band_covers_with_two_prompts_per_dataset() -> None:
    """400 simulated runs of 6 datasets x 2 normal prompts, each dataset its own mean: the
    corrected 95% band covers the true equal-weight mean at least 85% of the time (0.90 over
    3000 runs; the uncorrected stratified band covered 0.77)."""
    rng = np.random.default_rng(7)
    centres = 0.1 * np.arange(6)
    truth = float(centres.mean())
    runs, covered = 400, 0
    for run in range(runs):
        groups = [rng.normal(c, 0.05, 2) for c in centres]
        low, high = bootstrap_pooled_ci(groups, seed=run, resamples=1000)
        assert low is not None and high is not None
        covered += bool(low <= truth <= high)
    assert covered / runs >= 0.85
