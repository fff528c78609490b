"""Per-prompt scores of a budgeted run: the design-based estimate of the score the full
grid would give (sago_core/budget/estimate.py: the stratified mean square's root, its bias
corrected), in place of the plain RMS over the cells asked, which over-weights the strata
sampled most. Everything else of scores.parquet (cells measured, noise floor, the reason of
a missing score) is what ``score_prompts`` says of the cells asked."""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import SCORES, conform
from sago_core.scoring.prompt_scores import GROUP, score_prompts


def design_scores(deltas: pl.DataFrame, budget_prompts: pl.DataFrame) -> pl.DataFrame:
    plain = score_prompts(deltas)
    design = budget_prompts.select(*GROUP, pl.col("s").alias("design_s"))
    joined = plain.join(design, on=GROUP, how="left").with_columns(
        pl.when(pl.col("s").is_not_null()).then(pl.col("design_s")).alias("s")
    )
    return conform(joined, SCORES).sort(GROUP)
