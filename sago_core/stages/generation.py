"""Stage: greedy responses to the base prompt and every kept variant -> generations.parquet."""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import GENERATIONS, conform
from sago_core.backends.protocol import Backend
from sago_core.config import GenerationSettings
from sago_core.scoring.axes import BASE_VARIANT_ID


def generation_requests(prompts: pl.DataFrame, variants: pl.DataFrame) -> pl.DataFrame:
    """One row per prompt text to answer: the base (variant_id 'base') plus kept variants."""
    base = prompts.select(
        "dataset",
        "prompt_id",
        pl.lit(BASE_VARIANT_ID).alias("variant_id"),
        pl.lit("base").alias("family"),
        pl.lit("base").alias("subtype"),
        pl.lit(0.0).alias("strength"),
        pl.lit("global").alias("position"),
        pl.col("prompt").alias("prompt_text"),
    )
    kept = variants.filter(pl.col("kept")).select(
        "dataset",
        "prompt_id",
        "variant_id",
        "family",
        "subtype",
        "strength",
        "position",
        pl.col("text").alias("prompt_text"),
    )
    return pl.concat([base, kept]).sort(["dataset", "prompt_id", "variant_id"])


def generate_responses(
    backend: Backend,
    model: str,
    prompts: pl.DataFrame,
    variants: pl.DataFrame,
    settings: GenerationSettings,
) -> pl.DataFrame:
    requests = generation_requests(prompts, variants)
    outputs = backend.generate(
        requests["prompt_text"].to_list(), settings.max_new_tokens, settings.batch_size
    )
    frame = requests.with_columns(
        pl.lit(model).alias("model"),
        pl.Series("response_text", [o.response_text for o in outputs], dtype=pl.String),
        pl.Series(
            "response_token_ids",
            [list(o.response_token_ids) for o in outputs],
            dtype=pl.List(pl.Int32),
        ),
        pl.Series("finish_reason", [o.finish_reason for o in outputs], dtype=pl.String),
    )
    return conform(frame, GENERATIONS)
