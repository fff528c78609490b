"""sago compare --paired on budgeted runs: the table and paired.md say which cells each side
asked; the same cells pair the runs' design-based scores; a common sample of one design, or a
full run against a budgeted one, re-estimates both sides from the cells both asked; other
samples are compared as two different samples, and said to be."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from sago_cli.main import main
from sago_core.budget.design import draw_design, index_grid, select_cells
from sago_core.budget.run_cells import run_cells
from sago_core.statistics.paired_runs import compare_paired
from sago_core.vocabulary import POOLED, REPLAY_FAMILY

PROMPTS = ["p1", "p2", "p3", "p4"]
SUBTYPES = ["spacing", "case"]  # two strata at level "subtype", four kinds each
STRENGTHS = [1.0, 2.0, 3.0, 4.0]
MARGIN = 0.02
CONFIG = {"seed": 0, "variants": {"noise": {"spacing": [1, 2, 3, 4]}, "replay": True}}


def _variants() -> pl.DataFrame:
    rows = [
        ("d", p, f"{sub}-{g:g}", "noise", sub, g, "global", True)
        for p in PROMPTS
        for sub in SUBTYPES
        for g in STRENGTHS
    ]
    rows += [("d", p, "replay", REPLAY_FAMILY, REPLAY_FAMILY, 0.0, "global", True) for p in PROMPTS]
    names = ["dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position"]
    frame = pl.DataFrame([r[:7] for r in rows], schema=names, orient="row")
    return frame.with_columns(pl.Series("kept", [r[7] for r in rows]))


def _asked(seed: int, counts: list[list[int]], prompts: int = 4) -> np.ndarray:
    """The cells a budgeted run of this design asks at ``counts[prompt][stratum]``."""
    layout = index_grid(run_cells(_variants()).grid, "subtype")
    design = draw_design(layout, seed, [prompts])
    return select_cells(design, np.array(counts))


def _run(
    folder: Path,
    model: str,
    values: np.ndarray,
    asked: np.ndarray | None,
    s: dict[str, float],
    seed: int = 0,
    shared: float | None = None,
) -> Path:
    """A finished run folder: ``values`` the bleu delta of each grid cell (ids order),
    ``asked`` the budgeted cells (None: the full grid), ``s`` its scores.parquet per prompt;
    ``shared``: the dataset's shared variance in budget_estimates.parquet (None: a run
    recorded without that column)."""
    folder.mkdir(parents=True)
    variants = _variants()
    variants.write_parquet(folder / "variants.parquet")
    cells = run_cells(variants)
    mask = np.ones(len(cells.ids), dtype=bool) if asked is None else asked
    grid = cells.frame().join(
        variants, on=["dataset", "prompt_id", "variant_id"], maintain_order="left"
    )
    deltas = grid.with_columns(
        pl.lit(model).alias("model"), pl.lit("bleu").alias("axis"), pl.Series("delta_norm", values)
    ).filter(pl.Series(mask))
    deltas.write_parquet(folder / "deltas.parquet")
    scores = pl.DataFrame(
        {
            "model": model,
            "dataset": "d",
            "prompt_id": list(s),
            "axis": "bleu",
            "s": list(s.values()),
        }
    )
    scores.write_parquet(folder / "scores.parquet")
    prompts = pl.DataFrame({"dataset": "d", "prompt_id": PROMPTS, "prompt": PROMPTS})
    prompts.write_parquet(folder / "prompts.parquet")
    for name in ("summary", "generations"):
        pl.DataFrame({"x": [1]}).write_parquet(folder / f"{name}.parquet")
    (folder / "manifest.json").write_text("{}")
    (folder / "run_config.json").write_text(json.dumps(CONFIG))
    if asked is not None:
        record = {"seed": seed, "level": "subtype", "cells": int(mask.sum()), "full_cells": 32}
        (folder / "budget.json").write_text(json.dumps(record))
        estimates = pl.DataFrame({"model": [model], "dataset": ["d"], "axis": ["bleu"]})
        if shared is not None:
            estimates = estimates.with_columns(pl.lit(shared).alias("shared_variance"))
        estimates.write_parquet(folder / "budget_estimates.parquet")
        cells.frame().with_columns(
            pl.Series("asked", mask),
            pl.lit(1, dtype=pl.Int32).alias("round"),
            pl.lit(0.5).alias("inclusion_probability"),
        ).write_parquet(folder / "budget_cells.parquet")
    return folder


def _pooled(table: pl.DataFrame) -> dict:
    return table.filter(pl.col("dataset") == POOLED).row(0, named=True)


TWO = [[2, 2]] * 4  # two cells per stratum and prompt


def per_prompt(s: dict[str, float]) -> np.ndarray:
    """Each cell the value of its prompt: the root of any of a prompt's cells is that value."""
    return np.array([s[p] for p in run_cells(_variants()).grid.prompt])


