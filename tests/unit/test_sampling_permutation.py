"""The per-prompt permutation test (sago_core/sampling/permutation.py): a hand-enumerated
exact case, Monte Carlo against that hand-computed p, p-values uniform under the null
(KS check, exact and Monte Carlo, fixed seeds), power under a shift, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sago_core.sampling.distances import PairDistances, from_matrices
from sago_core.sampling.permutation import permutation_test


def points(variant: list[float] | np.ndarray, base: list[float] | np.ndarray) -> PairDistances:
    """Euclidean distances between points (one row each, or one number each)."""
    v, b = np.asarray(variant, dtype=float), np.asarray(base, dtype=float)
    v, b = v.reshape(len(v), -1), b.reshape(len(b), -1)

    def apart(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.sqrt(((x[:, None, :] - y[None, :, :]) ** 2).sum(axis=-1))

    return from_matrices(apart(v, b), apart(b, b), apart(v, v))


# The 6 splits of {0, 1, 2, 5} into two pairs, d = |x - y|, by hand:
#   {0, 2} | {1, 5}: D = (1 + 5 + 1 + 3) / 4 = 2.5, W = 2 and 4  -> E = -0.5 (and complement)
#   {0, 1} | {2, 5}: D = (2 + 5 + 1 + 4) / 4 = 3,   W = 1 and 3  -> E = 1    (and complement)
#   {0, 5} | {1, 2}: D = (1 + 2 + 4 + 3) / 4 = 2.5, W = 5 and 1  -> E = -0.5 (and complement)


def test_exact_p_value_of_a_hand_enumerated_case() -> None:
    low = permutation_test(points([0, 2], [1, 5]), seed=0)
    assert low.excess == pytest.approx(-0.5) and low.p_value == pytest.approx(1.0)
    assert (low.method, low.splits, low.min_p) == ("exact", 6, pytest.approx(2 / 6))
    high = permutation_test(points([0, 1], [2, 5]), seed=0)
    assert high.excess == pytest.approx(1.0) and high.p_value == pytest.approx(2 / 6)


def test_monte_carlo_p_value_approaches_the_exact_one() -> None:
    m = 3999
    got = permutation_test(points([0, 1], [2, 5]), seed=5, permutations=m, max_exact=0)
    assert got.method == "monte_carlo" and got.splits == m and got.min_p == 1 / (m + 1)
    assert got.p_value is not None
    beyond = got.p_value * (m + 1) - 1  # (b + 1) / (m + 1)
    assert beyond == pytest.approx(round(beyond)) and 0 <= round(beyond) <= m
    assert abs(got.p_value - 1 / 3) < 4 * np.sqrt(1 / 3 * 2 / 3 / m)
    again = permutation_test(points([0, 1], [2, 5]), seed=5, permutations=m, max_exact=0)
    assert again == got


def _null_p_values(reps: int, k: int, seed: int, **options: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = []
    for rep in range(reps):
        draws = rng.normal(size=(2 * k, 2))  # 2-D: 1-D |x - y| ties many splits' E
        test = permutation_test(points(draws[:k], draws[k:]), seed=rep, **options)
        values.append(test.p_value)
    return np.asarray(values, dtype=np.float64)


def test_exact_p_values_are_uniform_under_the_null() -> None:
    p = _null_p_values(300, k=5, seed=21)  # C(10, 5) = 252 splits each, exact
    assert stats.kstest(p, "uniform").pvalue > 0.01
    rejected = float((p <= 0.05).mean())
    assert rejected <= 0.05 + 1.96 * np.sqrt(0.05 * 0.95 / len(p))


def test_monte_carlo_p_values_are_uniform_under_the_null() -> None:
    p = _null_p_values(300, k=10, seed=22, permutations=199)  # C(20, 10) > MAX_EXACT
    assert stats.kstest(p, "uniform").pvalue > 0.01
    assert p.min() >= 1 / 200


def test_a_shifted_variant_is_detected() -> None:
    """Power: 2-D points shifted by 2 sd on each axis, K = 6 (924 splits), 40 seeded draws."""
    rng = np.random.default_rng(3)
    p = []
    for _ in range(40):
        test = permutation_test(points(rng.normal(2.0, 1.0, (6, 2)), rng.normal(size=(6, 2))), 0)
        assert test.excess is not None and test.p_value is not None
        p.append(test.p_value)
    assert float(np.mean(np.asarray(p) < 0.05)) >= 0.9


def test_k8_is_enumerated_exactly() -> None:
    rng = np.random.default_rng(4)
    got = permutation_test(points(rng.normal(size=(8, 2)), rng.normal(size=(8, 2))), seed=0)
    assert got.method == "exact" and got.splits == 12870  # C(16, 8) <= MAX_EXACT
    assert got.min_p == pytest.approx(2 / 12870)  # a split and its complement: the same E


def test_an_asymmetric_distance_is_relabelled_with_its_reverse() -> None:
    """d(h, r) = 2 if h is a "variant-like" 1 and r a 0, else 0: only the observed split
    puts every 1 on the hypothesis side of the cross pairs."""
    ones, zeros = [1, 1], [0, 0]
    d = lambda h, r: 2.0 if (h, r) == (1, 0) else 0.0  # noqa: E731
    pooled = [*ones, *zeros]
    full = np.array([[d(h, r) for r in pooled] for h in pooled])
    distances = from_matrices(full[:2, 2:], full[2:, 2:], full[:2, :2], full[2:, :2])
    got = permutation_test(distances, seed=0)
    assert got.excess == 2.0 and got.p_value == pytest.approx(1 / 6)  # 1 of the 6 splits


def test_too_few_samples_give_no_test() -> None:
    single = permutation_test(points([0.0], [3.0]), seed=0)
    assert single.excess == 3.0 and single.p_value is None and single.splits == 0
    assert single.missing_reason is not None and "at least 2 on each side" in single.missing_reason
    lopsided = permutation_test(points([0.0, 1.0, 2.0], [3.0]), seed=0)
    assert lopsided.p_value is None and lopsided.excess is None
    with pytest.raises(ValueError, match="permutations"):
        permutation_test(points([0.0, 1.0], [2.0, 3.0]), seed=0, permutations=0)
