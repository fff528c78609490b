"""The borrowing-strength model of bench/budget_borrow.py on tiny noiseless grids: its
alternating least squares recovers hand-written effects and predicts the cells not asked,
and its estimate of the full grid's SGS is exact when the model is."""

from __future__ import annotations

import numpy as np

from bench.budget_borrow import dense_datasets, estimate_borrow, fit_additive
from sago_core.budget.cells import GridValues
from sago_core.budget.design import Grid
from sago_core.budget.sequential import BudgetResult

# kinds 0 and 1 in one group (say spacing at two strengths), kinds 2 and 3 in another
GROUP = np.array([0, 0, 1, 1])


def test_additive_fit_predicts_unasked_cells_exactly() -> None:
    """d^2(i, k) = a_i + b_k with a = (0, 1, 3), b = (0.5, 1, 2, 4): prompt 0 was not asked
    kind 3 (0 + 4 = 4.0) and prompt 2 not kind 1 (3 + 1 = 4.0)."""
    y = np.array(
        [
            [0.5, 1.0, 2.0, 0.0],
            [1.5, 2.0, 3.0, 5.0],
            [3.5, 0.0, 5.0, 7.0],
        ]
    )
    asked = np.ones(y.shape, dtype=bool)
    asked[0, 3] = asked[2, 1] = False
    effects = fit_additive(y, asked, GROUP, rank=0, ridge=1e-9)
    # the effects themselves, up to the constant an additive model cannot place
    np.testing.assert_allclose(effects.a - effects.a[0], [0.0, 1.0, 3.0], atol=1e-6)
    kind = effects.g[GROUP] + effects.b
    np.testing.assert_allclose(kind - kind[0], [0.0, 0.5, 1.5, 3.5], atol=1e-6)
    np.testing.assert_allclose(effects.u, 0.0)
    fitted = effects.predict(GROUP)
    expected = np.array(
        [
            [0.5, 1.0, 2.0, 4.0],
            [1.5, 2.0, 3.0, 5.0],
            [3.5, 4.0, 5.0, 7.0],
        ]
    )
    np.testing.assert_allclose(fitted, expected, atol=1e-6)


def test_ridge_shrinks_a_kind_seen_once_towards_its_group() -> None:
    """Kind 3 asked of prompt 1 only, 2 above its group-mate kind 2 (asked everywhere, at
    2.0 + a_i). With a ridge of one pseudo-observation the kind's own effect gets half of
    its observation's residual, so prompt 0's prediction for kind 3 lies clearly between
    its group-mate's (2.0) and the truth (4.0): neither the fallback alone nor the one
    observation taken at face value."""
    y = np.array(
        [
            [0.5, 1.0, 2.0, 0.0],
            [1.5, 2.0, 3.0, 5.0],
            [3.5, 4.0, 5.0, 0.0],
        ]
    )
    asked = np.ones(y.shape, dtype=bool)
    asked[0, 3] = asked[2, 3] = False
    fitted = fit_additive(y, asked, GROUP, rank=0, ridge=1.0, iterations=500).predict(GROUP)
    assert 2.2 < fitted[0, 3] < 3.8


def test_rank_one_interaction_predicts_unasked_cells_exactly() -> None:
    """d^2 = a_i + b_k + u_i v_k, a = (0, 1, 3, -1), b = (0.5, 1, 2, 4, 3),
    u = (1, -1, 2, 0.5), v = (0.3, -0.6, 1, 0.2, -0.5) (kinds 2-4 one group): the
    unasked cells are (0, 3) = 0 + 4 + 0.2 = 4.2 and (2, 1) = 3 + 1 - 1.2 = 2.8."""
    a = np.array([0.0, 1.0, 3.0, -1.0])
    b = np.array([0.5, 1.0, 2.0, 4.0, 3.0])
    u = np.array([1.0, -1.0, 2.0, 0.5])
    v = np.array([0.3, -0.6, 1.0, 0.2, -0.5])
    y = a[:, None] + b[None, :] + u[:, None] * v[None, :]
    asked = np.ones(y.shape, dtype=bool)
    asked[0, 3] = asked[2, 1] = False
    group = np.array([0, 0, 1, 1, 1])
    fitted = fit_additive(np.where(asked, y, 0.0), asked, group, rank=1, ridge=1e-9)
    predicted = fitted.predict(group)
    assert abs(predicted[0, 3] - 4.2) < 1e-6
    assert abs(predicted[2, 1] - 2.8) < 1e-6
    np.testing.assert_allclose(predicted[asked], y[asked], atol=1e-6)


