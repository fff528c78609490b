"""Stages: build variant candidates, then the semantic filter -> variants.parquet.

Surface noise preserves meaning by construction. Register (and structural) variants are kept
only if BERTScore-F1(variant, base prompt) > threshold; every rejected variant stays in the
artifact with ``kept = false``, its score and the reason, and is never generated or scored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from sago_core.artifacts.schemas import VARIANTS, conform
from sago_core.config import VariantGrid
from sago_core.data.prompt import Prompt
from sago_core.registry.families import filtered_families
from sago_core.variants import build_variants

F1Fn = Callable[[Sequence[str], Sequence[str]], list[float]]


def build_variant_candidates(prompts: pl.DataFrame, grid: VariantGrid, seed: int) -> pl.DataFrame:
    records = [
        Prompt(row["dataset"], row["prompt_id"], row["prompt"], tuple(row["references"]))
        for row in prompts.iter_rows(named=True)
    ]
    variants = build_variants(records, grid, seed)
    frame = pl.DataFrame(
        {
            "dataset": [v.dataset for v in variants],
            "prompt_id": [v.prompt_id for v in variants],
            "variant_id": [v.variant_id for v in variants],
            "family": [v.family for v in variants],
            "subtype": [v.subtype for v in variants],
            "strength": [v.strength for v in variants],
            "position": [v.position for v in variants],
            "text": [v.text for v in variants],
            "seed": [v.seed for v in variants],
            "semantic_score": [None] * len(variants),
            "kept": [True] * len(variants),
            "reject_reason": [None] * len(variants),
            "word_ratio": [None] * len(variants),
        },
        schema=VARIANTS,
    )
    return conform(frame, VARIANTS).sort(["dataset", "prompt_id", "variant_id"])


def _words(column: str) -> pl.Expr:
    return pl.col(column).str.extract_all(r"\S+").list.len().cast(pl.Float64)


def filter_variants(
    candidates: pl.DataFrame, prompts: pl.DataFrame, f1: F1Fn, threshold: float
) -> pl.DataFrame:
    """Score every filtered-family variant against its base prompt; keep score > threshold.

    A variant already rejected upstream (e.g. an unusable rewrite) keeps its reason and is
    not scored. A score recorded upstream (a machine translation's back-translation score)
    is kept where the filter scores nothing. Every row gets its word ratio to the base prompt.
    """
    joined = candidates.join(
        prompts.select("dataset", "prompt_id", "prompt"), on=["dataset", "prompt_id"], how="left"
    )
    checked = joined.filter(pl.col("family").is_in(list(filtered_families())) & pl.col("kept"))
    scores = f1(checked["text"].to_list(), checked["prompt"].to_list()) if len(checked) else []
    scored = checked.select("dataset", "prompt_id", "variant_id").with_columns(
        pl.Series("score", scores, dtype=pl.Float64)
    )
    out = joined.join(scored, on=["dataset", "prompt_id", "variant_id"], how="left")
    too_far = pl.col("score").is_not_null() & (pl.col("score") <= threshold)
    semantic_reason = pl.format(
        "semantic score {} <= threshold {}", pl.col("score").round(4), pl.lit(threshold)
    )
    out = out.with_columns(
        pl.coalesce("score", "semantic_score").alias("semantic_score"),
        (pl.col("kept") & ~too_far).alias("kept"),
        pl.when(too_far)
        .then(semantic_reason)
        .otherwise(pl.col("reject_reason"))
        .alias("reject_reason"),
        (_words("text") / _words("prompt")).alias("word_ratio"),
    )
    return conform(out, VARIANTS).sort(["dataset", "prompt_id", "variant_id"])
