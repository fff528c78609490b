"""Stage: K > 1 samples per prompt text -> samples.parquet and
sample_analysis.parquet.

``sample_responses``: every prompt text of generations.parquet (base, variants, replay)
answered ``generation.samples`` times. Sample 0 is the generations.parquet row itself, copied
(its text and its seed); samples 1..K-1 are drawn here, each from its own seed
(``sample_seeds.sample_seed(..., sample)``), so a sample depends on its prompt and seed alone:
not on K, not on its batch, not on which other samples are drawn with it. All extra samples of
all prompt texts go to the backend in as few calls as ``generation.replay_apart`` allows (the
replay rows in a call of their own, as the generation stage does), the K - 1 samples of one
text next to each other, so an engine that caches prompt prefixes (vLLM) computes each prompt
once.

``analyse_samples``: each base sample's answer teacher-forced under every prompt text of its
prompt (the base and every variant, the replay included): log p(answer | text), the mean
entropy and the answer's length, the Prob and Ent axes at T > 0. Sample 0 is the
analysis.parquet row's values, copied; samples 1..K-1 are scored here, all in one backend call
(the replay rows in another, as the analysis stage does), batched by the backend. No hidden
states are kept: Act is a property of the prompt, read from analysis.parquet.

``missing_reason`` in sample_analysis.parquet says why ``logprob`` or ``mean_entropy`` is
missing (null when both are there).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.row_cache import KEY, RowCache, digest
from sago_core.artifacts.schemas import SAMPLE_ANALYSIS, SAMPLES, conform
from sago_core.backends.protocol import (
    Backend,
    Sampling,
    ScoringRequest,
    TeacherForced,
)
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings, GenerationSettings
from sago_core.sample_seeds import sample_seed
from sago_core.stages.analysis import _score_apart as score_apart
from sago_core.stages.generation import (
    ANSWER_COLUMNS,
    answer_apart,
    answer_columns,
    answer_keys,
    check_fit,
    model_scope,
    unanswerable,
)
from sago_core.vocabulary import BASE_VARIANT_ID, PROMPT_KEY, REPLAY_FAMILY

TEXT_KEY = [*PROMPT_KEY, "variant_id"]
UNANSWERED = "no base answer to score (generation failed)"


def extra_samples(generations: pl.DataFrame, samples: int) -> pl.DataFrame:
    """The prompt texts of ``generations`` repeated for samples 1..K-1: one row per (text,
    sample), a text's samples next to each other, in the generations' order."""
    extra = list(range(1, samples))
    return (
        generations.select(*TEXT_KEY, "family", "prompt_text")
        .with_columns(pl.lit(extra, dtype=pl.List(pl.Int32)).alias("sample"))
        .explode("sample")
        .drop_nulls("sample")
    )


def sample_seeds(settings: GenerationSettings, model: str, rows: pl.DataFrame) -> list[int]:
    """Each row's seed (``rows``: dataset, prompt_id, variant_id, sample)."""
    return [
        sample_seed(settings.seed, model, d, p, v, s)
        for d, p, v, s in rows.select(*TEXT_KEY, "sample").iter_rows()
    ]


def sample_responses(
    backend: Backend,
    model: str,
    generations: pl.DataFrame,
    settings: GenerationSettings,
    reuse: RowCache | None = None,
) -> pl.DataFrame:
    """samples.parquet: ``generations`` as sample 0 and samples 1..K-1 drawn here; with
    ``reuse`` (the generation stage's answer rows: a sample is keyed by its text and seed
    as a sampled answer is) only the samples no run drew before are asked: a budgeted
    run's later rounds draw only their new cells' samples."""
    if not settings.sampled:
        raise ValueError("samples are drawn at temperature > 0 only")
    first = generations.with_columns(pl.lit(0, dtype=pl.Int32).alias("sample"))
    first = first.with_columns(pl.Series("seed", sample_seeds(settings, model, first)))
    rows = extra_samples(generations, settings.samples)
    rows = rows.with_columns(pl.Series("seed", sample_seeds(settings, model, rows), pl.Int64))
    keys = answer_keys(
        rows, Sampling(settings.temperature, settings.top_p, settings.top_k, tuple(rows["seed"]))
    )
    rows = rows.with_columns(pl.Series(KEY, keys, dtype=pl.String))
    cached = reuse.get(keys) if reuse is not None else pl.DataFrame(schema={KEY: pl.String})
    asked = rows.filter(~pl.col(KEY).is_in(cached[KEY].implode()))
    drawn = _draw(backend, asked, settings) if asked.height else None
    if reuse is not None and drawn is not None:
        reuse.put(drawn.filter(pl.col("failure_reason").is_null()).select(KEY, *ANSWER_COLUMNS))
    reread = rows.join(cached, on=KEY, how="inner").with_columns(
        pl.lit(None, pl.String).alias("failure_reason")
    )
    answers = pl.concat([f for f in (drawn, reread) if f is not None], how="diagonal_relaxed")
    extra = answers.drop("family", "prompt_text", KEY).join(
        generations.drop(*GENERATED), on=TEXT_KEY, how="left", maintain_order="left"
    )
    frame = pl.concat([conform(first, SAMPLES), conform(extra, SAMPLES)])
    return frame.sort([*TEXT_KEY, "sample"], maintain_order=True)


