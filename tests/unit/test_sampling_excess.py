"""The prompt-induced excess at T > 0 (sago_core/sampling/excess.py, distances.py): hand-
computed small cases, the K = 1 identity with today's deltas, and E's expectation over many
seeded draws (0 for one distribution, the closed form of half the energy distance for a
shift)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sago_core.sampling.answers import TextDistances
from sago_core.sampling.distances import PairDistances, from_matrices, measure_distances
from sago_core.sampling.excess import (
    excess,
    mirroring_excess,
    teacher_forced_delta,
    teacher_forced_mean,
)


def absolute(a: float, b: float) -> float:
    return abs(a - b)


def test_excess_of_a_hand_computed_pair() -> None:
    # variant {0, 2}, base {1, 5}, d = |x - y|: cross 1, 5, 1, 3 -> D = 2.5; W_v = 2, W_b = 4
    got = excess(measure_distances([0.0, 2.0], [1.0, 5.0], absolute))
    assert (got.cross, got.within_variant, got.within_base) == (2.5, 2.0, 4.0)
    assert got.value == pytest.approx(-0.5) and got.missing_reason is None
    same = excess(
        from_matrices(
            cross=[[1, 5], [1, 3]], within_base=[[0, 4], [4, 0]], within_variant=[[9, 2], [2, 9]]
        )
    )
    assert same.value == pytest.approx(-0.5)  # a within diagonal is never read


def test_k1_excess_is_todays_delta() -> None:
    """T = 0, K = 1: E = D = 1 - similarity / R_X = -Delta / R_X for BLEU and BERTScore, so
    the per-prompt RMS (which squares it) and SGS are today's."""
    bleu = 62.5  # today's Delta_BLEU = 62.5 - 100 = -37.5, normalised -0.375
    got = excess(_one_pair(bleu, 100.0))
    assert got.value == pytest.approx(0.375) and got.value == got.cross
    assert got.within_base is None and got.within_variant is None and got.missing_reason is None
    bert = excess(_one_pair(0.9, 1.0))
    assert bert.value == pytest.approx(0.1)  # today's Delta_BERT = 0.9 - 1 = -0.1


def _one_pair(similarity: float, scale: float) -> PairDistances:
    """One variant answer and one base answer at ``similarity``, as the sampled stage
    measures them."""
    texts = TextDistances(lambda h, r: [similarity] * len(h), scale, symmetric=False)
    texts.need(["v"], ["b"])
    texts.measure()
    return texts.pair(["v"], ["b"])


def test_asymmetric_distance_keeps_its_order() -> None:
    def distance(hypothesis: int, reference: int) -> float:
        return float(10 * hypothesis + reference)

    got = measure_distances([1, 2], [3], distance)
    assert got.cross.tolist() == [[13.0], [23.0]]  # d(variant_i, base_j)
    assert got.cross_reverse.tolist() == [[31.0, 32.0]]  # d(base_j, variant_i)
    assert got.pooled().tolist() == [[0, 12, 13], [21, 0, 23], [31, 32, 0]]
    assert from_matrices([[1.0, 2.0]], [[0, 1], [1, 0]], [[0]]).cross_reverse.tolist() == [
        [1.0],
        [2.0],
    ]


def test_one_sample_beside_several_has_no_excess() -> None:
    got = excess(measure_distances([0.0], [1.0, 2.0, 4.0], absolute))
    assert got.value is None and got.cross == pytest.approx(7 / 3)
    assert got.missing_reason is not None and "W_variant" in got.missing_reason


def _mean_excess(shift: float, k: int, draws: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        variant, base = rng.normal(shift, 1.0, k), rng.normal(0.0, 1.0, k)
        apart = from_matrices(
            np.abs(np.subtract.outer(variant, base)),
            np.abs(np.subtract.outer(base, base)),
            np.abs(np.subtract.outer(variant, variant)),
        )
        values.append(excess(apart).value)
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std(ddof=1) / np.sqrt(draws))


def test_excess_is_zero_in_expectation_for_one_distribution() -> None:
    mean, se = _mean_excess(0.0, k=4, draws=1500, seed=11)
    assert abs(mean) < 4 * se


def test_excess_expectation_is_half_the_energy_distance_of_a_shift() -> None:
    """N(1, 1) against N(0, 1), d = |x - y|: E|X - Y| for X - Y ~ N(1, 2) (folded normal)
    minus E|X - X'| = 2 / sqrt(pi)."""
    mu, sigma = 1.0, np.sqrt(2.0)
    cross = sigma * np.sqrt(2 / np.pi) * np.exp(-(mu**2) / (2 * sigma**2)) + mu * (
        1 - 2 * stats.norm.cdf(-mu / sigma)
    )
    expected = cross - 2 / np.sqrt(np.pi)  # 0.2709
    mean, se = _mean_excess(1.0, k=4, draws=1500, seed=12)
    assert abs(mean - expected) < 4 * se and expected == pytest.approx(0.2709, abs=1e-4)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([[1.0, 2.0]], [[0.0]], [[0.0]]), "cross"),  # 1 x 2 against K_base = 1
        (([[1.0]], [[0.0, 1.0]], [[0.0]]), "within_base: expected a square"),
        (([[]], np.zeros((0, 0)), [[0.0]]), "within_base: needs at least one sample"),
        (([[np.nan]], [[0.0]], [[0.0]]), "NaN"),
        (([[1.0]], [[0.0]], [[0.0]], [[1.0, 2.0]]), "cross_reverse"),
    ],
)
def test_bad_matrices_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_matrices(*args)


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="variant samples: needs at least one"):
        measure_distances([], [1.0], absolute)
    with pytest.raises(ValueError, match="NaN"):
        measure_distances([1.0], [2.0], lambda h, r: float("nan"))
    with pytest.raises(ValueError, match="scale"):
        TextDistances(lambda h, r: [50.0] * len(h), 0.0, symmetric=False)


def test_mirroring_excess_is_a_difference_of_flag_shares() -> None:
    got = mirroring_excess([True, True, False, True], [False, True, False, False])
    assert (got.share_variant, got.share_base, got.value) == (0.75, 0.25, 0.5)
    today = mirroring_excess([True], [False])  # K = 1: M(y^v, v) - M(y, v)
    assert today.value == 1.0 and mirroring_excess([np.False_], [True]).value == -1.0  # type: ignore[list-item]
    missing = mirroring_excess([True, None], [False, False])
    assert missing.value is None and missing.missing_reason == (
        "1 of 2 variant samples' flags have no value"
    )
    with pytest.raises(ValueError, match=r"variant_flags\[0\]"):
        mirroring_excess([1], [True])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="base_flags: needs at least one"):
        mirroring_excess([True], [])


def test_teacher_forced_delta_averages_the_base_samples() -> None:
    got = teacher_forced_delta([-10.0, -12.0], [-9.0, -11.0])
    assert (got.mean_variant_prompt, got.mean_base_prompt, got.value) == (-11.0, -10.0, -1.0)
    assert teacher_forced_delta([-20.5], [-18.0]).value == -2.5  # K = 1: today's delta
    assert teacher_forced_mean([1.0, 2.0, 4.5]) == (2.5, None)
    absent = teacher_forced_delta([-1.0, -2.0], [None, -2.0])
    assert absent.value is None and absent.mean_variant_prompt == -1.5
    assert absent.missing_reason == "under the base prompt: 1 of 2 base samples have no value"
    with pytest.raises(ValueError, match="one value per base sample"):
        teacher_forced_delta([-1.0], [-1.0, -2.0])
    with pytest.raises(ValueError, match="not a finite number"):
        teacher_forced_delta([float("nan")], [-1.0])
