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
from sago_core.config import ApiBudget, VllmSettings
from sago_core.errors import ConfigError


@dataclass(frozen=True)
class BackendPlaces:
    """Where a backend keeps files: the shared caches and the run's spending ledger."""

    cache: CacheLayout | None = None
    ledger: Path | None = None


@lru_cache(maxsize=8)
def get_ledger(path: Path, budget: ApiBudget):  # type: ignore[no-untyped-def]
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
    if target.backend in ("hf", "mock"):
        places = BackendPlaces()
    elif target.backend == "vllm":
        places = BackendPlaces(places.cache)
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
    if target.backend == "litellm":
        if target.api is None or places.cache is None or places.ledger is None:
            raise ConfigError(f"model {target.spec!r} needs the api settings, cache and ledger")
        from sago_core.backends.api import ApiBackend

        ledger = get_ledger(places.ledger, target.api.budget)
        return ApiBackend(target.model_id, target.api, places.cache.api, ledger, api_key)
    if target.backend == "mock":
        from sago_core.backends.mock import MockBackend

        return MockBackend(target.model_id)
    if target.source is None:
        raise ConfigError(f"model {target.spec!r} has no resolved weights")
    if target.backend == "vllm":
        if places.cache is None:
            raise ConfigError(f"model {target.spec!r} needs the cache for materialised weights")
        from sago_core.backends.vllm_backend import VllmBackend

        return VllmBackend(
            target.source,
            target.vllm or VllmSettings(),
            places.cache.materialised,
            trust_remote_code=target.trust_remote_code,
            chat_template_kwargs=target.chat_template_kwargs,
            use_model_defaults=target.use_model_defaults,
            devices=target.devices,
        )
    from sago_core.backends.hf import HFBackend

    return HFBackend(
        target.source,
        device=device,
        trust_remote_code=target.trust_remote_code,
        chat_template_kwargs=target.chat_template_kwargs,
        use_model_defaults=target.use_model_defaults,
        devices=target.devices,
    )


def loaded_engines() -> int:
    """How many engines this process has built (tests: a dry run builds none)."""
    return _BUILT_COUNT[0]
