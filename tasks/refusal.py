"""Task: refusal consistency of a run's answers (prompts with a kind) -> the refusal tables."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.store import read_parquet
from sago_core.stages.refusal import (
    ANSWER_COLUMNS,
    SAMPLE_COLUMN,
    prompt_kinds,
    refusal_tables,
    write_refusal,
)
from tasks.stage import stage_task


@stage_task("refusal")
def refusal_task(
    prompts_path: str,
    generations_path: str,
    out_dir: str,
    samples_paths: list[str] | None = None,
) -> str:
    """refusal.json (and, when prompts carry a kind, the tables it names) in ``out_dir``;
    a run without kinds reads no generations. ``samples_paths``: at K > 1 every model's
    samples.parquet, whose samples are judged in place of the generations."""
    prompts = read_parquet(prompts_path)
    tables = None
    if prompt_kinds(prompts) is not None:
        columns = [*ANSWER_COLUMNS, SAMPLE_COLUMN]
        samples = (
            pl.concat([read_parquet(p, columns) for p in samples_paths], how="diagonal_relaxed")
            if samples_paths
            else None
        )
        generations = read_parquet(generations_path, ANSWER_COLUMNS)
        tables = refusal_tables(prompts, generations, samples)
    return str(write_refusal(tables, Path(out_dir)))
