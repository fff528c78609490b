"""The planner's account of the design's allocation (budget/allocation.py), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from sago_core.budget.allocation import (
    StratumParts,
    allocated_sample,
    allocated_within,
    planned_counts,
)

# a prompt of 16 variants: a small stratum (4) with a large spread, a large one (12) with a
# small spread; the first round asks two cells of each
PARTS = StratumParts(sizes=(4.0, 12.0), spread=(9.0, 1.0), minimum=(2, 2))


def test_one_round_tops_the_minimum_up_proportionally() -> None:
    # 8 cells in one round: the minimum (2, 2), then 4 cells by W_h^2 (1/16, 9/16) greedy
    # steps: the large stratum's gains 9/16 x (1/2-1/3, 1/3-1/4, ...) beat the small one's
    # 1/16 x (1/2-1/3) four times: (2, 6)
    counts = planned_counts({"ent": PARTS}, 8, 1, {"ent": 1.0})
    assert counts.tolist() == [2, 6]
    # (1/4)^2 x 9 x (1/2 - 1/4) + (3/4)^2 x 1 x (1/6 - 1/12) = 0.140625 + 0.046875
    assert allocated_within(PARTS, counts) == pytest.approx(0.1875)


def test_later_rounds_go_where_the_spread_is() -> None:
    # two rounds: the first is the minimum (4 cells >= 8 / 2); the other 4 by Neyman weights
    # W_h^2 S_h^2 = (9/16, 9/16): equal gains, alternating, the small stratum whole: (4, 4)
    counts = planned_counts({"ent": PARTS}, 8, 2, {"ent": 1.0})
    assert counts.tolist() == [4, 4]
    # the small stratum asked whole adds nothing: (3/4)^2 x 1 x (1/4 - 1/12)
    assert allocated_within(PARTS, counts) == pytest.approx(0.09375)
    # proportional shares of 8 cells (2, 6) would have stated twice that
    assert allocated_within(PARTS, np.array([2, 6])) == pytest.approx(2 * 0.09375)


def test_an_axis_not_watched_does_not_move_the_allocation() -> None:
    flat = StratumParts(sizes=(4.0, 12.0), spread=(0.0, 0.0), minimum=(2, 2))
    watched = planned_counts({"ent": PARTS, "bleu": flat}, 8, 2, {"ent": 1.0})
    assert watched.tolist() == planned_counts({"ent": PARTS}, 8, 2, {"ent": 1.0}).tolist()
    # nothing watched with a spread: the rest goes proportionally, like the first round
    assert planned_counts({"bleu": flat}, 8, 2, {"bleu": 1.0}).tolist() == [2, 6]


def test_the_sampling_term_follows_the_allocation() -> None:
    # sum_h W_h^2 / m_h: at proportional shares (2, 6) of 8 cells it is 1/8, as c.sample / m
    assert allocated_sample(PARTS, np.array([2, 6])) == pytest.approx(1 / 8)
    # at (4, 4): (1/4)^2 / 4 + (3/4)^2 / 4 = 0.015625 + 0.140625, larger than 1/8
    assert allocated_sample(PARTS, np.array([4, 4])) == pytest.approx(0.15625)
