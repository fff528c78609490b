"""Tasks of the study (``sago study``): the checkpoint series and its training split, reference
likelihoods, checkpoint scores, partial correlations, sign agreement and the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NONE

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import (
    CHECKPOINT_SCORES_FILE,
    CONSISTENCY_REPORT_FILE,
    PARTIAL_CORRELATIONS_FILE,
    REFERENCE_LIKELIHOOD_FILE,
    SIGN_AGREEMENT_FILE,
    TRAINING_SPLIT_FILE,
)
from sago_core.artifacts.schemas import (
    CHECKPOINT_SCORES,
    PARTIAL_CORRELATIONS,
    REFERENCE_LIKELIHOOD,
    SIGN_AGREEMENT,
)
from sago_core.artifacts.store import read_parquet, write_json, write_parquet, write_text
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings
from sago_core.stages.reference_likelihood import reference_likelihood
from sago_core.study.config import StudyConfig, StudyStatistics
from sago_core.study.matrix import partial_correlation_table, sign_agreement
from sago_core.study.report import render_study
from sago_core.study.scores import checkpoint_scores, current_columns
from sago_core.study.series import study_split_record


@task(name="checkpoint-series", cache_policy=NONE, persist_result=False, result_serializer="json")
def checkpoint_series_task(config: StudyConfig, out_dir: str) -> str:
    """Not cached: it looks at the checkpoint folders every time (building only what is
    missing), so a deleted series is rebuilt and an overlapping split is always refused."""
    record = study_split_record(config)
    return str(write_json(record, Path(out_dir) / TRAINING_SPLIT_FILE))


@stage_task("reference-likelihood", run_name="reference-likelihood[{model}]")
def reference_likelihood_task(
    model: str,
    target: ModelTarget,
    prompts_path: str,
    settings: AnalysisSettings,
    out_dir: str,
    cache_dir: str | None = None,
) -> str:
    backend = backend_for(target, cache_dir, None)
    frame = reference_likelihood(backend, model, read_parquet(prompts_path), settings)
    return str(
        write_parquet(frame, Path(out_dir) / REFERENCE_LIKELIHOOD_FILE, REFERENCE_LIKELIHOOD)
    )


@stage_task("checkpoint-scores")
def checkpoint_scores_task(
    checkpoints: list[tuple[str, int, str]],
    prompts_path: str,
    generations_path: str,
    summary_path: str,
    likelihood_paths: list[str],
    out_dir: str,
) -> str:
    import polars as pl

    frame = checkpoint_scores(
        [tuple(c) for c in checkpoints],  # type: ignore[misc]
        read_parquet(prompts_path),
        read_parquet(generations_path),
        read_parquet(summary_path),
        pl.concat([read_parquet(p) for p in likelihood_paths]),
    )
    return str(write_parquet(frame, Path(out_dir) / CHECKPOINT_SCORES_FILE, CHECKPOINT_SCORES))


@stage_task("partial-correlations")
def partial_correlations_task(
    scores_path: str,
    in_distribution: str,
    out_of_distribution: list[str],
    statistics: StudyStatistics,
    out_dir: str,
) -> str:
    frame = partial_correlation_table(
        current_columns(read_parquet(scores_path)),
        in_distribution,
        list(out_of_distribution),
        knots=statistics.spline_knots,
        block_length=statistics.block_length,
        alpha=statistics.alpha,
        corrected_test=statistics.corrected_test,
        draws=statistics.permutation_draws,
    )
    path = Path(out_dir) / PARTIAL_CORRELATIONS_FILE
    return str(write_parquet(frame, path, PARTIAL_CORRELATIONS))


@stage_task("sign-agreement")
def sign_agreement_task(partial_path: str, out_dir: str) -> str:
    frame = sign_agreement(current_columns(read_parquet(partial_path)))
    return str(write_parquet(frame, Path(out_dir) / SIGN_AGREEMENT_FILE, SIGN_AGREEMENT))


# The stage keeps its first name: it keys the cached page of every saved study folder.
@stage_task("render-consistency")
def render_study_task(
    scores_path: str,
    partial_path: str,
    agreement_path: str,
    split_path: str,
    settings: dict[str, Any],
    out_dir: str,
) -> str:
    page = render_study(
        current_columns(read_parquet(scores_path)),
        current_columns(read_parquet(partial_path)),
        current_columns(read_parquet(agreement_path)),
        settings,
        json.loads(Path(split_path).read_text(encoding="utf-8")),
    )
    return str(write_text(page, Path(out_dir) / CONSISTENCY_REPORT_FILE))
