"""A budgeted run's cells: the grid read from the run's kept variants, each round's inputs
(the sampled prompts, their replays and the cells asked so far) and the measured values
read back from the round's deltas.

The grid is what the run kept: every kept variant of every prompt (after the semantic
filter), the replay left out (it is not a cell: every sampled prompt is asked its base and
its replay in the first round). A variant kind a prompt holds twice (two variants with one
(family, subtype, strength, position)) is told apart by its rank in the subtype
(``subtype#2``), so no real grid is refused.

Several models are one design: the same cells for every model (common random numbers, so a
paired comparison keeps its power), their values side by side as (model, axis) columns, and
the rounds stop when every model's axes are done.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from sago_core.budget.design import Grid, Kind
from sago_core.vocabulary import REPLAY_FAMILY

CELL_ID = ["dataset", "prompt_id", "variant_id"]


@dataclass(frozen=True)
class RunCells:
    """The grid of a run and each cell's (dataset, prompt_id, variant_id)."""

    grid: Grid
    ids: tuple[tuple[str, str, str], ...]

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(
            [list(c) for c in zip(*self.ids, strict=True)] if self.ids else [[], [], []],
            schema=dict.fromkeys(CELL_ID, pl.String),
            orient="col",
        )


def run_cells(variants: pl.DataFrame) -> RunCells:
    """The kept variants (the replay left out) as the budget's grid, ordered by cell id."""
    rows = variants.filter(pl.col("kept") & (pl.col("family") != REPLAY_FAMILY)).sort(CELL_ID)
    seen: Counter[tuple[str, str, Kind]] = Counter()
    kinds: list[Kind] = []
    for d, p, f, s, g, pos in rows.select(
        "dataset", "prompt_id", "family", "subtype", "strength", "position"
    ).iter_rows():
        kind: Kind = (f, s, float(g), pos)
        seen[(d, p, kind)] += 1
        rank = seen[(d, p, kind)]
        kinds.append(kind if rank == 1 else (f, f"{s}#{rank}", float(g), pos))
    grid = Grid(tuple(rows["dataset"]), tuple(rows["prompt_id"]), tuple(kinds))
    ids = tuple(zip(rows["dataset"], rows["prompt_id"], rows["variant_id"], strict=True))
    return RunCells(grid, ids)


def round_inputs_of(
    prompts: pl.DataFrame,
    variants: pl.DataFrame,
    asked: pl.DataFrame,
    sampled: set[tuple[str, str]],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The prompts and variants a round's shards answer: the ``sampled`` prompts (their
    bases), their replays and every cell asked so far (``asked``: their dataset, prompt_id
    and variant_id). Cells of earlier rounds are in again: the row cache answers them
    without the model."""
    keys = pl.DataFrame(
        [[d for d, _ in sorted(sampled)], [p for _, p in sorted(sampled)]],
        schema={"dataset": pl.String, "prompt_id": pl.String},
        orient="col",
    )
    round_prompts = prompts.join(keys, on=["dataset", "prompt_id"], how="semi")
    kept = variants.filter(pl.col("kept"))
    replays = kept.filter(pl.col("family") == REPLAY_FAMILY).join(
        keys, on=["dataset", "prompt_id"], how="semi"
    )
    chosen = kept.join(asked, on=CELL_ID, how="semi")
    return round_prompts, pl.concat([chosen, replays]).sort(CELL_ID)


def cell_values(
    deltas: pl.DataFrame, cells: RunCells, columns: list[tuple[str, str]], mask: np.ndarray
) -> np.ndarray:
    """``deltas.delta_norm`` of the cells in ``mask`` (cells x (model, axis) columns), NaN
    where missing or non-finite: what the estimator reads."""
    wanted = cells.frame().with_row_index("cell").filter(pl.Series(mask))
    out = np.full((len(cells.ids), len(columns)), np.nan)
    value = pl.when(pl.col("delta_norm").is_finite()).then(pl.col("delta_norm"))
    for c, (model, axis) in enumerate(columns):
        rows = deltas.filter((pl.col("model") == model) & (pl.col("axis") == axis)).select(
            *CELL_ID, value.alias("v")
        )
        joined = wanted.join(rows, on=CELL_ID, how="left")
        out[joined["cell"].to_numpy(), c] = joined["v"].cast(pl.Float64).fill_null(np.nan)
    return out[mask]
