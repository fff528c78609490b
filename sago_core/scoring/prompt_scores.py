"""Per-prompt stability score: s_X(i) = RMS of normalised deltas over the kept variants.

The replay row (the base prompt asked again) is not a variant: it never enters s. Its
|delta_norm| is kept beside s as that prompt's noise floor.

A non-finite delta_norm (only in deltas written before deltas.py made them missing) counts
as missing with the reason "non-finite measurement": s is the RMS over the finite ones.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import SCORES, conform
from sago_core.vocabulary import NON_FINITE, REPLAY_FAMILY

GROUP = ["model", "dataset", "prompt_id", "axis"]


def finite_deltas(deltas: pl.DataFrame) -> pl.DataFrame:
    """``deltas`` with a non-finite ``delta_norm`` null, its reason ``NON_FINITE``."""
    finite = pl.col("delta_norm").is_finite()
    return deltas.with_columns(
        pl.when(finite).then(pl.col("delta_norm")).alias("delta_norm"),
        pl.when(pl.col("delta_norm").is_not_null() & ~finite)
        .then(pl.lit(NON_FINITE))
        .otherwise(pl.col("missing_reason"))
        .alias("missing_reason"),
    )


def score_prompts(deltas: pl.DataFrame) -> pl.DataFrame:
    """RMS per (model, dataset, prompt, axis); null with a reason when no delta exists."""
    deltas = finite_deltas(deltas)
    variants = deltas.filter(pl.col("family") != REPLAY_FAMILY)
    values = pl.col("delta_norm").drop_nulls()
    scale = values.abs().max()
    # Scaled RMS, max|x| * sqrt(mean((x / max|x|)^2)): squaring a tiny delta directly can
    # underflow to 0 and report a non-zero delta as perfect stability.
    rms = pl.when(scale == 0).then(0.0).otherwise(scale * (values / scale).pow(2).mean().sqrt())
    grouped = variants.group_by(GROUP).agg(
        rms.alias("s"),
        pl.col("delta_norm").drop_nulls().len().alias("n_variants"),
        pl.col("missing_reason").drop_nulls().first().alias("reason"),
    )
    floors = (
        deltas.filter(pl.col("family") == REPLAY_FAMILY)
        .group_by(GROUP)
        .agg(pl.col("delta_norm").abs().drop_nulls().mean().alias("floor"))
    )
    scored = grouped.join(floors, on=GROUP, how="left").with_columns(
        pl.when(pl.col("n_variants") == 0).then(pl.col("reason")).alias("missing_reason")
    )
    return conform(scored, SCORES).sort(GROUP)
