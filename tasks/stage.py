"""The one decorator every stage task uses: content-addressed caching, JSON results."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from prefect import task
from prefect.cache_policies import CacheKeyFnPolicy

from sago.tasks.caching import stage_cache_key
from sago.tasks.progress import with_progress

F = TypeVar("F", bound=Callable[..., Any])


def stage_policy(run_dir: Path | None = None) -> CacheKeyFnPolicy:
    """The stage cache policy; with ``run_dir`` a stage's output place is keyed relative to
    it (the stage runner passes its run folder)."""
    return CacheKeyFnPolicy(cache_key_fn=partial(stage_cache_key, run_dir=run_dir))


def stage_task(name: str, run_name: str | None = None, retries: int = 0) -> Callable[[F], Any]:
    """A stage's task: cached by its inputs, its result JSON, and the batches its core
    function counts reported as progress (``tasks/progress.py``)."""
    as_task = task(
        name=name,
        task_run_name=run_name or name,
        # A policy, not ``cache_key_fn``: the flow adds its lock manager to it per run.
        cache_policy=stage_policy(),
        persist_result=True,
        result_serializer="json",
        retries=retries,
        retry_delay_seconds=2,
    )
    return lambda fn: as_task(with_progress(name, fn))
