"""The full grid's cells read from a finished run's ``deltas.parquet`` (one model).

The budgeted estimator consumes exactly the columns scoring reads (scoring/prompt_scores.py):
``dataset, prompt_id, family, subtype, strength, position, axis, delta_norm``, the replay
family left out (it is the noise floor, never part of a score), a null or non-finite
``delta_norm`` a missing measurement (NaN here, never a number).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from sago_core.budget.design import Grid, Kind
from sago_core.vocabulary import REPLAY_FAMILY

CELL = ["dataset", "prompt_id", "family", "subtype", "strength", "position"]


@dataclass(frozen=True)
class GridValues:
    """A grid and its normalised deltas: ``values[cell, axis]`` (NaN: missing)."""

    grid: Grid
    axes: tuple[str, ...]
    values: np.ndarray


def grid_from_deltas(deltas: pl.DataFrame, model: str | None = None) -> GridValues:
    """One model's cells; ``model`` may be omitted when the frame holds one."""
    models = deltas["model"].unique().to_list()
    if model is None:
        if len(models) != 1:
            raise ValueError(f"deltas hold models {sorted(models)}: name one")
        model = models[0]
    elif model not in models:
        raise ValueError(f"deltas hold no rows of model {model!r}")
    rows = deltas.filter((pl.col("model") == model) & (pl.col("family") != REPLAY_FAMILY))
    axes = tuple(dict.fromkeys(rows["axis"].to_list()))
    value = pl.when(pl.col("delta_norm").is_finite()).then(pl.col("delta_norm"))
    wide = (
        rows.with_columns(value.alias("delta_norm"))
        .pivot(on="axis", index=CELL, values="delta_norm", aggregate_function=None)
        .sort(CELL)
    )
    kinds: list[Kind] = [
        (f, s, float(g), p)
        for f, s, g, p in zip(
            wide["family"], wide["subtype"], wide["strength"], wide["position"], strict=True
        )
    ]
    grid = Grid(tuple(wide["dataset"]), tuple(wide["prompt_id"]), tuple(kinds))
    values = np.column_stack([wide[a].cast(pl.Float64).fill_null(np.nan).to_numpy() for a in axes])
    return GridValues(grid, axes, values)
