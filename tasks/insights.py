"""Tasks beyond the mean: readable instances, tail statistics, axis structure."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import (
    AXIS_PCA_FILE,
    AXIS_STRUCTURE_FILE,
    INSTANCES_FILE,
    TAILS_FILE,
)
from sago_core.artifacts.schemas import AXIS_PCA, AXIS_STRUCTURE, TAILS, instances_schema
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.stages.instances import build_instances, sampled_instances_schema
from sago_core.statistics.axis_structure import pca_table, spearman_table
from sago_core.statistics.tails import tail_statistics


def read_sampling_tests(paths: list[str] | None) -> pl.DataFrame | None:
    """The models' sampling_tests.parquet together (K > 1); None at K = 1 (none given)."""
    parts = [read_parquet(p) for p in paths or []]
    return pl.concat(parts, how="diagonal_relaxed") if parts else None


@stage_task("build-instances")
def build_instances_task(
    deltas_path: str,
    generations_path: str,
    prompts_path: str,
    out_dir: str,
    sampling_tests_paths: list[str] | None = None,
) -> str:
    """``sampling_tests_paths``: at K > 1 every model's sampling_tests.parquet."""
    tests = read_sampling_tests(sampling_tests_paths)
    frame = build_instances(
        read_parquet(deltas_path),
        read_parquet(generations_path),
        read_parquet(prompts_path),
        tests,
    )
    schema = instances_schema() if tests is None else sampled_instances_schema()
    return str(write_parquet(frame, Path(out_dir) / INSTANCES_FILE, schema))


@stage_task("tail-statistics")
def tail_statistics_task(instances_path: str, out_dir: str) -> str:
    frame = tail_statistics(read_parquet(instances_path))
    return str(write_parquet(frame, Path(out_dir) / TAILS_FILE, TAILS))


@stage_task("axis-structure")
def axis_structure_task(scores_path: str, out_dir: str) -> str:
    frame = spearman_table(read_parquet(scores_path))
    return str(write_parquet(frame, Path(out_dir) / AXIS_STRUCTURE_FILE, AXIS_STRUCTURE))


@stage_task("axis-pca")
def axis_pca_task(scores_path: str, out_dir: str) -> str:
    frame = pca_table(read_parquet(scores_path))
    return str(write_parquet(frame, Path(out_dir) / AXIS_PCA_FILE, AXIS_PCA))
