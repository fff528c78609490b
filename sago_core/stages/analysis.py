"""Stage: teacher-forced scoring pass -> analysis.parquet.

For every prompt text x (base and kept variants) the BASE response y is scored under x: one
forward per pair gives the last-prompt-token hidden states of all layers, log p(y | x) and the
mean token entropy. Hidden states stay in memory only until the per-layer cosines against the
base prompt's states are taken, so the artifact holds cosines, not 30 x d floats per row.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import ANALYSIS, conform
from sago_core.axes.activation import layer_cosines
from sago_core.backends.protocol import Backend, ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings
from sago_core.scoring.axes import BASE_VARIANT_ID

PROMPT_KEY = ["dataset", "prompt_id"]


def analyse_pairs(
    backend: Backend, generations: pl.DataFrame, settings: AnalysisSettings
) -> pl.DataFrame:
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        [
            *PROMPT_KEY,
            pl.col("response_token_ids").alias("base_ids"),
            pl.col("failure_reason").alias("base_failure"),
        ]
    )
    rows = generations.join(base, on=PROMPT_KEY, how="left")
    scorable = [
        failure is None and ids is not None
        for failure, ids in zip(rows["base_failure"], rows["base_ids"], strict=True)
    ]
    requests = [
        ScoringRequest(text, tuple(ids))
        for text, ids, ok in zip(rows["prompt_text"], rows["base_ids"], scorable, strict=True)
        if ok
    ]
    scored = iter(backend.score(requests, settings.batch_size, settings.max_batch_tokens))
    unanswered = TeacherForced(None, None, None, 0, "no base answer to score (generation failed)")
    results = [next(scored) if ok else unanswered for ok in scorable]
    base_hidden: dict[tuple[str, str], np.ndarray | None] = {}
    for row, result in zip(rows.iter_rows(named=True), results, strict=True):
        if row["variant_id"] == BASE_VARIANT_ID:
            base_hidden[(row["dataset"], row["prompt_id"])] = result.hidden
    cosines: list[list[float] | None] = []
    reasons: list[str | None] = []
    for row, result in zip(rows.iter_rows(named=True), results, strict=True):
        reference = base_hidden.get((row["dataset"], row["prompt_id"]))
        if result.hidden is None or reference is None:
            cosines.append(None)
            default = f"backend {backend.name} exposes no hidden states"
            reasons.append(result.missing_reason or default)
        else:
            cosines.append(layer_cosines(result.hidden, reference).tolist())
            reasons.append(None)
    frame = rows.with_columns(
        pl.Series("layer_cosines", cosines, dtype=pl.List(pl.Float64)),
        pl.Series("logprob", [r.logprob for r in results], dtype=pl.Float64),
        pl.Series("mean_entropy", [r.mean_entropy for r in results], dtype=pl.Float64),
        pl.Series("n_response_tokens", [r.n_response_tokens for r in results], dtype=pl.Int32),
        pl.Series("missing_reason", reasons, dtype=pl.String),
    ).with_columns(pl.col("layer_cosines").list.mean().alias("act_cos_mean"))
    return conform(frame, ANALYSIS)
