"""Semantic spread (sago_core/sampling/spread.py): greedy clusters of a hand-made similarity
matrix, entropy of the cluster sizes by hand, the threshold's boundary, base vs variant."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sago_core.sampling.spread import DEFAULT_THRESHOLD, cluster_meanings, compare_spread

# 5 samples. 1 matches 0 (0.9); 2 matches 1 (0.95) but not the representative 0 (0.5), so it
# founds cluster 1; 3 matches both representatives and joins the first (cluster 0); 4 matches
# only sample 2 (cluster 1's representative).
SIMILARITY = np.array(
    [
        [1.0, 0.9, 0.5, 0.86, 0.1],
        [0.9, 1.0, 0.95, 0.7, 0.1],
        [0.5, 0.95, 1.0, 0.88, 0.9],
        [0.86, 0.7, 0.88, 1.0, 0.2],
        [0.1, 0.1, 0.9, 0.2, 1.0],
    ]
)


def test_greedy_clusters_of_a_hand_made_matrix() -> None:
    got = cluster_meanings(SIMILARITY, threshold=0.85)
    assert got.labels == (0, 0, 1, 0, 1) and got.sizes == (3, 2) and got.clusters == 2
    # H = -(0.6 ln 0.6 + 0.4 ln 0.4) = 0.30650 + 0.36652
    assert got.entropy == pytest.approx(0.673012, abs=1e-6)


def test_a_sample_at_the_threshold_joins_and_the_diagonal_is_unread() -> None:
    at = np.array([[0.0, 0.85], [0.85, 0.0]])
    assert cluster_meanings(at, threshold=0.85).clusters == 1
    assert cluster_meanings(at, threshold=0.8500001).sizes == (1, 1)
    assert DEFAULT_THRESHOLD == 0.85


def test_entropy_ranges_from_one_meaning_to_k() -> None:
    same = cluster_meanings(np.ones((4, 4)))
    assert (same.clusters, same.entropy) == (1, 0.0)
    apart = cluster_meanings(np.eye(4))
    assert apart.clusters == 4 and apart.entropy == pytest.approx(math.log(4))
    single = cluster_meanings([[1.0]])
    assert (single.clusters, single.entropy, single.labels) == (1, 0.0, (0,))


def test_variant_spread_against_the_base() -> None:
    got = compare_spread(np.ones((4, 4)), np.kron(np.eye(2), np.ones((2, 2))))
    assert (got.base.clusters, got.variant.clusters, got.clusters_excess) == (1, 2, 1)
    assert got.entropy_excess == pytest.approx(math.log(2))


@pytest.mark.parametrize(
    ("similarity", "message"),
    [
        (np.ones((2, 3)), "square"),
        (np.zeros((0, 0)), "at least one sample"),
        ([[1.0, np.nan], [np.nan, 1.0]], "NaN"),
    ],
)
def test_bad_input_is_refused(similarity: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cluster_meanings(similarity)
    with pytest.raises(ValueError, match=message):
        compare_spread(np.ones((2, 2)), similarity)


def test_a_nan_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold"):
        cluster_meanings(np.ones((2, 2)), threshold=float("nan"))
