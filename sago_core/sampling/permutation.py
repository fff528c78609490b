"""Per-prompt permutation test of "the variant's samples and the base's samples come from
one distribution", with the excess E (``excess``) as statistic.

Under that hypothesis every split of the pooled K_variant + K_base samples into a "variant"
set of K_variant and a "base" set is as likely as the observed one, so the p-value is the
share of splits whose E is at least the observed E (one-sided: the wording can only add
distance). A split's E reads the pooled distance matrix (``PairDistances.pooled``), the
"variant" set's samples as hypotheses of the cross distances, as observed.

- Exact when there are at most ``MAX_EXACT`` splits (C(2K, K): 12 870 at K = 8): every
  split, the observed one included, p = #(E_split >= E_obs) / #splits.
- Otherwise Monte Carlo: ``permutations`` uniformly random splits from a generator seeded
  by the caller (``intervals.stable_seed`` of the row's identity), p = (b + 1) / (m + 1)
  with b of the m random splits at least as extreme (Phipson and Smyth 2010: never 0, and
  a valid test).
Both are valid (P(p <= alpha) <= alpha under the hypothesis). Ties are compared with a
relative tolerance of 1e-9 so a split that repeats the observed E in another floating-point
order counts as tied.

The smallest attainable p is reported (``min_p``): with a symmetric d and equal K a split
and its complement give the same E, so the exact test cannot go below 2 / C(2K, K) (1/3 at
K = 2, 1/10 at K = 3, 1/35 at K = 4): p < 0.05 needs K >= 4. Below 2 samples on either side
E has no within term and there is no test (None, with a reason).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from sago_core.sampling.distances import PairDistances
from sago_core.sampling.excess import excess

MAX_EXACT = 20_000
DEFAULT_PERMUTATIONS = 9_999
_RELATIVE_TIE = 1e-9


@dataclass(frozen=True)
class PermutationTest:
    excess: float | None  # the observed E
    p_value: float | None
    method: str | None  # "exact" or "monte_carlo"
    splits: int  # splits evaluated: all of them (exact) or the random ones (Monte Carlo)
    min_p: float | None  # the smallest p these data could give
    missing_reason: str | None = None


def split_excess(pooled: np.ndarray, in_variant: np.ndarray) -> np.ndarray:
    """E of each split: ``in_variant`` (splits x n) marks the samples labelled "variant";
    ``pooled`` (n x n, zero diagonal) holds d(row sample, column sample)."""
    as_variant = in_variant.astype(np.float64)
    as_base = 1.0 - as_variant
    k_v = as_variant[0].sum()
    k_b = as_base[0].sum()
    from_variant = as_variant @ pooled
    from_base = as_base @ pooled
    cross = (from_variant * as_base).sum(axis=1) / (k_v * k_b)
    within_v = (from_variant * as_variant).sum(axis=1) / (k_v * (k_v - 1))
    within_b = (from_base * as_base).sum(axis=1) / (k_b * (k_b - 1))
    result: np.ndarray = cross - (within_v + within_b) / 2
    return result


@functools.lru_cache(maxsize=8)
def _all_splits(n: int, k: int) -> np.ndarray:
    """Every split of n samples into k "variant" and n - k "base" ones (read-only: cached,
    a run asks the same (2K, K) for every pair)."""
    chosen = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64)
    marks = np.zeros((len(chosen), n), dtype=bool)
    marks[np.arange(len(chosen))[:, None], chosen] = True
    marks.setflags(write=False)
    return marks


def _random_splits(n: int, k: int, m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    chosen = np.argsort(rng.random((m, n)), axis=1)[:, :k]
    marks = np.zeros((m, n), dtype=bool)
    marks[np.arange(m)[:, None], chosen] = True
    return marks


def permutation_test(
    distances: PairDistances,
    seed: int,
    permutations: int = DEFAULT_PERMUTATIONS,
    max_exact: int = MAX_EXACT,
) -> PermutationTest:
    """The test for one (prompt, variant) pair; ``seed`` is used only by Monte Carlo."""
    if permutations < 1:
        raise ValueError(f"permutations: must be >= 1, got {permutations}")
    observed = excess(distances)
    k_v, k_b = distances.k_variant, distances.k_base
    if k_v < 2 or k_b < 2:
        reason = (
            f"{k_v} variant and {k_b} base sample(s): the test needs at least 2 on each side "
            "(E has no within-sample term below that)"
        )
        return PermutationTest(observed.value, None, None, 0, None, reason)
    assert observed.value is not None  # both sides hold >= 2 samples
    pooled = distances.pooled()
    n = k_v + k_b
    tie = _RELATIVE_TIE * max(1.0, float(np.abs(pooled).max()))
    if math.comb(n, k_v) <= max_exact:
        values = split_excess(pooled, _all_splits(n, k_v))
        extreme = int((values >= observed.value - tie).sum())
        min_p = int((values >= values.max() - tie).sum()) / len(values)
        return PermutationTest(observed.value, extreme / len(values), "exact", len(values), min_p)
    values = split_excess(pooled, _random_splits(n, k_v, permutations, seed))
    beyond = int((values >= observed.value - tie).sum())
    floor = 1 / (permutations + 1)
    return PermutationTest(observed.value, (beyond + 1) * floor, "monte_carlo", permutations, floor)


def share_permutation_test(
    pooled_flags: object,
    k_variant: int,
    seed: int,
    permutations: int = DEFAULT_PERMUTATIONS,
    max_exact: int = MAX_EXACT,
) -> PermutationTest:
    """Mirroring's test, the same relabelling with its own statistic: ``pooled_flags``
    (n x n, variant samples first) holds the detector's verdict on sample i read against
    sample j as the base answer (1 flagged); a split's statistic is the flagged share of its
    (variant, base) pairs minus that of its ordered pairs of distinct base samples (the
    mirroring excess, ``excess.mirroring_excess``). One-sided: the wording adds mirroring."""
    flags = np.asarray(pooled_flags, dtype=np.float64)
    n = flags.shape[0] if flags.ndim == 2 else 0
    if flags.ndim != 2 or flags.shape != (n, n) or not np.isfinite(flags).all():
        raise ValueError(f"pooled_flags: expected a finite square matrix, got {flags.shape}")
    k_b = n - k_variant
    if k_variant < 2 or k_b < 2:
        reason = f"{k_variant} variant and {k_b} base sample(s): the test needs 2 on each side"
        return PermutationTest(None, None, None, 0, None, reason)
    flags = flags.copy()
    np.fill_diagonal(flags, 0.0)

    def statistic(marks: np.ndarray) -> np.ndarray:
        as_variant = marks.astype(np.float64)
        as_base = 1.0 - as_variant
        from_variant = as_variant @ flags
        from_base = as_base @ flags
        cross = (from_variant * as_base).sum(axis=1) / (k_variant * k_b)
        within = (from_base * as_base).sum(axis=1) / (k_b * (k_b - 1))
        result: np.ndarray = cross - within
        return result

    observed_marks = np.zeros((1, n), dtype=bool)
    observed_marks[0, :k_variant] = True
    observed = float(statistic(observed_marks)[0])
    tie = _RELATIVE_TIE
    if math.comb(n, k_variant) <= max_exact:
        values = statistic(_all_splits(n, k_variant))
        extreme = int((values >= observed - tie).sum())
        min_p = int((values >= values.max() - tie).sum()) / len(values)
        return PermutationTest(observed, extreme / len(values), "exact", len(values), min_p)
    values = statistic(_random_splits(n, k_variant, permutations, seed))
    beyond = int((values >= observed - tie).sum())
    floor = 1 / (permutations + 1)
    return PermutationTest(observed, (beyond + 1) * floor, "monte_carlo", permutations, floor)


MAX_EXACT_SIGNS = 16  # 2^16 sign vectors


def sign_flip_test(
    differences: object, seed: int, permutations: int = DEFAULT_PERMUTATIONS
) -> PermutationTest:
    """The teacher-forced axes' test: base sample j scored under the variant prompt and
    under the base prompt gives one paired difference; under "the wording changes nothing"
    each difference is as likely with either sign. Two-sided (a prompt can raise or lower
    the likelihood): p = share of sign vectors whose |mean| is at least the observed one,
    exact up to ``MAX_EXACT_SIGNS`` samples (min p = 2 / 2^K: K >= 6 for p < 0.05), else
    Monte Carlo with (b + 1) / (m + 1). ``excess`` is the observed mean difference."""
    values = np.asarray(differences, dtype=np.float64)
    if values.ndim != 1 or len(values) < 1 or not np.isfinite(values).all():
        raise ValueError(f"differences: expected finite numbers, got {values!r}")
    k = len(values)
    observed = float(values.mean())
    if k < 2:
        reason = "one base sample: no sign-flip test"
        return PermutationTest(observed, None, None, 0, None, reason)
    tie = _RELATIVE_TIE * max(1.0, float(np.abs(values).max()))
    if k <= MAX_EXACT_SIGNS:
        codes = np.arange(2**k)[:, None] >> np.arange(k)[None, :] & 1
        signs = 1.0 - 2.0 * codes
        means = np.abs(signs @ values) / k
        extreme = int((means >= abs(observed) - tie).sum())
        min_p = int((means >= means.max() - tie).sum()) / len(means)
        return PermutationTest(observed, extreme / len(means), "sign_flip_exact", len(means), min_p)
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, k))
    means = np.abs(signs @ values) / k
    beyond = int((means >= abs(observed) - tie).sum())
    floor = 1 / (permutations + 1)
    return PermutationTest(
        observed, (beyond + 1) * floor, "sign_flip_monte_carlo", permutations, floor
    )
