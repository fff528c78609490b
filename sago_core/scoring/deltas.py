"""Signed deltas per (model, prompt, variant, axis), long format, with reasons for gaps.

One delta per registered axis (registry/axes.py: its rule and scale), in registration order.
Every delta compares a variant with the base of the same prompt and model: BLEU/BERT against
the one base response (never regenerated per variant), Prob/Ent of the base response scored
under the variant prompt minus under the base prompt, Act from the per-layer cosines, MR from
the mirroring indicators. A null measurement gives a null delta and a missing_reason.

A non-finite measurement (NaN or inf logprob, entropy, cosine, BLEU, BERTScore: a backend's
underflow, a scorer's NaN) is not a number to subtract: its delta is null with the reason
``NON_FINITE``, so one poisoned value removes exactly its own deltas and never turns the
prompt's s, the SGS, a p-value or the Holm/BH family into NaN. A subtraction that overflows
to inf is treated the same way.

BLEU, BERT and MR compare answers (``answer_text``): a pair whose answer is still inside a
reasoning block is missing with that reason (axes/reasoning.py).
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import DELTAS, conform
from sago_core.axes.reasoning import with_answers
from sago_core.registry.axes import axes_for
from sago_core.vocabulary import (
    BASE_VARIANT_ID,
    MODEL_PROMPT_KEY,
    NON_FINITE,
    ROW_KEY,
    VARIANT_COLUMNS,
)


def compute_deltas(
    generations: pl.DataFrame,
    analysis: pl.DataFrame,
    pairs: pl.DataFrame,
    mirroring: pl.DataFrame,
) -> pl.DataFrame:
    wide = _variant_rows(with_answers(generations), analysis, pairs, mirroring)
    # an axis declared for one family (``lang``: language variants) only where it is present
    present = wide["family"].unique().to_list()
    frames = [_axis_deltas(wide, axis.name, axis.scale, *axis.rule()) for axis in axes_for(present)]
    return conform(pl.concat(frames), DELTAS).sort([*ROW_KEY, "axis"])


def _variant_rows(
    generations: pl.DataFrame,
    analysis: pl.DataFrame,
    pairs: pl.DataFrame,
    mirroring: pl.DataFrame,
) -> pl.DataFrame:
    """One row per variant with every measurement of it and of its prompt's base."""
    is_base = pl.col("variant_id") == BASE_VARIANT_ID
    variants = generations.filter(~is_base).select(
        *ROW_KEY,
        *VARIANT_COLUMNS,
        pl.col("failure_reason").alias("variant_failure"),
        "thinking",
        "answer_text",
    )
    base_failures = generations.filter(is_base).select(
        [
            *MODEL_PROMPT_KEY,
            pl.col("failure_reason").alias("base_failure"),
            pl.col("thinking").alias("base_thinking"),
        ]
    )
    base = analysis.filter(is_base).select(
        [
            *MODEL_PROMPT_KEY,
            pl.col("logprob").alias("logprob_base"),
            pl.col("mean_entropy").alias("ent_base"),
            pl.col("missing_reason").alias("reason_base"),
        ]
    )
    return (
        variants.join(analysis, on=ROW_KEY, how="left")
        .join(base, on=MODEL_PROMPT_KEY, how="left")
        .join(pairs, on=ROW_KEY, how="left")
        .join(mirroring.rename({"missing_reason": "reason_mr"}), on=ROW_KEY, how="left")
        .join(base_failures, on=MODEL_PROMPT_KEY, how="left")
    )


def _axis_deltas(
    wide: pl.DataFrame, axis: str, scale: float, value: pl.Expr, reason: pl.Expr
) -> pl.DataFrame:
    """One axis' deltas; a failed generation (API error after retries) explains every gap
    on its row first, then the axis' own reason; a non-finite value is ``NON_FINITE``."""
    failed = pl.coalesce(
        pl.format("variant answer failed: {}", pl.col("variant_failure")),
        pl.format("base answer failed: {}", pl.col("base_failure")),
    )
    raw = value.cast(pl.Float64)
    delta = pl.when(raw.is_finite()).then(raw).otherwise(None)
    missing = (
        pl.when(raw.is_null())
        .then(pl.coalesce(failed, reason))
        .when(delta.is_null())
        .then(pl.lit(NON_FINITE))
        .otherwise(None)
    )
    return wide.select(
        *ROW_KEY,
        *VARIANT_COLUMNS,
        pl.lit(axis).alias("axis"),
        delta.alias("delta"),
        (delta / scale).alias("delta_norm"),
        missing.alias("missing_reason"),
    )
