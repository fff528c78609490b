"""Per-prompt stability score: s_X(i) = RMS of normalised deltas over the kept variants."""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import SCORES, conform


def score_prompts(deltas: pl.DataFrame) -> pl.DataFrame:
    """RMS per (model, dataset, prompt, axis); null with a reason when no delta exists."""
    grouped = deltas.group_by(["model", "dataset", "prompt_id", "axis"]).agg(
        (pl.col("delta_norm").drop_nulls().pow(2).mean().sqrt()).alias("s"),
        pl.col("delta_norm").drop_nulls().len().alias("n_variants"),
        pl.col("missing_reason").drop_nulls().first().alias("reason"),
    )
    scored = grouped.with_columns(
        pl.when(pl.col("n_variants") == 0).then(pl.col("reason")).alias("missing_reason")
    )
    return conform(scored, SCORES).sort(["model", "dataset", "prompt_id", "axis"])
