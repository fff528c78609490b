"""The design behind a paired comparison of two runs when either is budgeted
(``sago_core/budget/``): which cells each side asked, whether they are the same cells, and
the per-prompt scores the paired tests then run on.

A budgeted run's per-prompt score is the design-based estimate of the score the full grid
would give (``scores.parquet`` carries it). Two runs are paired by prompt, so their
difference carries each side's sampling error of the cells; when both asked the same cells
(common random numbers) that error is largely the same on both sides and cancels in the
difference, so the paired test keeps its power. On cells both asked, each side is scored by
its plain root sqrt(MS^) on them: the two roots fall short of the full grid's alike, so that
gap cancels in the difference, and nothing is shared between prompts. The design-based
roots are shrunk towards their own dataset's fitted prior, whose error every prompt of the
dataset shares: paired over prompts they made two releases of one model differ (two runs
redrawn from one real run's cells at 5% of the paper grid, 200 pairs: false verdicts
0.05-0.27 pooled and up to 0.97 on some dataset, against 0.04-0.06 and 0.01-0.06 with the
plain roots; the full grids' own 0.02-0.07). Four cases:

- **the same cells** (the same design seed, grid and cells: two releases in one run, or two
  runs whose rounds asked alike): the tests run on both runs' plain roots on them;
- **the cells both asked, honestly**: a budgeted design asks, in each stratum of a sampled
  prompt, the first ``m`` kinds of one reading order fixed by (seed, grid), so two runs of
  the same design (same seed, stratum level and sampled prompts) whose later rounds asked
  different counts share exactly the design's cells at the smaller count per prompt and
  stratum: itself a sample of that design, with known inclusion probabilities. That is
  checked (each side's cells, and their intersection, re-drawn from the seed), then both
  sides' per-prompt plain roots are taken on those cells. A full run against a budgeted
  one: the full run holds every cell, so both are taken on the budgeted side's cells;
- **different samples** (other seeds, levels or prompts): the tests compare the two runs'
  own design-based scores, two different samples of cells, with both runs' shared variance
  added to the tests (``SHARED``; runs recorded without it: the line says the tests do not
  hold their level, ``UNCONTROLLED``).

Within a dataset every sampled prompt has the same first-stage inclusion probability, so the
equal-weight mean over its prompts is the design-weighted mean; a pooled row weights
prompts equally, which is the design's weighting when every dataset sampled the same share
of its prompts (the line says when they did not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.layout import (
    BUDGET_CELLS_FILE,
    BUDGET_ESTIMATES_FILE,
    BUDGET_FILE,
    DELTAS_FILE,
    PROMPTS_FILE,
    VARIANTS_FILE,
)
from sago_core.artifacts.schemas import SCORES
from sago_core.budget.design import Layout, draw_design, index_grid, select_cells
from sago_core.budget.estimate import estimate_prompts
from sago_core.budget.run_cells import CELL_ID, RunCells, cell_values, run_cells
from sago_core.errors import InputError
from sago_core.vocabulary import AXES

FULL_GRID = "full grid in A and B"
SAME = "same cells"
COMMON = "cells both asked"
DIFFERENT = "different samples"
# Each run's design-based roots share their dataset's fitted-prior error, which a t-test
# over prompts leaves out: two runs redrawn from one real run's cells at other seeds (48
# prompts per dataset, 5%, 60 pairs) "differed" in up to 0.35 of pairs pooled and 0.95 on
# some dataset; with both runs' shared variance (budget_estimates.parquet) added, 0.05-0.10.
# Runs written before that column are compared without it, and the line says so.
SHARED = (
    "; the tests add both runs' shared variance (each dataset's fitted prior's error, which "
    "its prompts share)"
)
Shared = dict[tuple[str, str, str], float]
UNCONTROLLED = (
    "; NOT size-controlled: on pairs of one model these tests found a difference in up to "
    "0.35 of pairs pooled (one seed and stratum level for both runs gives a controlled test "
    "on the cells both asked)"
)


@dataclass(frozen=True)
class RunDesign:
    """One side: the run's grid, the cells it asked, its budget record (None: full grid)."""

    run_dir: Path
    cells: RunCells
    asked: np.ndarray  # bool per grid cell (cells.ids order)
    record: dict[str, Any] | None

    @property
    def budgeted(self) -> bool:
        return self.record is not None

    @property
    def count(self) -> int:
        return int(self.asked.sum())

    def describe(self) -> str:
        total = len(self.cells.ids)
        if not self.budgeted:
            return f"the full grid ({total:,} cells)"
        return f"{self.count:,} of {total:,} cells ({self.count / max(total, 1):.0%})"