def test_the_same_cells_pair_both_runs_roots_on_them_and_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tests pair the roots of the cells both asked (here every prompt's cells hold its
    value), not the runs' scores.parquet (9.0, which must not enter)."""
    asked = _asked(0, TWO)
    s_a = {"p1": 0.20, "p2": 0.25, "p3": 0.30, "p4": 0.22}
    s_b = {"p1": 0.26, "p2": 0.30, "p3": 0.37, "p4": 0.27}
    nine = dict.fromkeys(PROMPTS, 9.0)
    run_a = _run(tmp_path / "a", "hf:old", per_prompt(s_a), asked, nine)
    run_b = _run(tmp_path / "b", "hf:new", per_prompt(s_b), asked, nine)
    out = tmp_path / "p.parquet"
    assert main(["compare", str(run_a), str(run_b), "--paired", "--out", str(out)]) == 0
    row = _pooled(pl.read_parquet(out))
    # the differences 0.06, 0.05, 0.07, 0.05
    assert row["mean_diff"] == pytest.approx(0.0575) and row["n"] == 4
    line = "budgeted design: 16 of 32 cells (50%) in A, the same cells in B"
    assert row["design"].startswith(line)
    assert f"design: {line}" in (tmp_path / "paired.md").read_text()
    assert line in capsys.readouterr().out


def test_a_common_sample_of_one_design_is_re_estimated_from_the_cells_both_asked(
    tmp_path: Path,
) -> None:
    """B's later round asked a third cell of the first stratum; the cells both asked are
    A's (the design at two cells), where every prompt's deltas are constant per stratum, so
    the root is sqrt(0.5 c1^2 + 0.5 c2^2) exactly; B's third cells (5.0) and both
    runs' scores.parquet (9.0) must not enter."""
    asked_a = _asked(0, TWO)
    asked_b = _asked(0, [[3, 2]] * 4)
    assert (asked_a <= asked_b).all() and asked_b.sum() == 20
    cells = run_cells(_variants())
    first = np.array([kind[1] == "spacing" for kind in cells.grid.kind])
    prompt = np.array([PROMPTS.index(p) for p in cells.grid.prompt])
    c_a = np.where(first, 0.1 + 0.01 * prompt, 0.2)
    c_b = np.where(first, 0.3, 0.2 + 0.02 * prompt)
    extra = asked_b & ~asked_a
    run_a = _run(tmp_path / "a", "hf:old", c_a, asked_a, dict.fromkeys(PROMPTS, 9.0))
    run_b = _run(
        tmp_path / "b", "hf:new", np.where(extra, 5.0, c_b), asked_b, dict.fromkeys(PROMPTS, 9.0)
    )
    comparison = compare_paired(run_a, run_b, MARGIN)
    row = _pooled(comparison.table)
    i = np.arange(4)
    s_a = np.sqrt(0.5 * (0.1 + 0.01 * i) ** 2 + 0.5 * 0.2**2)
    s_b = np.sqrt(0.5 * 0.3**2 + 0.5 * (0.2 + 0.02 * i) ** 2)
    assert row["mean_diff"] == pytest.approx(float(np.mean(s_b - s_a)), abs=1e-12)
    assert comparison.design is not None
    assert "A 16 of 32 cells (50%), B 20 of 32 cells (62%)" in comparison.design
    assert "run on the 16 cells both asked (the same design, seed 0" in comparison.design


