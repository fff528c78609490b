"""Stage: POSIX's full matrix -> posix_matrix.parquet (``RunConfig.posix_matrix``, off by
default; Chatterjee et al. 2024, arXiv:2410.02185).

An instance is one prompt and its prompt texts: the base and its kept variants that got an
answer (the replay is the base asked again, no variant, and is left out). For N prompt texts
x_1..x_N and their answers y_1..y_N (``response_token_ids`` of generations.parquet: the
answer each text got, sample 0 at K > 1) every answer y_j is teacher-forced under every
prompt text x_i, the diagonal included: N^2 sequences, log P(y_j | x_i) each. The analysis
stage scores only the column j = base (y_base under every x_i); ``peer_metrics`` reads both.

The cap: an instance with more than ``max_prompts`` texts keeps the ``max_prompts`` whose
hash of (seed, dataset, prompt_id, variant_id) is smallest, a uniform sample without
replacement that does not depend on the model or on which other texts exist, and every
ordered pair among them; each ordered pair of the instance is then equally likely kept, so
the mean over the kept pairs estimates the instance's psi without bias. ``n_prompts``
records N before the cap.

An empty answer (L = 0, 1 / L undefined) is not sent as an answer; its prompt text still
conditions the other answers. The scoring requests go to the backend in chunks, so the
hidden states it returns (unused here) never pile up.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import polars as pl

from sago_core.artifacts.schemas import POSIX_MATRIX, conform
from sago_core.backends.protocol import Backend, ScoringRequest, TeacherForced
from sago_core.config import AnalysisSettings, PosixMatrixSettings
from sago_core.vocabulary import REPLAY_FAMILY

INSTANCE = ["dataset", "prompt_id"]
CHUNK = 256  # scoring requests per backend call
EMPTY_ANSWER = "the answer has no tokens (L = 0): not scored"


def sample_rank(seed: int, dataset: str, prompt_id: str, variant_id: str) -> int:
    """The cap's random key of one prompt text: the smallest ``max_prompts`` are kept."""
    text = "\x1f".join((str(seed), dataset, prompt_id, variant_id))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def kept_texts(generations: pl.DataFrame, max_prompts: int, seed: int) -> pl.DataFrame:
    """The prompt texts each instance's matrix is built on: ``generations`` rows with an
    answer, the replay left out, at most ``max_prompts`` per instance (module docstring),
    with ``n_prompts`` (the instance's texts before the cap)."""
    answered = generations.filter(
        (pl.col("family") != REPLAY_FAMILY)
        & pl.col("failure_reason").is_null()
        & pl.col("response_token_ids").is_not_null()
    )
    ranks = [
        sample_rank(seed, d, p, v)
        for d, p, v in answered.select(*INSTANCE, "variant_id").iter_rows()
    ]
    ranked = answered.with_columns(pl.Series("rank", ranks, dtype=pl.UInt64))
    return (
        ranked.with_columns(pl.len().over(INSTANCE).cast(pl.Int32).alias("n_prompts"))
        .sort([*INSTANCE, "rank", "variant_id"])
        .filter(pl.int_range(pl.len()).over(INSTANCE) < max_prompts)
        .filter(pl.len().over(INSTANCE) >= 2)  # one text has no pair
        .drop("rank")
    )


def matrix_pairs(texts: pl.DataFrame) -> pl.DataFrame:
    """Every (prompt text x_i, answer y_j) of each instance of ``texts``: N^2 rows."""
    prompts = texts.select(
        "model",
        *INSTANCE,
        pl.col("variant_id").alias("prompt_variant_id"),
        pl.col("family").alias("prompt_family"),
        "prompt_text",
        "n_prompts",
    )
    answers = texts.select(
        *INSTANCE,
        pl.col("variant_id").alias("answer_variant_id"),
        pl.col("family").alias("answer_family"),
        pl.col("response_token_ids").alias("answer_ids"),
    )
    return prompts.join(answers, on=INSTANCE, how="inner", maintain_order="left_right")


def _score(
    backend: Backend, requests: list[ScoringRequest], settings: AnalysisSettings
) -> Iterable[TeacherForced]:
    for start in range(0, len(requests), CHUNK):
        part = requests[start : start + CHUNK]
        scored = backend.score(part, settings.batch_size, settings.max_batch_tokens)
        if len(scored) != len(part):
            raise RuntimeError(f"backend {backend.name} scored {len(scored)} of {len(part)}")
        yield from scored


def _reason(backend: Backend, result: TeacherForced) -> str | None:
    if result.logprob is not None:
        return None
    return result.missing_reason or f"backend {backend.name} gave no log-probability"


def posix_matrix(
    backend: Backend,
    generations: pl.DataFrame,
    settings: PosixMatrixSettings,
    scoring: AnalysisSettings,
    seed: int,
) -> pl.DataFrame:
    """posix_matrix.parquet of one shard's ``generations`` (module docstring); ``scoring``
    batches the teacher-forced sequences as the analysis stage does."""
    pairs = matrix_pairs(kept_texts(generations, settings.max_prompts, seed))
    scorable = [len(ids) > 0 for ids in pairs["answer_ids"].to_list()]
    requests = [
        ScoringRequest(text, tuple(ids))
        for text, ids, ok in zip(pairs["prompt_text"], pairs["answer_ids"], scorable, strict=True)
        if ok
    ]
    scored = iter(_score(backend, requests, scoring))
    empty = TeacherForced(None, None, None, 0, EMPTY_ANSWER)
    results = [next(scored) if ok else empty for ok in scorable]
    frame = pairs.with_columns(
        pl.Series("logprob", [r.logprob for r in results], dtype=pl.Float64),
        pl.Series("n_response_tokens", [r.n_response_tokens for r in results], dtype=pl.Int32),
        pl.Series("missing_reason", [_reason(backend, r) for r in results], dtype=pl.String),
    )
    return conform(frame, POSIX_MATRIX)


def matrix_sequences(prompt_texts: Iterable[int], max_prompts: int) -> int:
    """Teacher-forced sequences of the matrix for instances of these many prompt texts
    each (the replay not counted): min(N, cap)^2 per instance with at least two."""
    kept = (min(n, max_prompts) for n in prompt_texts)
    return sum(n * n for n in kept if n >= 2)


def planned_sequences(
    prompts: pl.DataFrame, candidates: pl.DataFrame, extra: list[int], max_prompts: int
) -> int:
    """The dry run's count for one model: each prompt's texts are itself, its candidate
    variants but the replay (``candidates``: dataset, prompt_id, family) and ``extra``
    (per prompt, in ``prompts``' order: structural rewrites and translations, made later);
    an upper bound where the semantic filter may drop some."""
    variants = candidates.filter(pl.col("family") != REPLAY_FAMILY)
    counts = {(d, p): n for d, p, n in variants.group_by(INSTANCE).len().iter_rows()}
    sizes = [
        1 + counts.get(key, 0) + more
        for key, more in zip(prompts.select(INSTANCE).iter_rows(), extra, strict=True)
    ]
    return matrix_sequences(sizes, max_prompts)
