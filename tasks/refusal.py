"""Task: refusal consistency of a run's answers (prompts with a kind) -> the refusal tables."""

from __future__ import annotations

from pathlib import Path

from sago_core.artifacts.store import read_parquet
from sago_core.stages.refusal import ANSWER_COLUMNS, prompt_kinds, refusal_tables, write_refusal
from tasks.stage import stage_task


@stage_task("refusal")
def refusal_task(prompts_path: str, generations_path: str, out_dir: str) -> str:
    """refusal.json (and, when prompts carry a kind, the tables it names) in ``out_dir``;
    a run without kinds reads no generations."""
    prompts = read_parquet(prompts_path)
    tables = None
    if prompt_kinds(prompts) is not None:
        tables = refusal_tables(prompts, read_parquet(generations_path, ANSWER_COLUMNS))
    return str(write_refusal(tables, Path(out_dir)))
