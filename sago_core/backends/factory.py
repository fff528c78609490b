"""Build a backend from a ``ModelTarget``; each engine once per worker process, reused.

The one way to get a backend: the evaluated models, the structural rewriter, the judge and
the consistency checkpoints all come through ``open_backend``, memoised on the target (what
the engine is) and the places its backend writes to, so two callers naming the same model
share one engine however they spell the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sago_core.artifacts.layout import CacheLayout
from sago_core.backends.protocol import Backend
from sago_core.backends.target import ModelTarget
from sago_core.config import ApiSpending


@dataclass(frozen=True)
class BackendPlaces:
    """Where a backend keeps files: the shared caches and the run's spending ledger."""

    cache: CacheLayout | None = None
    ledger: Path | None = None


@lru_cache(maxsize=8)
def get_ledger(path: Path, budget: ApiSpending):  # type: ignore[no-untyped-def]
    """One ledger per run file in this process, shared by every API model and the judge."""
    from sago_core.backends.api_ledger import ApiLedger

    return ApiLedger(path, budget)


def open_backend(
    target: ModelTarget,
    places: BackendPlaces | None = None,
    api_key: str | None = None,
    device: str = "auto",
) -> Backend:
    """The process-wide engine of ``target`` (built on first use). Only the places its own
    backend uses count, so a transformers model is one engine whoever asks for it."""
    places = places or BackendPlaces()
    uses = target.declared.places
    places = BackendPlaces(
        places.cache if "cache" in uses else None, places.ledger if "ledger" in uses else None
    )
    return _open(target, places, api_key if target.is_api else None, device)


_BUILT: list[Backend] = []
_BUILT_COUNT = [0]  # ever built in this process (close_engines does not reset it)


def close_engines() -> None:
    """End every engine this process built (worker processes included) and forget them: a
    long-lived process (a test session, a notebook) that is done with its models."""
    while _BUILT:
        close = getattr(_BUILT.pop(), "close", None)
        if callable(close):
            close()
    _open.cache_clear()


@lru_cache(maxsize=8)
def _open(target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str) -> Backend:
    backend = _build(target, places, api_key, device)
    _BUILT.append(backend)
    _BUILT_COUNT[0] += 1
    return backend


def _build(target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str) -> Backend:
    """The engine of ``target``, by its backend's declared builder (imported only now)."""
    backend: Backend = target.declared.builder()(target, places, api_key, device)
    return backend


def loaded_engines() -> int:
    """How many engines this process has built (tests: a dry run builds none)."""
    return _BUILT_COUNT[0]
