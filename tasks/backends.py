"""Backends for tasks: API keys resolved here (environment or Prefect Secret block), never
passed as parameters, so they can never reach a cache key, an artifact or a log."""

from __future__ import annotations

from pathlib import Path

from sago_core.artifacts.json_cache import JsonCache
from sago_core.axes.judge import RegisterJudge
from sago_core.backends.api import ApiBackend, api_key_from_environment
from sago_core.backends.factory import get_backend, is_api_model
from sago_core.backends.model_source import parse_model_spec
from sago_core.backends.protocol import Backend
from sago_core.config import ApiSettings, VllmSettings
from sago_core.errors import ConfigError


def resolve_api_key(settings: ApiSettings) -> str | None:
    if settings.key_secret:
        from prefect.blocks.system import Secret

        block: Secret = Secret.load(settings.key_secret, _sync=True)  # type: ignore[assignment,call-arg]
        return str(block.get())
    return api_key_from_environment(settings)


def api_backend(
    model: str, api: ApiSettings | None, cache_dir: str | None, ledger_file: str | None
) -> ApiBackend:
    settings = api or ApiSettings()
    backend = get_backend(
        model,
        api=settings,
        api_cache_dir=str(Path(cache_dir) / "api") if cache_dir else None,
        ledger_file=ledger_file,
        api_key=resolve_api_key(settings),
    )
    assert isinstance(backend, ApiBackend)
    return backend


def register_judge(
    model: str, api: ApiSettings | None, cache_dir: str, ledger_file: str
) -> RegisterJudge:
    if not is_api_model(model):
        raise ConfigError(f"judge.model {model!r} must be an API model (litellm:...)")
    backend = api_backend(model, api, cache_dir, ledger_file)

    def complete(
        conversations: list[list[dict[str, str]]], max_tokens: int
    ) -> list[tuple[str | None, str | None]]:
        return [(a.text, a.failure) for a in backend.complete(conversations, max_tokens)]

    return RegisterJudge(backend.identity(), complete, JsonCache(Path(cache_dir) / "judge"))


def backend_for(
    model: str,
    api: ApiSettings | None,
    cache_dir: str | None,
    ledger_file: str | None,
    vllm: VllmSettings | None = None,
    trust_remote_code: bool = False,
) -> Backend:
    if is_api_model(model):
        return api_backend(model, api, cache_dir, ledger_file)
    # Passed only when set: get_backend is memoised on its arguments, and the same spec used
    # elsewhere (the structural rewriter) must find the engine already loaded.
    trusted = {"trust_remote_code": True} if trust_remote_code else {}
    if parse_model_spec(model).backend == "vllm":
        weights = str(Path(cache_dir) / "materialised") if cache_dir else None
        return get_backend(model, vllm=vllm or VllmSettings(), weights_cache_dir=weights, **trusted)
    return get_backend(model, **trusted)
