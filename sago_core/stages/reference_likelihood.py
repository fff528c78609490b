"""Stage: teacher-forced log-likelihood of each prompt's first reference answer.

The consistency study scores checkpoints by accuracy and by the likelihood of the reference
answer; the per-token mean makes answers of different lengths comparable. Prompts without a
reference, and backends that cannot tokenise or score, give null with a reason.
"""

from __future__ import annotations

import math

import polars as pl

from sago_core.artifacts.schemas import REFERENCE_LIKELIHOOD, conform
from sago_core.backends.protocol import Backend, ScoringRequest
from sago_core.config import AnalysisSettings
from sago_core.vocabulary import NON_FINITE


def reference_likelihood(
    backend: Backend, model: str, prompts: pl.DataFrame, settings: AnalysisSettings
) -> pl.DataFrame:
    rows: list[dict] = []
    requests: list[ScoringRequest] = []
    scored_rows: list[dict] = []
    for prompt in prompts.iter_rows(named=True):
        row = {"model": model, "dataset": prompt["dataset"], "prompt_id": prompt["prompt_id"]}
        references = [r for r in (prompt["references"] or []) if r and r.strip()]
        ids = backend.encode_response(references[0].strip()) if references else None
        if not references:
            row["missing_reason"] = "no reference answer"
        elif not ids:
            row["missing_reason"] = "the backend cannot tokenise a reference answer"
        else:
            requests.append(ScoringRequest(prompt["prompt"], ids))
            scored_rows.append(row)
        rows.append(row)
    results = backend.score(requests, settings.batch_size, settings.max_batch_tokens)
    for row, result in zip(scored_rows, results, strict=True):
        row["n_tokens"] = result.n_response_tokens
        if result.logprob is None:
            row["missing_reason"] = (
                result.missing_reason or "the backend gives no log-probabilities"
            )
        elif not math.isfinite(result.logprob):
            row["missing_reason"] = NON_FINITE
        else:
            row["logprob"] = result.logprob
            row["logprob_per_token"] = result.logprob / max(result.n_response_tokens, 1)
    frame = pl.DataFrame(rows, schema=REFERENCE_LIKELIHOOD)
    return conform(frame, REFERENCE_LIKELIHOOD).sort(["model", "dataset", "prompt_id"])
