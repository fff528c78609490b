"""Flip rates beyond the base's own self-flip rate (sago_core/sampling/flips.py): a hand-
computed case, the K = 1 identity with today's flip, unbiasedness under an unchanged share of
right answers, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from sago_core.sampling.flips import flip_excess


def test_flip_excess_of_a_hand_computed_case() -> None:
    # base: 3 right, 1 wrong; variant: 1 right, 3 wrong; K = 4 each
    got = flip_excess([True, True, False, True], [False, False, True, False])
    assert got.right_to_wrong == pytest.approx(9 / 16)  # 3 right bases x 3 wrong variants
    assert got.wrong_to_right == pytest.approx(1 / 16)
    assert got.self_right_to_wrong == pytest.approx(3 / 12)  # ordered base pairs i != j
    assert got.self_wrong_to_right == pytest.approx(3 / 12)
    assert got.right_to_wrong_excess == pytest.approx(5 / 16)
    assert got.wrong_to_right_excess == pytest.approx(-3 / 16)


def test_k1_flip_is_todays_flip() -> None:
    got = flip_excess([True], [False])
    assert (got.right_to_wrong, got.self_right_to_wrong, got.right_to_wrong_excess) == (1, 0, 1)
    assert got.wrong_to_right_excess == 0.0
    assert flip_excess([False], [True]).wrong_to_right_excess == 1.0


def test_flip_excess_is_zero_in_expectation_when_the_share_right_is_unchanged() -> None:
    rng = np.random.default_rng(8)
    values = []
    for _ in range(2000):
        base, variant = rng.random(5) < 0.6, rng.random(5) < 0.6
        values.append(flip_excess(list(base), list(variant)).right_to_wrong_excess)
    array = np.asarray(values, dtype=np.float64)
    assert abs(array.mean()) < 4 * array.std(ddof=1) / np.sqrt(len(array))


def test_flips_that_cannot_be_counted_are_missing_with_a_reason() -> None:
    lone = flip_excess([True], [True, False])
    assert lone.right_to_wrong_excess is None and lone.missing_reason is not None
    assert "self-flip rate needs at least 2 base samples" in lone.missing_reason
    unjudged = flip_excess([True, None], [False, False])
    assert unjudged.right_to_wrong is None
    assert unjudged.missing_reason == "1 of 2 base samples have no verdict"
    with pytest.raises(ValueError, match=r"variant_correct\[1\]"):
        flip_excess([True], [True, 0.5])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="base_correct: needs at least one"):
        flip_excess([], [True])
