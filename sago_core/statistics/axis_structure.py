"""Which axes carry their own signal: Spearman correlations and a PCA of per-prompt scores.

Per model, over its per-prompt scores ``s`` (scores.parquet), pooled over datasets (a
prompt is one observation, identified by dataset and prompt id):

- ``axis_structure.parquet``: for every pair of axes, Spearman's rho over the prompts that
  have both scores, with scipy's two-sided p-value (``scipy.stats.spearmanr``). A pair is
  ``redundant`` when |rho| > ``REDUNDANT_RHO`` (0.8) and p < ``REDUNDANT_P`` (0.05): the two
  axes rank prompts almost the same way, so one of them adds little. An axis that is
  redundant with no other axis carries its own signal on this run. Null rho, with the
  reason, with fewer than three prompts or an axis constant over them (rank correlation is
  undefined then).
- ``axis_pca.parquet``: a principal-component breakdown of the standardised scores (the
  eigen-decomposition of their Pearson correlation matrix) over the prompts that have every
  non-constant axis scored: per component, the share of the total variance it explains and
  each axis's loading (unit-norm eigenvector, sign fixed so the largest loading is
  positive). Constant axes and axes without scores are left out, with one row each naming
  the reason. Pooling datasets mixes between-dataset differences into both views.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from sago_core.artifacts.schemas import AXIS_PCA, AXIS_STRUCTURE, conform
from sago_core.vocabulary import AXES

REDUNDANT_RHO = 0.8
REDUNDANT_P = 0.05
MIN_PROMPTS = 3
PROMPT = ["dataset", "prompt_id"]


def wide_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """One row per prompt, one column per axis present (finite s only, else null)."""
    finite = scores.with_columns(
        pl.when(pl.col("s").is_finite()).then(pl.col("s")).alias("s")
    ).select(*PROMPT, "axis", "s")
    wide = finite.pivot(on="axis", index=PROMPT, values="s", aggregate_function="first")
    return wide.sort(PROMPT)


def _pair(model: str, a: str, b: str, wide: pl.DataFrame) -> dict:
    row: dict = {"model": model, "axis_a": a, "axis_b": b}
    if a not in wide.columns or b not in wide.columns:
        return {**row, "n": 0, "missing_reason": "axis not scored"}
    both = wide.select(a, b).drop_nulls()
    row["n"] = both.height
    if both.height < MIN_PROMPTS:
        return {**row, "missing_reason": f"fewer than {MIN_PROMPTS} prompts with both scores"}
    for axis in (a, b):
        if both[axis].n_unique() == 1:
            return {**row, "missing_reason": f"{axis} is constant over these prompts"}
    result = stats.spearmanr(both[a].to_numpy(), both[b].to_numpy())
    rho, p = float(result.statistic), float(result.pvalue)
    redundant = abs(rho) > REDUNDANT_RHO and p < REDUNDANT_P
    return {**row, "spearman_rho": rho, "p_value": p, "redundant": redundant}


def spearman_table(scores: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for (model,), frame in sorted(scores.group_by(["model"]), key=lambda g: str(g[0][0])):
        wide = wide_scores(frame)
        rows += [_pair(str(model), a, b, wide) for a, b in combinations(AXES, 2)]
    return _frame(rows, AXIS_STRUCTURE)


def _usable(wide: pl.DataFrame) -> tuple[list[str], list[tuple[str, str]]]:
    kept, dropped = [], []
    for axis in AXES:
        if axis not in wide.columns or wide[axis].drop_nulls().is_empty():
            dropped.append((axis, "axis not scored"))
        elif wide[axis].drop_nulls().n_unique() == 1:
            dropped.append((axis, "constant over the prompts: no variance to explain"))
        else:
            kept.append(axis)
    return kept, dropped


def principal_components(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(variance shares, loadings as columns) of the standardised columns of ``matrix``,
    largest component first; each loading vector's largest entry is positive."""
    z = (matrix - matrix.mean(axis=0)) / matrix.std(axis=0, ddof=1)
    corr = np.atleast_2d(np.corrcoef(z, rowvar=False))
    eigenvalues, vectors = np.linalg.eigh(corr)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, vectors = np.clip(eigenvalues[order], 0.0, None), vectors[:, order]
    signs = np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])])
    return eigenvalues / eigenvalues.sum(), vectors * np.where(signs == 0, 1.0, signs)


def _pca_rows(model: str, wide: pl.DataFrame) -> list[dict]:
    kept, dropped = _usable(wide)
    rows: list[dict[str, Any]] = [
        {"model": model, "axis": axis, "missing_reason": why} for axis, why in dropped
    ]
    complete = wide.select(kept).drop_nulls() if kept else wide.select()
    if len(kept) < 2 or complete.height < MIN_PROMPTS:
        why = f"PCA needs two varying axes and {MIN_PROMPTS} prompts with every one scored"
        return rows + [
            {"model": model, "axis": axis, "n": complete.height, "missing_reason": why}
            for axis in kept
        ]
    if any(complete[axis].n_unique() == 1 for axis in kept):
        why = "an axis is constant over the prompts scored on every axis"
        return rows + [
            {"model": model, "axis": axis, "n": complete.height, "missing_reason": why}
            for axis in kept
        ]
    shares, loadings = principal_components(complete.to_numpy().astype(np.float64))
    for component, share in enumerate(shares):
        for i, axis in enumerate(kept):
            row: dict[str, Any] = {"model": model, "axis": axis, "n": complete.height}
            row["pca_component"] = component + 1
            row["pca_variance_explained"] = float(share)
            row["pca_loading"] = float(loadings[i, component])
            rows.append(row)
    return rows


def pca_table(scores: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for (model,), frame in sorted(scores.group_by(["model"]), key=lambda g: str(g[0][0])):
        rows += _pca_rows(str(model), wide_scores(frame))
    return _frame(rows, AXIS_PCA)


def _frame(rows: list[dict], schema: dict) -> pl.DataFrame:
    full = [{column: row.get(column) for column in schema} for row in rows]
    return conform(pl.DataFrame(full, schema=schema), schema)


def redundancy_note(structure: pl.DataFrame, model: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(redundant pairs, axes redundant with no other axis) of one model."""
    rows = structure.filter(pl.col("model") == model)
    pairs = [
        (r["axis_a"], r["axis_b"]) for r in rows.filter(pl.col("redundant")).iter_rows(named=True)
    ]
    measured = set(rows.drop_nulls("spearman_rho")["axis_a"]) | set(
        rows.drop_nulls("spearman_rho")["axis_b"]
    )
    tied = {axis for pair in pairs for axis in pair}
    return pairs, [axis for axis in AXES if axis in measured and axis not in tied]