@dataclass(frozen=True)
class PairedDesign:
    """What the paired tests run on, and the line that says so (paired.md, the table's
    ``design`` column)."""

    kind: str  # FULL_GRID, SAME, COMMON or DIFFERENT
    line: str
    a: RunDesign | None = None
    b: RunDesign | None = None
    common: np.ndarray | None = None  # SAME, COMMON: the cells both sides are scored on
    layout: Layout | None = None
    # DIFFERENT: per side, (model, dataset, axis) -> the variance its prompts share
    shared: tuple[Shared, Shared] | None = None

    def shared_variances(
        self, pairs: list[tuple[str, str]]
    ) -> dict[tuple[str, str, str, str], float] | None:
        """Per (model A, model B, dataset, axis): both sides' shared variance, the paired
        tests' addition where the two runs are different samples (None otherwise)."""
        if self.shared is None:
            return None
        a, b = self.shared
        keys = {(d, x) for _, d, x in a} | {(d, x) for _, d, x in b}
        return {
            (ma, mb, d, x): a.get((ma, d, x), 0.0) + b.get((mb, d, x), 0.0)
            for ma, mb in pairs
            for d, x in keys
        }

    @property
    def budgeted(self) -> bool:
        return self.kind != FULL_GRID

    def scores(
        self, scores_a: pl.DataFrame, scores_b: pl.DataFrame, pairs: list[tuple[str, str]]
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The per-prompt scores to pair: each run's own (different samples), or both
        sides' plain roots on the cells both asked."""
        if self.kind not in (SAME, COMMON) or self.a is None or self.b is None:
            return scores_a, scores_b
        assert self.common is not None and self.layout is not None
        models_a = sorted({a for a, _ in pairs})
        models_b = sorted({b for _, b in pairs})
        return (
            common_scores(self.a, models_a, self.common, self.layout),
            common_scores(self.b, models_b, self.common, self.layout),
        )


def _record(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / BUDGET_FILE
    if not path.is_file():
        return None
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InputError(f"is not valid JSON: {exc}", file=str(path)) from exc
    if not isinstance(loaded, dict):
        raise InputError("is not a budget record (a JSON object)", file=str(path))
    return loaded


def read_run_design(run_dir: Path) -> RunDesign:
    """The run's grid (its kept variants) and the cells it asked (``budget_cells.parquet``;
    every cell for a full run)."""
    record = _record(run_dir)
    cells = run_cells(pl.read_parquet(run_dir / VARIANTS_FILE))
    asked = np.ones(len(cells.ids), dtype=bool)
    if record is not None:
        path = run_dir / BUDGET_CELLS_FILE
        if not path.is_file():
            raise InputError(f"a budgeted run without {BUDGET_CELLS_FILE}", file=str(run_dir))
        table = pl.read_parquet(path)
        missing = [c for c in (*CELL_ID, "asked") if c not in table.columns]
        if missing:
            raise InputError(f"has no column {missing[0]!r}", file=str(path))
        flags = (
            cells.frame()
            .join(table.select(*CELL_ID, "asked"), on=CELL_ID, how="left", maintain_order="left")
            .get_column("asked")
            .fill_null(False)
        )
        asked = flags.to_numpy().astype(bool)
    return RunDesign(run_dir, cells, asked, record)


def _sampled_prompts(layout: Layout, asked: np.ndarray) -> np.ndarray:
    """Per dataset of the layout: the prompts holding an asked cell."""
    prompts = np.unique(layout.prompt_code[asked])
    return np.bincount(layout.prompt_dataset[prompts], minlength=len(layout.datasets))


def _counts(layout: Layout, asked: np.ndarray) -> np.ndarray:
    counts = np.zeros(layout.sizes.shape, dtype=np.int64)
    np.add.at(counts, (layout.prompt_code[asked], layout.stratum[asked]), 1)
    return counts


def _same_design(a: RunDesign, b: RunDesign) -> tuple[Layout | None, str]:
    """The layout when both runs are one design (seed, level, sampled prompts) and their
    common cells are that design's at the smaller counts; else None and why not."""
    ra, rb = a.record or {}, b.record or {}
    if ra.get("seed") != rb.get("seed"):
        return None, f"design seeds {ra.get('seed')} and {rb.get('seed')}"
    if ra.get("level") != rb.get("level") or ra.get("level") is None:
        return None, f"stratum levels {ra.get('level')} and {rb.get('level')}"
    layout = index_grid(a.cells.grid, ra["level"])
    sampled = _sampled_prompts(layout, a.asked)
    if not np.array_equal(sampled, _sampled_prompts(layout, b.asked)):
        return None, "different numbers of sampled prompts"
    design = draw_design(layout, int(ra["seed"]), sampled.tolist())
    counts_a, counts_b = _counts(layout, a.asked), _counts(layout, b.asked)
    for side, counts in ((a, counts_a), (b, counts_b)):
        if not np.array_equal(select_cells(design, counts), side.asked):
            return None, f"{side.run_dir.name}'s cells are not its design's (seed {ra['seed']})"
    common = select_cells(design, np.minimum(counts_a, counts_b))
    if not np.array_equal(common, a.asked & b.asked):
        return None, "the cells both asked are not one sample of the design"
    return layout, ""


def _sampling_shares(side: RunDesign, layout: Layout) -> str:
    """A note when the side sampled fewer prompts, and when datasets' shares differ."""
    sampled = _sampled_prompts(layout, side.asked)
    population = layout.prompts_per_dataset
    if np.array_equal(sampled, population):
        return ""
    note = f"; prompts sampled: {int(sampled.sum())} of {int(population.sum())}"
    shares = sampled / np.maximum(population, 1)
    if not np.allclose(shares, shares[0]):
        note += (
            " (datasets sampled at different shares: the pooled rows weight prompts equally, "
            "not by the design)"
        )
    return note


def paired_design(run_a: Path, run_b: Path) -> PairedDesign:
    """The design of the two runs' comparison (reads nothing but ``budget.json`` when
    neither run is budgeted)."""
    if _record(run_a) is None and _record(run_b) is None:
        return PairedDesign(FULL_GRID, FULL_GRID)
    a, b = read_run_design(run_a), read_run_design(run_b)
    if a.cells.ids != b.cells.ids:
        shared = _both_shared(a, b)
        line = (
            f"budgeted design, different grids: A {a.describe()}, B {b.describe()}; the paired "
            "tests compare two different samples (each run's own design-based per-prompt "
            f"scores){UNCONTROLLED if shared is None else SHARED}"
        )
        return PairedDesign(DIFFERENT, line, a, b, shared=shared)
    budgeted = a if a.budgeted else b
    layout = index_grid(a.cells.grid, (budgeted.record or {}).get("level") or "subtype")
    notes = _sampling_shares(a, layout) + (
        _sampling_shares(b, layout) if b.budgeted and a.budgeted else ""
    )
    if np.array_equal(a.asked, b.asked):
        line = (
            f"budgeted design: {a.describe()} in A, the same cells in B (common random "
            "numbers; the paired tests run on both runs' per-prompt roots on these cells)"
        )
        return PairedDesign(SAME, line + notes, a, b, a.asked, layout)
    common = a.asked & b.asked
    if a.budgeted != b.budgeted:
        full, side = ("A", "B") if b.budgeted else ("B", "A")
        if not common.any():
            raise InputError("asked no cell of the grid", file=str(budgeted.run_dir))
        line = (
            f"budgeted design in {side} only: {side} {budgeted.describe()}, {full} the full "
            f"grid; the paired tests run on {side}'s {int(common.sum()):,} cells, both "
            "sides' per-prompt roots on the same cells (common random numbers)"
        )
        return PairedDesign(COMMON, line + _sampling_shares(budgeted, layout), a, b, common, layout)
    same, why = _same_design(a, b)
    if same is not None:
        line = (
            f"budgeted design, different cells: A {a.describe()}, B {b.describe()}; the paired "
            f"tests run on the {int(common.sum()):,} cells both asked (the same design, seed "
            f"{(a.record or {}).get('seed')}, at the smaller count per prompt and stratum), "
            "each side's per-prompt roots on them"
        )
        return PairedDesign(COMMON, line + notes, a, b, common, same)
    shared = _both_shared(a, b)
    line = (
        f"budgeted design, different cells: A {a.describe()}, B {b.describe()}, "
        f"{int(common.sum()):,} asked by both ({why}); the paired tests compare two different "
        "samples, each run's own design-based per-prompt scores, whose differences carry both "
        f"designs' sampling error{UNCONTROLLED if shared is None else SHARED}"
    )
    return PairedDesign(DIFFERENT, line + notes, a, b, shared=shared)


def _both_shared(a: RunDesign, b: RunDesign) -> tuple[Shared, Shared] | None:
    sides = (_shared(a), _shared(b))
    return None if sides[0] is None or sides[1] is None else (sides[0], sides[1])


def _shared(side: RunDesign) -> Shared | None:
    """The side's shared variances (none for a full run); None where its record does not
    keep them (written before the column, or a value missing)."""
    if not side.budgeted:
        return {}
    path = side.run_dir / BUDGET_ESTIMATES_FILE
    if not path.is_file():
        return None
    frame = pl.read_parquet(path)
    if "shared_variance" not in frame.columns or frame["shared_variance"].null_count():
        return None
    return {
        (m, d, x): float(v)
        for m, d, x, v in frame.select("model", "dataset", "axis", "shared_variance").iter_rows()
    }


def common_scores(
    side: RunDesign, models: list[str], common: np.ndarray, layout: Layout
) -> pl.DataFrame:
    """Per (model, prompt, axis): the plain root sqrt(MS^) (``budget/estimate.py``'s
    stratified mean square, no root correction: module docstring) of the ``common`` cells
    of ``side``'s deltas."""
    deltas = pl.read_parquet(side.run_dir / DELTAS_FILE)
    present = set(deltas["axis"].unique().to_list())
    rows: list[dict[str, Any]] = []
    for model in models:
        for axis in [a for a in AXES if a in present]:
            values = np.full(len(side.cells.ids), np.nan)
            values[common] = cell_values(deltas, side.cells, [(model, axis)], common)[:, 0]
            estimates = estimate_prompts(layout, values, correct=False)
            for i, (dataset, prompt) in enumerate(layout.prompts):
                if np.isfinite(estimates.root[i]):
                    rows.append(
                        {
                            "model": model,
                            "dataset": dataset,
                            "prompt_id": prompt,
                            "axis": axis,
                            "s": float(estimates.root[i]),
                        }
                    )
    schema = {c: SCORES[c] for c in ("model", "dataset", "prompt_id", "axis", "s")}
    return pl.DataFrame(rows, schema=schema)


def population_keys(run_dir: Path) -> set[tuple[str, str]]:
    """The run's prompts (``prompts.parquet``): a budgeted run may score a sample of them."""
    frame = pl.read_parquet(run_dir / PROMPTS_FILE).select("dataset", "prompt_id").unique()
    return {(d, p) for d, p in frame.iter_rows()}