def test_batched_fits_are_independent() -> None:
    """Two grids stacked on a leading axis fit as they would alone: the second is the first
    plus 1 everywhere, so its prediction for the unasked cell is 4.0 + 1 = 5.0."""
    y = np.array(
        [
            [0.5, 1.0, 2.0, 0.0],
            [1.5, 2.0, 3.0, 5.0],
            [3.5, 4.0, 5.0, 7.0],
        ]
    )
    asked = np.ones(y.shape, dtype=bool)
    asked[0, 3] = False
    stacked = np.stack([y, y + 1.0])
    predicted = fit_additive(stacked, asked, GROUP, rank=0, ridge=1e-9).predict(GROUP)
    assert abs(predicted[0, 0, 3] - 4.0) < 1e-6
    assert abs(predicted[1, 0, 3] - 5.0) < 1e-6


def _toy_grid(asked: np.ndarray) -> tuple[GridValues, BudgetResult]:
    """One dataset, prompts a-c x kinds 0-3 (two spacing, two politeness strengths), one
    axis whose squared delta is the additive grid above."""
    squares = np.array([[0.5, 1.0, 2.0, 4.0], [1.5, 2.0, 3.0, 5.0], [3.5, 4.0, 5.0, 7.0]])
    kinds = [
        ("noise", "spacing", 1.0, "prefix"),
        ("noise", "spacing", 5.0, "prefix"),
        ("register", "politeness", 2.0, "prefix"),
        ("register", "politeness", 8.0, "prefix"),
    ]
    grid = Grid(("d",) * 12, tuple(p for p in "abc" for _ in kinds), tuple(kinds * 3))
    values = np.sqrt(squares).reshape(-1, 1)
    gv = GridValues(grid, ("bleu",), values)
    observed = asked.reshape(-1)
    measured = np.where(observed[:, None], values, np.nan)
    result = BudgetResult([], {}, {}, observed, "budget spent", int(observed.sum()), measured)
    return gv, result


def test_estimate_from_every_cell_is_the_full_grid_with_no_width() -> None:
    """Every cell asked: nothing to predict, so the estimate is the full grid's SGS
    (mean over prompts of sqrt(mean d^2): (1.369306 + 1.695582 + 2.207940) / 3 =
    1.757610) and the bootstrap sees no error."""
    gv, result = _toy_grid(np.ones((3, 4), dtype=bool))
    estimate = estimate_borrow(
        gv, dense_datasets(gv), result, 0, np.random.default_rng(0), np.zeros(12, dtype=int)
    )
    assert abs(estimate.value[0] - 1.757610) < 1e-6
    assert estimate.half[0] < 1e-9
    np.testing.assert_allclose(estimate.assisted, estimate.value, atol=1e-6)


def test_estimate_predicts_the_cells_not_asked() -> None:
    """Cells (a, 3) and (c, 1) not asked: the additive model fills them in (4.0 and 4.0,
    nearly, with a ridge of 1e-9), so the estimate is again the full grid's 1.757610."""
    asked = np.ones((3, 4), dtype=bool)
    asked[0, 3] = asked[2, 1] = False
    gv, result = _toy_grid(asked)
    estimate = estimate_borrow(
        gv, dense_datasets(gv), result, 0, np.random.default_rng(0), np.zeros(12, dtype=int),
        ridge=1e-9,
    )  # fmt: skip
    assert abs(estimate.value[0] - 1.757610) < 1e-5
    assert len(estimate.scores[0]) == 3
