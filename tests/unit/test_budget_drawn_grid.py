"""The replay's grids drawn from a finished run's cells (bench/budget_synthetic.py): the run's
own prompts come back as they are, and a new prompt keeps its source's kinds and draws each
stratum's values from that stratum's cells, every axis of a cell together."""

from __future__ import annotations

import numpy as np

from bench.budget_synthetic import drawn_grid
from sago_core.budget.cells import GridValues
from sago_core.budget.design import Grid, index_grid

KINDS = [("register", "politeness", float(s), "prefix") for s in (-4, -2, 2, 4)]
KINDS += [("noise", "spacing", float(s), "suffix") for s in (1, 5, 20)]


def real_grid() -> GridValues:
    """Two datasets x 3 prompts x 7 kinds; axis b is 10 x axis a, so a cell's axes can be
    told apart from a mix of two cells."""
    cells = [(f"d{j}", f"d{j}p{i}", k) for j in range(2) for i in range(3) for k in KINDS]
    grid = Grid(*(tuple(c[n] for c in cells) for n in range(3)))  # type: ignore[arg-type]
    a = np.arange(len(cells), dtype=float) + 1
    a[5] = np.nan  # a missing cell travels with its prompt
    return GridValues(grid, ("a", "b"), np.column_stack([a, 10 * a]))


def test_the_runs_own_prompts_come_back_as_they_are() -> None:
    real = real_grid()
    same = drawn_grid(real, 3, seed=1)
    assert same.grid == real.grid
    assert np.array_equal(same.values, real.values, equal_nan=True)


def test_a_new_prompt_redraws_its_sources_cells_within_each_stratum() -> None:
    real = real_grid()
    drawn = drawn_grid(real, 12, seed=2)
    layout = index_grid(drawn.grid, "position")
    assert list(layout.prompts_per_dataset) == [12, 12]
    source = index_grid(real.grid, "position")
    # every axis of a cell together: b is still 10 x a wherever a is measured
    seen = np.isfinite(drawn.values[:, 0])
    assert np.array_equal(drawn.values[seen, 1], 10 * drawn.values[seen, 0])
    redrawn = 0
    for p, (dataset, name) in enumerate(layout.prompts):
        origin = source.prompts.index((dataset, name.split("#")[0]))
        mine = np.flatnonzero(layout.prompt_code == p)
        theirs = np.flatnonzero(source.prompt_code == origin)
        assert [drawn.grid.kind[c] for c in mine] == [real.grid.kind[c] for c in theirs]
        for h in np.unique(source.stratum[theirs]):
            pool = np.nan_to_num(real.values[theirs[source.stratum[theirs] == h], 0], nan=-1)
            ours = np.nan_to_num(drawn.values[mine[layout.stratum[mine] == h], 0], nan=-1)
            assert len(ours) == len(pool) and np.isin(ours, pool).all()
        redrawn += not np.array_equal(drawn.values[mine, 0], real.values[theirs, 0], equal_nan=True)
    assert redrawn > 12  # most new prompts are not a copy of their source
