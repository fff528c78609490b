"""Backends for tasks, from a ``ModelTarget``: API keys resolved here (environment or Prefect
Secret block), never passed as parameters, so they can never reach a cache key, an artifact
or a log. ``cache_dir`` (the shared cache root) and ``ledger_file`` are locations, outside
every cache key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.layout import CacheLayout
from sago_core.axes.judge import Complete, RegisterJudge
from sago_core.backends.api import api_key_from_environment
from sago_core.backends.factory import BackendPlaces, open_backend
from sago_core.backends.protocol import Backend
from sago_core.backends.target import ModelTarget, behaviour_key
from sago_core.config import ApiSettings

if TYPE_CHECKING:
    from sago_core.backends.api import ApiBackend


def resolve_api_key(settings: ApiSettings) -> str | None:
    if settings.key_secret:
        from prefect.blocks.system import Secret

        block: Secret = Secret.load(settings.key_secret, _sync=True)  # type: ignore[assignment,call-arg]
        return str(block.get())
    return api_key_from_environment(settings)


def backend_for(target: ModelTarget, cache_dir: str | None, ledger_file: str | None) -> Backend:
    places = BackendPlaces(
        CacheLayout(Path(cache_dir)) if cache_dir else None,
        Path(ledger_file) if ledger_file else None,
    )
    key = resolve_api_key(target.api) if target.is_api and target.api else None
    return open_backend(target, places, key)


def judge_completion(
    target: ModelTarget, cache_dir: str, ledger_file: str, batch_size: int
) -> Complete:
    """A judge's completion (the judge machinery's contract) on any backend: an API model
    takes the conversation, a local one its last message at T = 0 (``batch_size`` prompts
    per generate call); an API judge's spending is booked in ``ledger_file``."""
    backend = backend_for(target, cache_dir, ledger_file)

    def complete(
        conversations: list[list[dict[str, str]]], max_tokens: int
    ) -> list[tuple[str | None, str | None]]:
        if target.is_api:  # an API model (declared in the registry) takes the conversation
            answered = cast("ApiBackend", backend).complete(conversations, max_tokens)
            return [(a.text, a.failure) for a in answered]
        prompts = [conversation[-1]["content"] for conversation in conversations]
        answers = backend.generate(prompts, max_tokens, batch_size)
        return [(a.response_text, a.failure_reason) for a in answers]

    return complete


def register_judge(
    target: ModelTarget, cache_dir: str, ledger_file: str, batch_size: int
) -> RegisterJudge:
    """The register judge on any backend: an API model (the paper's choice) or a local one,
    asked the same single-message YES/NO question at T = 0."""
    complete = judge_completion(target, cache_dir, ledger_file, batch_size)
    cache = JsonCache(CacheLayout(Path(cache_dir)).judge)
    return RegisterJudge(behaviour_key(target), complete, cache)