def _draw(backend: Backend, rows: pl.DataFrame, settings: GenerationSettings) -> pl.DataFrame:
    """``rows`` (text, family, seed) with their answers drawn from ``backend``."""
    sampling = Sampling(settings.temperature, settings.top_p, settings.top_k, tuple(rows["seed"]))
    texts = rows["prompt_text"].to_list()
    # a text that does not fit, or whose base does not, is not sampled either (its sample 0
    # failed with the same reason, and the generation stage warned of it)
    failures = unanswerable(rows, check_fit(backend, texts, settings.max_new_tokens))
    outputs = answer_apart(
        backend, texts, rows["family"].to_list(), settings, sampling, failures=failures
    )
    return rows.with_columns(*answer_columns(backend, outputs))


# What a generation adds to its request; the rest of a row is the request.
GENERATED = (
    "response_text",
    "answer_text",
    "response_token_ids",
    "finish_reason",
    "failure_reason",
    "engine",
)


# What a cached sample score holds (row_cache.py): the teacher-forced values of one base
# sample's token ids under one prompt text, which no hidden state enters.
SCORE_COLUMNS = ["logprob", "mean_entropy", "n_response_tokens", "missing_reason"]


def score_cache(cache_root: Path, target: ModelTarget) -> RowCache:
    scope = {"model": model_scope(target), "version": 1}
    schema = {c: SAMPLE_ANALYSIS[c] for c in SCORE_COLUMNS}
    return RowCache(cache_root, "sample_analysis", scope, schema)


def analyse_samples(
    backend: Backend,
    samples: pl.DataFrame,
    analysis: pl.DataFrame,
    settings: AnalysisSettings,
    reuse: RowCache | None = None,
) -> pl.DataFrame:
    """sample_analysis.parquet: base sample s (1..K-1) teacher-forced under every prompt text
    of its prompt; sample 0 copied from ``analysis`` (the analysis stage's scoring). With
    ``reuse``, a (text, answer ids) pair some run scored before is read back: a budgeted
    run's later rounds score only their new cells' samples."""
    texts = samples.filter(pl.col("sample") == 0).select(
        "model", *TEXT_KEY, "family", "prompt_text"
    )
    answers = samples.filter(
        (pl.col("variant_id") == BASE_VARIANT_ID) & (pl.col("sample") > 0)
    ).select(
        *PROMPT_KEY,
        "sample",
        pl.col("response_token_ids").alias("base_ids"),
        pl.col("failure_reason").alias("base_failure"),
    )
    rows = texts.join(answers, on=PROMPT_KEY, how="inner", maintain_order="left").sort(
        [*TEXT_KEY, "sample"], maintain_order=True
    )
    scorable = [
        failure is None and ids is not None
        for failure, ids in zip(rows["base_failure"], rows["base_ids"], strict=True)
    ]
    columns = (rows["prompt_text"], rows["base_ids"], rows["family"])
    keys = [
        digest([text, list(ids) if ids is not None else None, family == REPLAY_FAMILY])
        for text, ids, family in zip(*columns, strict=True)
    ]
    cached = reuse.get([k for k, ok in zip(keys, scorable, strict=True) if ok]) if reuse else None
    known = {r[KEY]: r for r in cached.iter_rows(named=True)} if cached is not None else {}
    ask = [ok and k not in known for ok, k in zip(scorable, keys, strict=True)]
    requests = [
        ScoringRequest(text, tuple(ids))
        for text, ids, go in zip(rows["prompt_text"], rows["base_ids"], ask, strict=True)
        if go
    ]
    replay = [family == REPLAY_FAMILY for family, go in zip(rows["family"], ask, strict=True) if go]
    scored = iter(score_apart(backend, requests, replay, settings) if requests else [])
    unanswered = TeacherForced(None, None, None, 0, UNANSWERED)
    results = [
        next(scored) if go else _cached(known[k]) if ok else unanswered
        for go, ok, k in zip(ask, scorable, keys, strict=True)
    ]
    later = rows.select("model", *TEXT_KEY, "sample").with_columns(
        pl.Series("logprob", [r.logprob for r in results], dtype=pl.Float64),
        pl.Series("mean_entropy", [r.mean_entropy for r in results], dtype=pl.Float64),
        pl.Series("n_response_tokens", [r.n_response_tokens for r in results], dtype=pl.Int32),
        pl.Series("missing_reason", [missing(backend, r) for r in results], dtype=pl.String),
    )
    if reuse is not None:  # a score is stored when it has both values (never a failure)
        reuse.put(
            later.with_columns(pl.Series(KEY, keys, dtype=pl.String))
            .filter(pl.Series(ask) & pl.col("logprob").is_not_null())
            .filter(pl.col("mean_entropy").is_not_null())
            .select(KEY, *SCORE_COLUMNS)
        )
    first = analysis.with_columns(
        pl.lit(0, dtype=pl.Int32).alias("sample"),
        pl.when(pl.col("logprob").is_null() | pl.col("mean_entropy").is_null())
        .then(pl.col("missing_reason"))
        .otherwise(None)
        .alias("missing_reason"),
    )
    frame = pl.concat([conform(first, SAMPLE_ANALYSIS), conform(later, SAMPLE_ANALYSIS)])
    return frame.sort([*TEXT_KEY, "sample"], maintain_order=True)


def _cached(row: dict) -> TeacherForced:
    return TeacherForced(None, row["logprob"], row["mean_entropy"], row["n_response_tokens"], None)


def missing(backend: Backend, result: TeacherForced) -> str | None:
    """Why a scored answer has no log-probability or entropy; None when it has both."""
    if result.logprob is not None and result.mean_entropy is not None:
        return None
    return result.missing_reason or f"backend {backend.name} gave no log-probability"
