"""The one decorator every stage task uses: content-addressed caching, JSON results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from prefect import task
from prefect.cache_policies import CacheKeyFnPolicy

from tasks.caching import stage_cache_key

F = TypeVar("F", bound=Callable[..., Any])


def stage_task(name: str, run_name: str | None = None, retries: int = 0) -> Callable[[F], Any]:
    return task(
        name=name,
        task_run_name=run_name or name,
        # A policy, not ``cache_key_fn``: the flow adds its lock manager to it per run.
        cache_policy=CacheKeyFnPolicy(cache_key_fn=stage_cache_key),
        persist_result=True,
        result_serializer="json",
        retries=retries,
        retry_delay_seconds=2,
    )