def test_other_designs_are_two_different_samples_said_so(tmp_path: Path) -> None:
    asked_a, asked_b = _asked(0, TWO), _asked(1, TWO)
    assert not np.array_equal(asked_a, asked_b)
    values = np.linspace(0.1, 0.4, 32)
    s_a = {"p1": 0.20, "p2": 0.25, "p3": 0.30, "p4": 0.22}
    s_b = {"p1": 0.21, "p2": 0.27, "p3": 0.30, "p4": 0.26}
    run_a = _run(tmp_path / "a", "hf:old", values, asked_a, s_a)
    run_b = _run(tmp_path / "b", "hf:new", values, asked_b, s_b, seed=1)
    comparison = compare_paired(run_a, run_b, MARGIN)
    row = _pooled(comparison.table)
    assert row["mean_diff"] == pytest.approx(0.0175)  # the runs' own scores
    assert comparison.design is not None
    assert "design seeds 0 and 1" in comparison.design
    assert "compare two different samples" in comparison.design
    # recorded without the shared variance: the line says the tests do not hold their level
    assert "NOT size-controlled" in comparison.design


def test_two_different_samples_carry_both_runs_shared_variance(tmp_path: Path) -> None:
    """Each run's dataset estimate shares its fitted prior's error over the prompts: the
    paired t-test adds both runs' (0.0004 + 0.0005) to the prompts' own variance of the
    mean, by hand: differences 0.01, 0.02, 0, 0.04."""
    asked_a, asked_b = _asked(0, TWO), _asked(1, TWO)
    values = np.linspace(0.1, 0.4, 32)
    s_a = {"p1": 0.20, "p2": 0.25, "p3": 0.30, "p4": 0.22}
    s_b = {"p1": 0.21, "p2": 0.27, "p3": 0.30, "p4": 0.26}
    run_a = _run(tmp_path / "a", "hf:old", values, asked_a, s_a, shared=0.0004)
    run_b = _run(tmp_path / "b", "hf:new", values, asked_b, s_b, seed=1, shared=0.0005)
    comparison = compare_paired(run_a, run_b, MARGIN)
    row = _pooled(comparison.table)
    d = np.array([0.01, 0.02, 0.0, 0.04])
    t = d.mean() / np.sqrt(d.var(ddof=1) / 4 + 0.0009)
    assert row["p_paired_t"] == pytest.approx(2 * stats.t.sf(t, 3), rel=1e-9)
    plain = stats.ttest_1samp(d, 0.0).pvalue
    assert row["p_paired_t"] > plain
    assert comparison.design is not None and "shared variance" in comparison.design
    assert "NOT size-controlled" not in comparison.design


def test_a_full_run_against_a_budgeted_one_names_the_budgeted_side(tmp_path: Path) -> None:
    """B sampled 3 of the 4 prompts: the full run's cells outside B's sample (9.0) must not
    enter; the test runs on the 3 prompts B sampled."""
    asked_b = _asked(0, TWO, prompts=3)
    cells = run_cells(_variants())
    first = np.array([kind[1] == "spacing" for kind in cells.grid.kind])
    full = np.where(asked_b, np.where(first, 0.1, 0.3), 9.0)
    run_a = _run(tmp_path / "a", "hf:old", full, None, dict.fromkeys(PROMPTS, 1.0))
    sampled = sorted({p for p, a in zip(cells.grid.prompt, asked_b, strict=True) if a})
    run_b = _run(
        tmp_path / "b", "hf:new", np.where(first, 0.2, 0.3), asked_b, dict.fromkeys(sampled, 9.0)
    )
    comparison = compare_paired(run_a, run_b, MARGIN)
    row = _pooled(comparison.table)
    expected = np.sqrt(0.5 * 0.2**2 + 0.5 * 0.3**2) - np.sqrt(0.5 * 0.1**2 + 0.5 * 0.3**2)
    assert row["n"] == 3 and row["mean_diff"] == pytest.approx(expected, abs=1e-12)
    assert comparison.design is not None
    assert comparison.design.startswith("budgeted design in B only: B 12 of 32 cells")
    assert "A the full grid" in comparison.design and "prompts sampled: 3 of 4" in comparison.design
    reverse = compare_paired(run_b, run_a, MARGIN)
    assert reverse.design is not None and reverse.design.startswith("budgeted design in A only")
