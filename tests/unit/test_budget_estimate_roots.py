"""The root for axes that declare continuous cells: the gamma root by hand, its
unbiasedness by an independent simulation, and the declaration that picks it. Pure numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sago_core.budget.design import Grid, index_grid
from sago_core.budget.estimate import (
    _free_rho,
    _strata,
    axis_estimates,
    estimate_prompts,
    full_scores,
)
from sago_core.registry.axes import axis_spec


def one_stratum_grid(prompts: int, kinds: int = 4) -> Grid:
    """One dataset, ``prompts`` prompts x ``kinds`` register kinds (a single stratum at the
    family level)."""
    cells = [
        (f"p{i}", ("register", "politeness", float(s), "prefix"))
        for i in range(prompts)
        for s in range(1, kinds + 1)
    ]
    return Grid(("d",) * len(cells), tuple(p for p, _ in cells), tuple(k for _, k in cells))


def test_the_gamma_root_by_hand() -> None:
    """3 prompts, 2 of 4 cells asked each, d^2 = c_i x (1, 3): mean 2 c_i, variance 2 c_i^2.
    One cell's relative variance, pooled with the moment-corrected denominator (a sample of 2
    of 4 drawn without replacement: E[mean^2] = mu^2 + fpc S^2 / m, fpc = 1/2), is
    2 / (4 - (1/2) 2 / 2) = 4/7 whatever each prompt's scale; from each prompt's own
    S^2 / mean^2 = 1/2 = rho / (1 + rho / 2) it is 2/3. rho is their midpoint 13/21: r =
    fpc rho / m = 13/84, shape k = 84/13, f = Gamma(k + 1/2) / (Gamma(k) sqrt k) =
    0.9808595; s_i = sqrt(2 c_i) / f, variance 2 c_i (1 / f^2 - 1). No prompt left out moves
    either estimate; the prior's variance is the half-gap's, 1/21 times the mean root's
    slope in rho, squared, over 3 (rho uniform between the two)."""
    grid = one_stratum_grid(3)
    layout = index_grid(grid, "family")
    c = np.array([0.01, 0.04, 0.25])
    values = np.full(grid.cells, np.nan)
    for i in range(3):
        values[4 * i] = np.sqrt(c[i])
        values[4 * i + 1] = -np.sqrt(3 * c[i])
    est = estimate_prompts(layout, values, continuous=True)
    f = 0.9808595
    assert est.s == pytest.approx(np.sqrt(2 * c) / f, rel=1e-6)
    assert est.s_var == pytest.approx(2 * c * (1 / f**2 - 1), rel=1e-5)

    def mean_root(rho: float) -> float:
        k = 4 / rho
        f = math.exp(math.lgamma(k + 0.5) - math.lgamma(k)) / math.sqrt(k)
        return float(np.sqrt(2 * c).mean() / f)

    slope = (mean_root(13 / 21 + 1e-6) - mean_root(13 / 21 - 1e-6)) / 2e-6
    assert est.prior_var[0] == pytest.approx((slope / 21) ** 2 / 3, rel=1e-3)
    # the same cells under the default (events) root are not this
    assert not np.allclose(estimate_prompts(layout, values).s, est.s, rtol=1e-3)


def test_asked_whole_the_gamma_root_is_the_full_root() -> None:
    grid = one_stratum_grid(5)
    layout = index_grid(grid, "family")
    values = np.random.default_rng(3).normal(0, 0.1, grid.cells)
    est = estimate_prompts(layout, values, continuous=True)
    assert np.array_equal(est.s, full_scores(layout, values))
    assert (est.s_var == 0).all()


def gamma_cells(seed: int, prompts: int, kinds: int = 8) -> tuple[Grid, np.ndarray]:
    """d^2 gamma of shape 1 (relative variance 1) times a per-prompt scale spread over four
    orders of magnitude; 2-4 of each prompt's kinds asked (NaN: not asked)."""
    rng = np.random.default_rng(seed)
    grid = one_stratum_grid(prompts, kinds)
    scale = 10 ** rng.uniform(-2, 2, prompts)
    squares = rng.gamma(1.0, 1.0, (prompts, kinds)) * scale[:, None]
    asked = np.zeros((prompts, kinds), dtype=bool)
    for i in range(prompts):
        asked[i, rng.choice(kinds, rng.integers(2, 5), replace=False)] = True
    return grid, np.where(asked, np.sqrt(squares), np.nan).ravel()


