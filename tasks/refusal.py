"""Task: refusal consistency of a run's answers (prompts with a kind) -> the refusal tables.

With a refusal judge (``refusal.judge`` in the config) the task also drives the judge model:
built from its ``ModelTarget`` on any backend (``tasks/backends.py``: an API judge's
spending is booked in the ledger), its verdicts cached under the shared cache's judge
folder by (judge identity, rubric version, request, response). Without one, no judge is
built and the task's parameters, so its cache key, are what they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from sago.tasks.backends import judge_completion
from sago.tasks.stage import stage_task
from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.layout import CacheLayout, RunLayout
from sago_core.artifacts.store import read_parquet, read_text
from sago_core.backends.target import ModelTarget, behaviour_key
from sago_core.config.refusal import RefusalSettings
from sago_core.refusal.judge import DEFAULT_RUBRIC, RefusalJudge
from sago_core.stages.refusal import (
    SAMPLE_COLUMN,
    answer_columns,
    prompt_kinds,
    refusal_tables,
    write_refusal,
)


def refusal_judge(
    settings: RefusalSettings, target: ModelTarget | None, layout: RunLayout
) -> dict[str, Any]:
    """The refusal stage's judge arguments: the judge's target, rubric and batch size and
    where its cache and ledger are; none without a judge, so the stage's cache key stays."""
    if target is None:
        return {}
    return {
        "judge": target,
        "rubric": settings.rubric,
        "judge_batch_size": settings.batch_size,
        "cache_dir": str(layout.cache.root),
        "ledger_file": str(layout.ledger),
    }


def all_refusals_judged(refusal_json: str) -> bool:
    """The stage is committed only when no judge call failed (the answered ones are
    cached, so a later run asks only the failed ones again)."""
    record = json.loads(read_text(Path(refusal_json)))
    return not (record.get("judge") or {}).get("calls_failed")


@stage_task("refusal")
def refusal_task(
    prompts_path: str,
    generations_path: str,
    out_dir: str,
    samples_paths: list[str] | None = None,
    judge: ModelTarget | None = None,
    rubric: str = DEFAULT_RUBRIC,
    judge_batch_size: int = 16,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    """refusal.json (and, when prompts carry a kind, the tables it names) in ``out_dir``;
    a run without kinds reads no generations and asks no judge. ``samples_paths``: at K > 1
    every model's samples.parquet, whose samples are judged in place of the generations.
    ``judge``: a refusal judge (``refusal_judge``'s arguments), asked of every answer."""
    prompts = read_parquet(prompts_path)
    tables = None
    if prompt_kinds(prompts) is not None:
        refusal = None
        if judge is not None:
            if not (cache_dir and ledger_file):
                raise ValueError("a refusal judge needs cache_dir and ledger_file")
            complete = judge_completion(judge, cache_dir, ledger_file, judge_batch_size)
            cache = JsonCache(CacheLayout(Path(cache_dir)).judge)
            refusal = RefusalJudge(behaviour_key(judge), complete, cache, rubric, judge.spec)
        columns = answer_columns(refusal is not None)
        samples = (
            pl.concat(
                [read_parquet(p, [*columns, SAMPLE_COLUMN]) for p in samples_paths],
                how="diagonal_relaxed",
            )
            if samples_paths
            else None
        )
        generations = read_parquet(generations_path, columns)
        tables = refusal_tables(prompts, generations, samples, refusal)
    return str(write_refusal(tables, Path(out_dir)))
