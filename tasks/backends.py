"""Backends for tasks: API keys resolved here (environment or Prefect Secret block), never
passed as parameters, so they can never reach a cache key, an artifact or a log."""

from __future__ import annotations

from sago_core.backends.api import api_key_from_environment
from sago_core.backends.factory import get_backend, is_api_model
from sago_core.backends.protocol import Backend
from sago_core.config import ApiSettings


def resolve_api_key(settings: ApiSettings) -> str | None:
    if settings.key_secret:
        from prefect.blocks.system import Secret

        block: Secret = Secret.load(settings.key_secret, _sync=True)  # type: ignore[assignment,call-arg]
        return str(block.get())
    return api_key_from_environment(settings)


def backend_for(
    model: str, api: ApiSettings | None, cache_dir: str | None, ledger_file: str | None
) -> Backend:
    if not is_api_model(model):
        return get_backend(model)
    settings = api or ApiSettings()
    return get_backend(
        model,
        api=settings,
        api_cache_dir=cache_dir,
        ledger_file=ledger_file,
        api_key=resolve_api_key(settings),
    )
