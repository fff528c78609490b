"""Each variant beside the base answer it is compared with: the one place that pairs them.

A variant is compared with its prompt's base row, or, where a scored file pairs them
(``paired_base``: the reference code asks the base prompt again on every row), with the base
sample its own row names. The pair scores (BLEU, BERTScore, mirroring), the readable
instances and the cross-language pairs an encoder may skip all read the pairing from here,
so a row's scores and the base answer shown beside it cannot come from two base samples.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import PAIRED_BASE
from sago_core.axes.reasoning import with_answers
from sago_core.vocabulary import BASE_VARIANT_ID

# a base sample of one prompt and model: the variant id the pairing names
PAIR_KEY = ["model", "dataset", "prompt_id", "_paired"]


def beside_base(generations: pl.DataFrame) -> pl.DataFrame:
    """The variant rows of ``generations`` (``answer_text`` derived where absent), each with
    its paired base sample's ``base_prompt``, ``base_answer`` and ``base_response`` (null
    when the prompt has no such base sample; ``base_prompt`` also where ``generations`` holds
    no prompt texts)."""
    generations = with_answers(generations)
    columns = generations.columns
    paired = pl.col(PAIRED_BASE) if PAIRED_BASE in columns else pl.lit(None, pl.String)
    # a frame of answers alone (the encoder's pairs) has no prompts to show
    prompt = pl.col("prompt_text") if "prompt_text" in columns else pl.lit(None, pl.String)
    samples = generations.select(
        "model",
        "dataset",
        "prompt_id",
        pl.col("variant_id").alias("_paired"),
        prompt.alias("base_prompt"),
        pl.col("answer_text").alias("base_answer"),
        pl.col("response_text").alias("base_response"),
    ).unique(PAIR_KEY, keep="first", maintain_order=True)
    return (
        generations.filter(pl.col("variant_id") != BASE_VARIANT_ID)
        .with_columns(paired.fill_null(BASE_VARIANT_ID).alias("_paired"))
        .join(samples, on=PAIR_KEY, how="left")
        .drop("_paired")
    )
