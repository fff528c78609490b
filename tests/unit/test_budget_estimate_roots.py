"""The root for axes that declare continuous cells: the gamma root by hand, its
unbiasedness by an independent simulation, and the declaration that picks it. Pure numpy."""

from __future__ import annotations

import numpy as np
import pytest

from sago_core.budget.design import Grid, index_grid
from sago_core.budget.estimate import axis_estimates, estimate_prompts, full_scores
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
    """3 prompts, 2 of 4 cells asked each, d^2 = c_i x (1, 3): mean 2 c_i, variance 2 c_i^2,
    so one cell's relative variance, pooled with the moment-corrected denominator (a sample
    of 2 of 4 drawn without replacement: E[mean^2] = mu^2 + fpc S^2 / m, fpc = 1/2), is
    2 / (4 - (1/2) 2 / 2) = 4/7 whatever each prompt's scale; r = fpc rho / m =
    (1/2)(4/7)/2 = 1/7, shape k = 7, f = Gamma(7.5) / (Gamma(7) sqrt 7) = (135135 / 128)
    sqrt(pi) / (720 sqrt 7) = 0.9823162; s_i = sqrt(2 c_i) / f, variance 2 c_i (1 / f^2 -
    1)."""
    grid = one_stratum_grid(3)
    layout = index_grid(grid, "family")
    c = np.array([0.01, 0.04, 0.25])
    values = np.full(grid.cells, np.nan)
    for i in range(3):
        values[4 * i] = np.sqrt(c[i])
        values[4 * i + 1] = -np.sqrt(3 * c[i])
    est = estimate_prompts(layout, values, continuous=True)
    f = 0.9823162
    assert est.s == pytest.approx(np.sqrt(2 * c) / f, rel=1e-6)
    assert est.s_var == pytest.approx(2 * c * (1 / f**2 - 1), rel=1e-5)
    # every prompt's cells have the same relative variance: none left out moves rho
    assert est.prior_var[0] == pytest.approx(0.0, abs=1e-20)
    # the same cells under the default (events) root are not this
    assert not np.allclose(estimate_prompts(layout, values).s, est.s, rtol=1e-3)


def test_asked_whole_the_gamma_root_is_the_full_root() -> None:
    grid = one_stratum_grid(5)
    layout = index_grid(grid, "family")
    values = np.random.default_rng(3).normal(0, 0.1, grid.cells)
    est = estimate_prompts(layout, values, continuous=True)
    assert np.array_equal(est.s, full_scores(layout, values))
    assert (est.s_var == 0).all()


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
