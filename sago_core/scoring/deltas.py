"""Signed deltas per (model, prompt, variant, axis), long format, with reasons for gaps.

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
from sago_core.axes.reasoning import UNCLOSED_REASONING, with_answers
from sago_core.vocabulary import AXES, BASE_VARIANT_ID, NON_FINITE, SCALES

KEY = ["model", "dataset", "prompt_id", "variant_id"]
PROMPT_KEY = ["model", "dataset", "prompt_id"]
VARIANT_COLUMNS = ["family", "subtype", "strength", "position"]


def compute_deltas(
    generations: pl.DataFrame,
    analysis: pl.DataFrame,
    pairs: pl.DataFrame,
    mirroring: pl.DataFrame,
) -> pl.DataFrame:
    wide = _variant_rows(with_answers(generations), analysis, pairs, mirroring)
    frames = [_axis_deltas(wide, axis, *measure) for axis, measure in _measures().items()]
    return conform(pl.concat(frames), DELTAS).sort([*KEY, "axis"])


def _variant_rows(
    generations: pl.DataFrame,
    analysis: pl.DataFrame,
    pairs: pl.DataFrame,
    mirroring: pl.DataFrame,
) -> pl.DataFrame:
    """One row per variant with every measurement of it and of its prompt's base."""
    is_base = pl.col("variant_id") == BASE_VARIANT_ID
    variants = generations.filter(~is_base).select(
        KEY + VARIANT_COLUMNS + [pl.col("failure_reason").alias("variant_failure"), "thinking"]
    )
    base_failures = generations.filter(is_base).select(
        [
            *PROMPT_KEY,
            pl.col("failure_reason").alias("base_failure"),
            pl.col("thinking").alias("base_thinking"),
        ]
    )
    base = analysis.filter(is_base).select(
        [
            *PROMPT_KEY,
            pl.col("logprob").alias("logprob_base"),
            pl.col("mean_entropy").alias("ent_base"),
            pl.col("missing_reason").alias("reason_base"),
        ]
    )
    return (
        variants.join(analysis, on=KEY, how="left")
        .join(base, on=PROMPT_KEY, how="left")
        .join(pairs, on=KEY, how="left")
        .join(mirroring.rename({"missing_reason": "reason_mr"}), on=KEY, how="left")
        .join(base_failures, on=PROMPT_KEY, how="left")
    )


def _measures() -> dict[str, tuple[pl.Expr, pl.Expr]]:
    """Per axis, in ``AXES`` order: the signed delta and the reason when it is null."""
    analysis_reason = pl.coalesce(
        pl.col("missing_reason"), pl.col("reason_base"), pl.lit("not measured by the backend")
    )
    thinking = pl.when(pl.col("thinking")).then(pl.lit(f"variant {UNCLOSED_REASONING}"))
    unanswered = pl.coalesce(
        thinking, pl.when(pl.col("base_thinking")).then(pl.lit(f"base {UNCLOSED_REASONING}"))
    )
    measures = {
        "act": (pl.col("act_cos_mean") - 1.0, analysis_reason),
        "bleu": (
            pl.col("bleu") - 100.0,
            pl.coalesce(unanswered, pl.lit("no BLEU for this pair")),
        ),
        "bert": (
            pl.col("bert_f1") - 1.0,
            pl.coalesce(unanswered, pl.lit("no BERTScore for this pair")),
        ),
        "prob": (pl.col("logprob") - pl.col("logprob_base"), analysis_reason),
        "ent": (pl.col("mean_entropy") - pl.col("ent_base"), analysis_reason),
        "mr": (
            (pl.col("m_variant") - pl.col("m_base")).cast(pl.Float64),
            pl.coalesce(pl.col("reason_mr"), pl.lit("no mirroring verdict")),
        ),
    }
    return {axis: measures[axis] for axis in AXES}


def _axis_deltas(wide: pl.DataFrame, axis: str, value: pl.Expr, reason: pl.Expr) -> pl.DataFrame:
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
        KEY
        + VARIANT_COLUMNS
        + [
            pl.lit(axis).alias("axis"),
            delta.alias("delta"),
            (delta / SCALES[axis]).alias("delta_norm"),
            missing.alias("missing_reason"),
        ]
    )