def test_rho_from_each_prompts_own_cells_ignores_their_scale() -> None:
    """The scale-free half of the gamma root's rho recovers gamma cells' relative variance
    whatever the prompts' scales (over 20 seeds: 0.994, sd 0.059), and its left-out values
    move it as a refit without the prompt does (the linearisation holds the dataset's own
    rho, which the refit also moves: 90% of the shift)."""
    grid, values = gamma_cells(0, 300)
    layout = index_grid(grid, "family")
    rho, left_out = _free_rho(layout, _strata(layout, values, np.isfinite(values)))
    assert rho[0] == pytest.approx(1.0, abs=0.2)
    for i in (0, 7, 9):
        without = values.copy()
        without[8 * i : 8 * i + 8] = np.nan
        refit, _ = _free_rho(layout, _strata(layout, without, np.isfinite(without)))
        assert left_out[i, 0] - rho[0] == pytest.approx(refit[0] - rho[0], rel=0.15)


def continuous_grid(seed: int, prompts: int) -> tuple[Grid, np.ndarray]:
    """One dataset, ``prompts`` prompts x 16 kinds in two strata (register, spacing); a
    normal delta per cell, sd a log-normal per-prompt scale times a kind's strength (the
    shape of Prob and Ent: d^2 a scaled chi-square with one degree of freedom)."""
    rng = np.random.default_rng(seed)
    kinds = [("register", "politeness", float(s), "prefix") for s in (-8, -4, -2, 2, 4, 6, 8, 10)]
    kinds += [("noise", "spacing", float(s), "prefix") for s in (1, 5, 10, 20, 30, 50, 75, 100)]
    strength = np.array([0.5 + abs(k[2]) / (100 if k[0] == "noise" else 10) for k in kinds])
    scale = rng.lognormal(0, 0.5, prompts)
    values = rng.normal(0, 1, (prompts, len(kinds))) * scale[:, None] * strength[None, :]
    cells = [(f"p{i}", k) for i in range(prompts) for k in kinds]
    grid = Grid(("d",) * len(cells), tuple(p for p, _ in cells), tuple(k for _, k in cells))
    return grid, values.ravel()


def test_the_gamma_root_is_unbiased_on_continuous_cells_by_simulation() -> None:
    """120 prompts, 2 of each prompt's 8 cells per stratum drawn by a simple random sample
    (numpy's, not the design's), 60 draws, the dataset's mean root against the full grid's
    (measured: the plain root -6.0%, the empirical-Bayes root -3.0%, its quasi-Poisson
    cells missing the chi-square's shape, the gamma root -0.7%, simulation SE 0.6%)."""
    prompts = 120
    grid, values = continuous_grid(5, prompts)
    layout = index_grid(grid, "subtype")
    truth = float(np.sqrt((values.reshape(prompts, 16) ** 2).mean(axis=1)).mean())
    rng = np.random.default_rng(11)
    found: dict[str, list[float]] = {"plain": [], "events": [], "gamma": []}
    for _ in range(60):
        mask = np.zeros((prompts, 16), dtype=bool)
        for i in range(prompts):
            for start in (0, 8):
                mask[i, start + rng.choice(8, 2, replace=False)] = True
        column = np.where(mask.ravel(), values, np.nan)
        n = np.array([prompts])
        for name, kwargs in (
            ("plain", {"correct": False}),
            ("events", {}),
            ("gamma", {"continuous": True}),
        ):
            pooled = axis_estimates(layout, column, n, **kwargs)[2]  # type: ignore[arg-type]
            assert pooled is not None
            found[name].append(pooled.value / truth - 1)
    error = {k: float(np.mean(v)) for k, v in found.items()}
    sim_se = float(np.std(found["gamma"], ddof=1) / np.sqrt(60))
    assert error["plain"] < -0.04
    assert error["events"] < -3 * sim_se
    assert abs(error["gamma"]) < 3 * sim_se


def test_the_axes_declare_their_cells() -> None:
    """Log-probability, entropy and hidden-state deltas are continuous; the answer
    comparisons (BLEU, BERTScore, mirroring) are events, the default a plug-in gets."""
    assert [axis_spec(a).continuous for a in ("act", "prob", "ent")] == [True] * 3
    assert [axis_spec(a).continuous for a in ("bleu", "bert", "mr")] == [False] * 3
